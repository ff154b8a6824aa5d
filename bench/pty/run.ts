// Pty benchmark (`npm run bench:pty`). In one run, side by side:
//  1. keystroke-to-echo latency: one byte typed, until its echo comes back,
//     over the server's WebSocket (stdin message in, stdout frame out; the
//     server in its own process) vs a raw @lydell/node-pty loop in this
//     process (write, until onData has the byte). Both terminals run `cat` in
//     cooked mode, so the echo is the line discipline's: what is measured is
//     the path to and from the terminal. p50 and p99 of N keystrokes.
//  2. output throughput: `cat` of a SIZE MiB file on a pty, read through the
//     server (POST /v1/execs with pty, events over the WebSocket until exit)
//     vs raw node-pty reading the same `cat` to its exit; rounds alternate
//     which side goes first, and each round's ratio is printed too.
// Usage (after `npm run bench:build`; `npm run bench:pty -- ARGS` builds first):
//   node .bench-out/bench/pty/run.js [--keys N] [--size MiB] [--reps R]
import { execSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as nodePty from "@lydell/node-pty";
import WebSocket from "ws";
import { numberOption } from "../support/args.js";
import { startNodeProcess, stopProcess } from "../support/processes.js";
import { median, percentile } from "../support/stats.js";

const KEYS = numberOption("keys", 500);
const SIZE_MIB = numberOption("size", 256);
const REPS = numberOption("reps", 3);
const TOKEN = "bench-token-pty-0123456789";
const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.resolve(here, "../../src/cli/main.js");
const now = () => Number(process.hrtime.bigint()) / 1e6;

/** Raw node-pty: type a byte, wait for it in the output. */
async function rawLatency(): Promise<number[]> {
  const term = nodePty.spawn("cat", [], { cols: 80, rows: 24, encoding: null });
  let pending: { byte: number; resolve: () => void } | undefined;
  term.onData((d) => {
    const buf = d as unknown as Buffer;
    if (pending && buf.includes(pending.byte)) {
      const p = pending;
      pending = undefined;
      p.resolve();
    }
  });
  const samples: number[] = [];
  for (let i = 0; i < KEYS + 50; i++) {
    const byte = 97 + (i % 26);
    const t0 = now();
    await new Promise<void>((resolve) => {
      pending = { byte, resolve };
      term.write(String.fromCharCode(byte));
    });
    if (i >= 50) samples.push(now() - t0);
    if (i % 60 === 59) term.write("\x15"); // Ctrl-U: keep the line short
  }
  term.kill("SIGKILL");
  return samples;
}

async function post(url: string, pathname: string, body: unknown): Promise<{ id: string }> {
  const res = await fetch(`${url}${pathname}`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${pathname}: ${res.status} ${await res.text()}`);
  return (await res.json()) as { id: string };
}

async function openWs(url: string): Promise<WebSocket> {
  const ws = new WebSocket(`${url.replace("http", "ws")}/v1/ws`, {
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  return ws;
}

/** Over the server: stdin message in, the echo's stdout frame out. */
async function serverLatency(url: string): Promise<number[]> {
  const { id } = await post(url, "/v1/execs", {
    argv: ["cat"],
    pty: { cols: 80, rows: 24 },
    encoding: "utf8",
  });
  const ws = await openWs(url);
  let pending: { ch: string; resolve: () => void } | undefined;
  ws.on("message", (data) => {
    const text = String(data);
    if (!pending) return;
    for (const line of text.split("\n")) {
      if (line === "") continue;
      const f = JSON.parse(line) as { name: string; value: unknown };
      if (f.name === "stdout" && String(f.value).includes(pending.ch)) {
        const p = pending;
        pending = undefined;
        p.resolve();
        return;
      }
    }
  });
  ws.send(JSON.stringify({ type: "subscribe", id, after: "tail", heartbeats: false }));
  await new Promise((r) => setTimeout(r, 200));
  const samples: number[] = [];
  for (let i = 0; i < KEYS + 50; i++) {
    const ch = String.fromCharCode(97 + (i % 26));
    const t0 = now();
    await new Promise<void>((resolve) => {
      pending = { ch, resolve };
      ws.send(JSON.stringify({ type: "stdin", id, data: ch }));
    });
    if (i >= 50) samples.push(now() - t0);
    if (i % 60 === 59) ws.send(JSON.stringify({ type: "stdin", id, data: "\x15" }));
  }
  ws.send(JSON.stringify({ type: "stdin", id, data: "\x04" }));
  ws.close();
  return samples;
}

/** Raw node-pty: `cat FILE` read to the end; MiB/s of terminal output. */
async function rawThroughput(file: string): Promise<number> {
  const term = nodePty.spawn("cat", [file], { cols: 80, rows: 24, encoding: null });
  let bytes = 0;
  const t0 = now();
  term.onData((d) => {
    bytes += (d as unknown as Buffer).length;
  });
  await new Promise<void>((resolve) => term.onExit(() => resolve()));
  return bytes / 1048576 / ((now() - t0) / 1000);
}

/** Through the server: exec on a pty, its events over the WebSocket until exit. */
async function serverThroughput(url: string, file: string): Promise<number> {
  const ws = await openWs(url);
  let bytes = 0;
  const t0 = now();
  const { id } = await post(url, "/v1/execs", { argv: ["cat", file], pty: { cols: 80, rows: 24 } });
  await new Promise<void>((resolve) => {
    ws.on("message", (data) => {
      const text = String(data);
      for (const line of text.split("\n")) {
        if (line === "") continue;
        // Count decoded bytes without a full JSON parse of the large frames.
        const m = /"value":"([^"]*)"/.exec(line);
        if (line.includes('"name":"exit"')) resolve();
        else if (m) bytes += Buffer.byteLength(m[1]!, "base64");
      }
    });
    ws.send(JSON.stringify({ type: "subscribe", id, after: 0, heartbeats: false }));
  });
  const ms = now() - t0;
  ws.close();
  await fetch(`${url}/v1/execs/${id}`, {
    method: "DELETE",
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  return bytes / 1048576 / (ms / 1000);
}

function fmt(ms: number): string {
  return `${ms.toFixed(3)} ms`;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), "ac-bench-pty-"));
  const file = path.join(dir, "big.txt");
  execSync(
    `yes 'the quick brown fox jumps over the lazy dog 0123456789 ABCDEFGHIJ' | head -c ${SIZE_MIB}M > ${file}`,
    { shell: "/bin/sh" },
  );
  const server = await startNodeProcess(
    [cli, "serve", "--port", "0", "--workspace", path.join(dir, "ws"), "--token", TOKEN, "--quiet"],
    /listening: (http:\/\/[^/]+)/,
  );
  const url = server.ready;
  try {
    console.log(`pty benchmark: ${KEYS} keystrokes, cat of ${SIZE_MIB} MiB ×${REPS}`);
    console.log(
      `machine: ${process.arch}, load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")}`,
    );
    const raw = await rawLatency();
    const srv = await serverLatency(url);
    const rawP50 = percentile(raw, 50);
    const srvP50 = percentile(srv, 50);
    console.log("\nkeystroke → echo latency");
    console.log(`  raw node-pty        p50 ${fmt(rawP50)}  p99 ${fmt(percentile(raw, 99))}`);
    console.log(`  server (WebSocket)  p50 ${fmt(srvP50)}  p99 ${fmt(percentile(srv, 99))}`);
    console.log(
      `  server − raw at p50: ${fmt(srvP50 - rawP50)} (goal ≤ 1 ms: ${srvP50 - rawP50 <= 1 ? "met" : "NOT met"})`,
    );

    const rawT: number[] = [];
    const srvT: number[] = [];
    // Rounds alternate which side goes first, so a change of load during a
    // run does not always favour the same side.
    for (let r = 0; r < REPS; r++) {
      if (r % 2 === 0) {
        rawT.push(await rawThroughput(file));
        srvT.push(await serverThroughput(url, file));
      } else {
        srvT.push(await serverThroughput(url, file));
        rawT.push(await rawThroughput(file));
      }
    }
    const rawM = median(rawT);
    const srvM = median(srvT);
    console.log(`\npty output throughput (cat of ${SIZE_MIB} MiB, median of ${REPS})`);
    console.log(
      `  raw node-pty        ${rawM.toFixed(1)} MiB/s   (${rawT.map((v) => v.toFixed(0)).join(", ")})`,
    );
    console.log(
      `  server (WebSocket)  ${srvM.toFixed(1)} MiB/s   (${srvT.map((v) => v.toFixed(0)).join(", ")})`,
    );
    console.log(
      `  ratio server/raw: ${(srvM / rawM).toFixed(2)} (goal ≥ 0.5: ${srvM / rawM >= 0.5 ? "met" : "NOT met"})`,
    );
    console.log(
      `  ratio per round:  ${srvT.map((v, i) => (v / rawT[i]!).toFixed(2)).join(", ")} (median ${median(srvT.map((v, i) => v / rawT[i]!)).toFixed(2)})`,
    );
    console.log(
      `\nload average after: ${loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")}`,
    );
  } finally {
    await stopProcess(server.child);
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
