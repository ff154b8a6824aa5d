// Server streaming benchmark (`npm run bench:server`). In one run, side by side:
//  1. throughput: `head -c SIZE /dev/zero` streamed to a client over exec-wire
//     HTTP (the ComputerClient SDK), SSE (fetch + our SSE parser, each event's
//     data decoded by decodeExecFrame), WebSocket (`ws` + the exec-wire decoder)
//     and the SDK over its websocket transport (text frames, and binary
//     records negotiated by subprotocol), against a raw
//     node:http server piping the same command's stdout (fetch client). Every
//     client decodes back to the command's bytes and checks the count;
//  2. fan-out: N subscribers (default 500, one HTTP connection each) on one
//     execution: aggregate delivered throughput and the server's RSS;
//  3. latency: a child writes its clock every 10 ms; the client computes
//     receipt - write per line (p50/p99) for each transport.
// The servers run as separate processes (the CLI's `serve` and
// raw-server.ts) so server and client do not share an event loop, and so the
// server's RSS is its own. Usage (`npm run bench:server -- ARGS`, or after
// `npm run bench:build`):
//   node .bench-out/bench/server/run.js [--size MiB] [--reps N] [--subscribers N]
//        [--fanout-size MiB] [--phases throughput,fanout,latency]

import http from "node:http";
import WebSocket from "ws";
import { ComputerClient } from "../../src/client/index.js";
import type { OutputEvent } from "../../src/index.js";
import { createSseParser, decodeExecFrame, ExecWireDecoder } from "../../src/wire/index.js";
import { numberOption, stringOption } from "../support/args.js";
import { cpuSeconds, rssMiB } from "../support/processes.js";
import { median, percentile } from "../support/stats.js";
import { startServers, TOKEN } from "./servers.js";

const SIZE = numberOption("size", 1024) * 1024 * 1024;
const REPS = numberOption("reps", 3);
const PHASES = new Set(stringOption("phases", "throughput,fanout,latency").split(","));
const SUBS = numberOption("subscribers", 500);
const FANOUT_SIZE = numberOption("fanout-size", 2) * 1024 * 1024;
const MB = 1e6;

/** One streamed run: command-output bytes received and the time it took. */
interface Run {
  bytes: number;
  ms: number;
}

/** A response body as the async iterable of byte chunks Node's fetch gives. */
function bodyOf(res: Response): AsyncIterable<Uint8Array> {
  return res.body as unknown as AsyncIterable<Uint8Array>;
}

// ---- throughput ---------------------------------------------------------------

async function rawRun(rawUrl: string, cmd: string): Promise<Run> {
  const t0 = performance.now();
  const res = await fetch(`${rawUrl}/?cmd=${encodeURIComponent(cmd)}`);
  let bytes = 0;
  for await (const c of bodyOf(res)) bytes += c.length;
  return { bytes, ms: performance.now() - t0 };
}

async function ndjsonRun(client: ComputerClient, cmd: string): Promise<Run> {
  const t0 = performance.now();
  const handle = await client.exec(cmd);
  const reader = handle.events({ heartbeats: false }).getReader();
  let bytes = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    if (value.name === "stdout") bytes += value.value.length;
  }
  const ms = performance.now() - t0;
  await client.dispose(handle.id);
  return { bytes, ms };
}

/** Starts a command and returns its event stream as SSE (POST /v1/execs?stream=1). */
function startSse(url: string, body: object): Promise<Response> {
  return fetch(`${url}/v1/execs?stream=1`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${TOKEN}`,
      "content-type": "application/json",
      accept: "text/event-stream",
    },
    body: JSON.stringify(body),
  });
}

async function sseRun(url: string, client: ComputerClient, cmd: string): Promise<Run> {
  const t0 = performance.now();
  const res = await startSse(url, { command: cmd });
  let bytes = 0;
  const parser = createSseParser({
    onEvent(e) {
      if (e.type !== "stdout") return;
      // Each event's data is one exec-wire frame: decoded by the codec (its
      // fast path, strict base64), as a browser client of ours would.
      bytes += (decodeExecFrame(e.data) as OutputEvent).value.length;
    },
  });
  for await (const c of bodyOf(res)) parser.feed(c);
  parser.end();
  const ms = performance.now() - t0;
  await client.dispose(res.headers.get("x-exec-id") ?? "");
  return { bytes, ms };
}

async function wsRun(url: string, client: ComputerClient, cmd: string): Promise<Run> {
  const ws = new WebSocket(`${url.replace("http", "ws")}/v1/ws`, {
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  const t0 = performance.now();
  // Gate on stdin so the subscription is in place before the first byte.
  // Started with a plain POST (no stream-on-create): the SDK's exec() would
  // hold an unread HTTP stream of its own, and the server's backpressure
  // would pace the command to that stream instead of to this socket.
  const res = await client.request("POST", "/v1/execs", {
    json: { command: `head -c 1 >/dev/null; ${cmd}`, stdin: { pipe: true } },
  });
  const handle = await client.get(((await res.json()) as { id: string }).id);
  const decoder = new ExecWireDecoder();
  let bytes = 0;
  const done = new Promise<void>((resolve, reject) => {
    ws.on("message", (data: Buffer) => {
      try {
        for (const ev of decoder.push(data)) {
          if (ev.name === "stdout") bytes += ev.value.length;
          else if (ev.name === "exit") resolve();
        }
      } catch (err) {
        // An error frame (or a malformed one): the decoder raises it.
        reject(err);
      }
    });
  });
  ws.send(JSON.stringify({ type: "subscribe", id: handle.id }));
  await handle.write("g");
  await handle.end();
  await done;
  const ms = performance.now() - t0;
  ws.close();
  await client.dispose(handle.id);
  return { bytes, ms };
}

// ---- fan-out ------------------------------------------------------------------

async function fanout(url: string, client: ComputerClient, serverPid: number) {
  const handle = await client.exec(`head -c 1 >/dev/null; head -c ${FANOUT_SIZE} /dev/zero`, {
    stdin: "pipe",
  });
  const agent = new http.Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  const u = new URL(url);
  let peakRss = rssMiB(serverPid);
  const baseRss = peakRss;
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, rssMiB(serverPid));
  }, 25);
  let connected = 0;
  let allConnected = () => {};
  const connectedP = new Promise<void>((r) => {
    allConnected = r;
  });
  const subs: Promise<number>[] = [];
  for (let i = 0; i < SUBS; i++) {
    subs.push(
      new Promise<number>((resolve, reject) => {
        const req = http.get(
          {
            host: u.hostname,
            port: u.port,
            path: `/v1/execs/${handle.id}/events?heartbeats=0`,
            headers: { authorization: `Bearer ${TOKEN}`, accept: "application/x-ndjson" },
            agent,
          },
          (res) => {
            if (++connected === SUBS) allConnected();
            let bytes = 0;
            let tail = "";
            res.on("data", (c: Buffer) => {
              bytes += c.length;
              tail = (tail + c.toString("latin1", Math.max(0, c.length - 200))).slice(-200);
            });
            res.on("end", () => {
              if (!tail.includes('"name":"exit"')) reject(new Error("stream ended without exit"));
              else resolve(bytes);
            });
          },
        );
        req.on("error", reject);
      }),
    );
  }
  await connectedP;
  const t0 = performance.now();
  await handle.write("g");
  await handle.end();
  const wireBytes = await Promise.all(subs);
  const ms = performance.now() - t0;
  clearInterval(sampler);
  agent.destroy();
  const outBytes = SUBS * FANOUT_SIZE;
  return {
    ms,
    deliveredMBps: outBytes / MB / (ms / 1000),
    wireMBps: wireBytes.reduce((a, b) => a + b, 0) / MB / (ms / 1000),
    baseRss,
    peakRss,
  };
}

// ---- latency ------------------------------------------------------------------

const LAT_N = 300;
const LAT_CMD = {
  argv: [
    process.execPath,
    "-e",
    `let i=0;const t=setInterval(()=>{process.stdout.write((performance.timeOrigin+performance.now()).toFixed(3)+"\\n");if(++i===${LAT_N})clearInterval(t)},10)`,
  ],
};
const now = () => performance.timeOrigin + performance.now();

function collectLines(text: string, samples: number[], at: number) {
  for (const line of text.split("\n")) if (line) samples.push(at - Number(line));
}

async function latencyNdjson(client: ComputerClient) {
  const handle = await client.exec(LAT_CMD, { encoding: "utf8" });
  const reader = handle.events({ heartbeats: false }).getReader();
  const samples: number[] = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    // Requested as utf8: output arrives as text.
    if (value.name === "stdout") collectLines(value.value as string, samples, now());
  }
  return samples;
}

async function latencySse(url: string) {
  const res = await startSse(url, { ...LAT_CMD, encoding: "utf8" });
  const samples: number[] = [];
  const parser = createSseParser({
    onEvent(e) {
      if (e.type === "stdout") {
        collectLines((decodeExecFrame(e.data) as OutputEvent<string>).value, samples, now());
      }
    },
  });
  for await (const c of bodyOf(res)) parser.feed(c);
  return samples;
}

async function latencyWs(url: string, client: ComputerClient) {
  const ws = new WebSocket(`${url.replace("http", "ws")}/v1/ws`, {
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  await new Promise((resolve) => ws.once("open", resolve));
  const gated = { argv: ["sh", "-c", `head -c 1 >/dev/null; exec "$0" "$@"`, ...LAT_CMD.argv] };
  const handle = await client.exec(gated, { encoding: "utf8", stdin: "pipe" });
  const decoder = new ExecWireDecoder();
  const samples: number[] = [];
  const done = new Promise<void>((resolve) => {
    ws.on("message", (data: Buffer) => {
      const at = now();
      for (const ev of decoder.push(data)) {
        if (ev.name === "stdout") collectLines(ev.value as string, samples, at);
        else if (ev.name === "exit") resolve();
      }
    });
  });
  ws.send(JSON.stringify({ type: "subscribe", id: handle.id, heartbeats: false }));
  await new Promise((r) => setTimeout(r, 50));
  await handle.write("g");
  await handle.end();
  await done;
  ws.close();
  return samples;
}

// ---- main ---------------------------------------------------------------------

async function main() {
  const servers = await startServers();
  const { ours, raw } = servers;
  const client = new ComputerClient({ url: ours.url, token: TOKEN });
  const wsText = new ComputerClient({
    url: ours.url,
    token: TOKEN,
    transport: "websocket",
    binary: false,
  });
  const wsBinary = new ComputerClient({ url: ours.url, token: TOKEN, transport: "websocket" });
  const cmd = `head -c ${SIZE} /dev/zero`;
  const results: Record<
    string,
    { mbps: number; ratio: number; server: number; client: number; all: string }
  > = {};
  try {
    console.log(
      `# server streaming: ${SIZE / 1024 / 1024} MiB of command output, ${REPS} rep(s), node ${process.version}`,
    );
    const runs: Record<string, () => Promise<Run>> = {
      "raw node:http (fetch)": () => rawRun(raw.url, cmd),
      "exec-wire HTTP (ComputerClient)": () => ndjsonRun(client, cmd),
      "SSE (fetch + SSE parser + decodeExecFrame)": () => sseRun(ours.url, client, cmd),
      "WebSocket (ws + exec-wire decoder)": () => wsRun(ours.url, client, cmd),
      "SDK over WebSocket (text)": () => ndjsonRun(wsText, cmd),
      "SDK over WebSocket (binary)": () => ndjsonRun(wsBinary, cmd),
    };
    // REPS rounds over the transports, each round starting one transport
    // later (so no transport always runs first or last), and each of our runs
    // disposed at once (so later runs do not carry earlier executions' rings).
    // "vs raw" is the median over rounds of (ours / raw in the same round):
    // paired runs minutes apart share the machine's state, which on this
    // shared 2-core machine drifts by up to 2x over half an hour. CPU seconds
    // are per GiB of command output: the server's (from /proc) and this client
    // process's (process.cpuUsage), to show where the time goes.
    const names = Object.keys(runs);
    type Sample = { mbps: number; server: number; client: number };
    const samples: Record<string, Sample[]> = Object.fromEntries(names.map((k) => [k, []]));
    for (let i = 0; i < (PHASES.has("throughput") ? REPS : 0); i++) {
      for (let j = 0; j < names.length; j++) {
        const name = names[(i + j) % names.length] as string;
        const pid = name.startsWith("raw") ? raw.child.pid : ours.child.pid;
        const server0 = cpuSeconds(pid);
        const client0 = process.cpuUsage();
        const r = await (runs[name] as () => Promise<Run>)();
        const client = process.cpuUsage(client0);
        if (r.bytes !== SIZE) throw new Error(`${name}: got ${r.bytes} bytes, expected ${SIZE}`);
        const perGiB = (1024 * 1024 * 1024) / r.bytes;
        (samples[name] as Sample[])[i] = {
          mbps: r.bytes / MB / (r.ms / 1000),
          server: (cpuSeconds(pid) - server0) * perGiB,
          client: ((client.user + client.system) / 1e6) * perGiB,
        };
      }
    }
    const rawName = names[0] as string;
    const rawSamples = samples[rawName] as Sample[];
    for (const [name, xs] of Object.entries(samples)) {
      if (xs.length === 0) continue;
      results[name] = {
        mbps: median(xs.map((x) => x.mbps)),
        ratio: median(xs.map((x, i) => x.mbps / (rawSamples[i] as Sample).mbps)),
        server: median(xs.map((x) => x.server)),
        client: median(xs.map((x) => x.client)),
        all: xs.map((x) => x.mbps.toFixed(0)).join(", "),
      };
    }
    if (results[rawName])
      console.log(
        "\n| transport | MB/s of command output (median) | vs raw (median of per-round ratios) | runs, MB/s | server CPU s/GiB | client CPU s/GiB |\n| --- | ---: | ---: | --- | ---: | ---: |",
      );
    for (const [name, v] of results[rawName] ? Object.entries(results) : []) {
      console.log(
        `| ${name} | ${v.mbps.toFixed(0)} | ${v.ratio.toFixed(2)}x | ${v.all} | ${v.server.toFixed(2)} | ${v.client.toFixed(2)} |`,
      );
    }
    if (PHASES.has("fanout")) {
      const f = await fanout(ours.url, client, ours.child.pid);
      console.log(
        `\n## fan-out: ${SUBS} subscribers on one execution, ${FANOUT_SIZE / 1024 / 1024} MiB output each\n`,
      );
      console.log("| metric | value |\n| --- | ---: |");
      console.log(`| time until all ${SUBS} received exit | ${(f.ms / 1000).toFixed(2)} s |`);
      console.log(
        `| delivered command output (all subscribers) | ${f.deliveredMBps.toFixed(0)} MB/s |`,
      );
      console.log(`| wire bytes written (exec-wire, base64) | ${f.wireMBps.toFixed(0)} MB/s |`);
      console.log(
        `| server RSS before / peak | ${f.baseRss.toFixed(0)} / ${f.peakRss.toFixed(0)} MiB |`,
      );
    }
    if (!PHASES.has("latency")) return;
    console.log(`\n## latency: child write -> client receipt, ${LAT_N} lines at 100/s\n`);
    console.log("| transport | p50 | p99 |\n| --- | ---: | ---: |");
    for (const [name, fn] of <[string, () => Promise<number[]>][]>[
      ["exec-wire HTTP (ComputerClient)", () => latencyNdjson(client)],
      ["SSE", () => latencySse(ours.url)],
      ["WebSocket", () => latencyWs(ours.url, client)],
      ["SDK over WebSocket (text)", () => latencyNdjson(wsText)],
      ["SDK over WebSocket (binary)", () => latencyNdjson(wsBinary)],
    ]) {
      const s = await fn();
      if (s.length !== LAT_N) throw new Error(`${name}: ${s.length} samples, expected ${LAT_N}`);
      console.log(
        `| ${name} | ${percentile(s, 50).toFixed(2)} ms | ${percentile(s, 99).toFixed(2)} ms |`,
      );
    }
  } finally {
    await wsText.close();
    await wsBinary.close();
    await servers.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
