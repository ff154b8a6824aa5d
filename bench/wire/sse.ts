// SSE and A@UI stream consumer benchmark (docs/benchmarks.md, "SSE and A@UI
// stream consumer") Side by side on identical input bytes:
//   - consumeAAtUIStream (ours; rules 1–6, JSON.parse + validateCommand + dispatch)
//   - createSseParser (ours; WHATWG parser) + JSON.parse of each data
//   - eventsource-parser createParser + JSON.parse of each data (its input
//     must be text, so byte chunks go through a streaming TextDecoder, as in
//     its own EventSourceParserStream)
//   - @cloudflare/sandbox's parseSSEStream (async generator; it JSON.parses
//     each data itself and skips [DONE])
//   - for reference, both libraries' TransformStream forms (one read per event)
// The peers are the current npm versions, installed on demand into
// .bench-peers/wire/ (bench/wire/peers.ts); without network the
// eventsource-parser devDependency is used instead and the header says so.
// Workloads:
//   A. 200,000 A@UI `update` commands (~120-byte JSON each) as `data:` lines,
//      fed as a ReadableStream of 64 KiB byte chunks;
//   B. one 4 MiB `data:` line (a valid update command) in 1 KiB chunks, next
//      to the same bytes in 64 KiB chunks and a pass-through stream of the
//      1 KiB chunks (the floor), to show linear behaviour.
// Plus, for attribution: both parsers without JSON.parse (the parser's own
// cost) and JSON.parse alone over the same 200k payload strings (the floor
// every consumer that must parse each command pays).
// Method: every (contender, workload) runs in PROCS fresh processes, taken
// round-robin so load from other processes on a shared machine hits every
// contender alike; each process does one warm-up and ITER measured runs and
// reports its median CPU time (user+system, robust against other tenants)
// and wall time. Tables show medians over processes; ratios use CPU time.
// Run: npm run bench:wire   (or, after `npm run bench:build`: node .bench-out/bench/wire/sse.js)
// Env: SSE_BENCH_PROCS (default 3), SSE_BENCH_ITER (default 3).

import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { median } from "../support/stats.js";
import { chunk, streamOf } from "./chunks.js";
import { cloudflareParseSSEStream, importPeer, installWirePeers, peerVersion } from "./peers.js";

const SELF = fileURLToPath(import.meta.url);
const PROCS = Number(process.env.SSE_BENCH_PROCS ?? 3);
const ITER = Number(process.env.SSE_BENCH_ITER ?? 3);
const N_COMMANDS = 200_000;
const BIG = 4 * 1024 * 1024;

// ---------- inputs (deterministic, rebuilt identically in every process) ----------

function commandsInput() {
  const parts = [];
  let jsonBytes = 0;
  for (let i = 0; i < N_COMMANDS; i++) {
    const json = JSON.stringify({
      type: "update",
      widgetId: `w${i % 64}`,
      params: {
        progress: (i % 1000) / 1000,
        label: `step ${i} of ${N_COMMANDS} done`,
        state: "running-ok",
      },
    });
    jsonBytes += json.length;
    parts.push(`data: ${json}\n\n`);
  }
  parts.push("data: [DONE]\n\n");
  return { bytes: new TextEncoder().encode(parts.join("")), avgJson: jsonBytes / N_COMMANDS };
}

function bigLineInput() {
  const head = '{"type":"update","widgetId":"w1","params":{"blob":"';
  const tail = '"}}';
  const fill = "abcdefghij0123456789"
    .repeat(Math.ceil(BIG / 20))
    .slice(0, BIG - head.length - tail.length);
  return new TextEncoder().encode(`data: ${head}${fill}${tail}\n\ndata: [DONE]\n\n`);
}

// ---------- contenders: each consumes a stream and returns the number of commands ----------

/** A contender: consumes the stream, returns how many commands it saw. */
type Contender = (stream: ReadableStream<Uint8Array>) => Promise<number>;
type Job = [name: string, workload: string];

async function loadContenders(parseJson: boolean): Promise<Record<string, Contender>> {
  const { consumeAAtUIStream } = await import("../../src/aui/index.js");
  const { createSseParser, SseParserStream } = await import("../../src/wire/index.js");
  // The current release from .bench-peers/wire/ when installed, else the devDependency.
  const current = peerVersion("eventsource-parser") !== undefined;
  const { createParser } = current
    ? await importPeer<typeof import("eventsource-parser")>("eventsource-parser")
    : await import("eventsource-parser");
  const { EventSourceParserStream } = current
    ? await importPeer<typeof import("eventsource-parser/stream")>("eventsource-parser", "/stream")
    : await import("eventsource-parser/stream");
  const parseSSEStream = peerVersion("@cloudflare/sandbox")
    ? await cloudflareParseSSEStream()
    : undefined;
  // Stream forms: one read per event, as an application using them would.
  const readEvents = async (events: ReadableStream<{ data: string }>) => {
    let n = 0;
    const reader = events.getReader();
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      if (r.value.data === "[DONE]") {
        reader.cancel();
        break;
      }
      n += use(r.value.data);
    }
    return n;
  };
  // With parseJson false the parsers only count data strings: their own cost.
  const use = parseJson
    ? (data: string) => (JSON.parse(data).type ? 1 : 0)
    : (data: string) => (data.length > 0 ? 1 : 0);
  return {
    async consumeAAtUIStream(stream) {
      let n = 0;
      await consumeAAtUIStream(stream, {
        dispatch() {
          n++;
        },
        handleError(err) {
          throw err;
        },
      });
      return n;
    },
    async createSseParser(stream) {
      let n = 0;
      let done = false;
      const parser = createSseParser({
        onEvent(e) {
          if (e.data === "[DONE]") done = true;
          else n += use(e.data);
        },
      });
      const reader = stream.getReader();
      for (;;) {
        const r = await reader.read();
        if (r.done) break;
        parser.feed(r.value);
        if (done) {
          reader.cancel();
          break;
        }
      }
      parser.end();
      return n;
    },
    async "eventsource-parser"(stream) {
      let n = 0;
      let done = false;
      const parser = createParser({
        onEvent(e) {
          if (e.data === "[DONE]") done = true;
          else n += use(e.data);
        },
      });
      const decoder = new TextDecoder();
      const reader = stream.getReader();
      for (;;) {
        const r = await reader.read();
        if (r.done) break;
        parser.feed(decoder.decode(r.value, { stream: true }));
        if (done) {
          reader.cancel();
          break;
        }
      }
      return n;
    },
    async SseParserStream(stream) {
      return readEvents(stream.pipeThrough(new SseParserStream()));
    },
    async parseSSEStream(stream) {
      if (!parseSSEStream) throw new Error("@cloudflare/sandbox is not installed");
      let n = 0;
      for await (const ev of parseSSEStream(stream)) if ((ev as { type?: string }).type) n++;
      return n;
    },
    async EventSourceParserStream(stream) {
      return readEvents(
        stream
          // The DOM typings say TextDecoderStream takes any BufferSource; bytes are one.
          .pipeThrough(new TextDecoderStream() as TransformStream<Uint8Array, string>)
          .pipeThrough(new EventSourceParserStream()),
      );
    },
    async "pass-through"(stream) {
      const reader = stream.getReader();
      for (;;) {
        const r = await reader.read();
        if (r.done) break;
      }
      return 1;
    },
  };
}

// ---------- worker: one contender, one workload, warm-up + ITER runs ----------

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

async function worker(name: string, workload: string) {
  let run: () => Promise<number>;
  let expected: number;
  if (workload === "json-floor") {
    // JSON.parse alone of the same payload strings: the floor for any consumer.
    const { bytes } = commandsInput();
    const text = new TextDecoder().decode(bytes);
    const payloads: string[] = [];
    for (let at = 0; ; ) {
      const nl = text.indexOf("\n", at);
      if (nl === -1) break;
      if (nl > at && !text.startsWith("data: [DONE]", at)) payloads.push(text.slice(at + 6, nl));
      at = nl + 1;
    }
    expected = N_COMMANDS;
    run = async () => {
      let n = 0;
      for (const p of payloads) if (JSON.parse(p).type) n++;
      return n;
    };
  } else {
    const contenders = await loadContenders(workload !== "commands-nojson");
    const fn = contenders[name];
    if (!fn) throw new Error(`unknown contender ${name}`);
    let chunks: Uint8Array[];
    if (workload.startsWith("commands")) {
      chunks = chunk(commandsInput().bytes, 64 * 1024);
      expected = N_COMMANDS;
    } else {
      chunks = chunk(bigLineInput(), workload === "big-1k" ? 1024 : 64 * 1024);
      expected = 1;
    }
    run = () => fn(streamOf(chunks));
  }
  const cpu: number[] = [];
  const wall: number[] = [];
  for (let i = 0; i <= ITER; i++) {
    const c0 = cpuMs();
    const t0 = performance.now();
    const n = await run();
    const t = performance.now() - t0;
    const c = cpuMs() - c0;
    if (name !== "pass-through" && n !== expected)
      throw new Error(`${name}: ${n} commands, expected ${expected}`);
    if (i > 0) {
      wall.push(t);
      cpu.push(c);
    }
  }
  process.stdout.write(JSON.stringify({ cpu: median(cpu), wall: median(wall) }));
}

// ---------- driver ----------

/**
 * Runs every [name, workload] job in PROCS rounds, round-robin, so load from
 * other processes on a shared machine hits all contenders alike.
 */
function measureAll(jobs: Job[]) {
  const runs = jobs.map(() => ({ cpu: [] as number[], wall: [] as number[] }));
  for (let p = 0; p < PROCS; p++) {
    jobs.forEach(([name, workload], k) => {
      const r = spawnSync(process.execPath, [SELF, "--worker", name, workload], {
        encoding: "utf8",
      });
      if (r.status !== 0) throw new Error(`${name}/${workload} failed:\n${r.stderr}`);
      const { cpu, wall } = JSON.parse(r.stdout) as { cpu: number; wall: number };
      runs[k]?.cpu.push(cpu);
      runs[k]?.wall.push(wall);
    });
  }
  return runs.map((r) => ({ cpu: median(r.cpu), wall: median(r.wall) }));
}

function fmt(n: number, digits = 0): string {
  return n.toLocaleString("en-US", {
    maximumFractionDigits: digits,
    minimumFractionDigits: digits,
  });
}

/** Medians over processes of one job's CPU and wall time (ms). */
interface Measured {
  cpu: number;
  wall: number;
}

async function main() {
  const started = performance.now();
  const { bytes, avgJson } = commandsInput();
  const mb = bytes.length / 1e6;
  const names = ["consumeAAtUIStream", "createSseParser", "eventsource-parser"];
  const why = installWirePeers();
  const esp = peerVersion("eventsource-parser");
  const cf = peerVersion("@cloudflare/sandbox");
  console.log(
    `SSE / A@UI consumer benchmark — Node ${process.version}, ${PROCS} rounds of fresh processes × (1 warm-up + ${ITER} runs), medians.`,
  );
  console.log(
    `Peers: eventsource-parser ${esp ?? "3.1.1 (devDependency)"}, @cloudflare/sandbox ${cf ?? "not available"}${why ? ` (${why})` : ""}.`,
  );
  console.log("Times are CPU time (user+system) of the worker process; wall time in brackets.\n");

  const jobs: Job[] = [
    ...names.map((n): Job => [n, "commands"]),
    ["SseParserStream", "commands"],
    ["EventSourceParserStream", "commands"],
    ...(cf ? [["parseSSEStream", "commands"] as Job] : []),
    ["createSseParser", "commands-nojson"],
    ["eventsource-parser", "commands-nojson"],
    ["JSON.parse", "json-floor"],
  ];
  const r = measureAll(jobs);
  const at = (name: string, workload: string) =>
    r[jobs.findIndex(([n, w]) => n === name && w === workload)] as Measured;
  console.log(
    `A. ${fmt(N_COMMANDS)} update commands (avg JSON ${fmt(avgJson)} B, ${fmt(mb, 1)} MB of SSE), 64 KiB byte chunks`,
  );
  console.log("| consumer | ms CPU [wall] | MB/s | commands/s | × eventsource-parser |");
  console.log("| --- | ---: | ---: | ---: | ---: |");
  const row = (label: string, x: Measured, base?: Measured) =>
    console.log(
      `| ${label} | ${fmt(x.cpu, 1)} [${fmt(x.wall, 1)}] | ${fmt(mb / (x.cpu / 1000))} | ${fmt(N_COMMANDS / (x.cpu / 1000))} | ${base ? fmt(base.cpu / x.cpu, 2) : ""} |`,
    );
  const espJson = at("eventsource-parser", "commands");
  for (const n of names)
    row(
      `${n}${n === "consumeAAtUIStream" ? " (parse + validate + dispatch)" : " + JSON.parse"}`,
      at(n, "commands"),
      espJson,
    );
  row(
    "SseParserStream (ours, TransformStream form) + JSON.parse",
    at("SseParserStream", "commands"),
    espJson,
  );
  row(
    "eventsource-parser's TextDecoderStream → EventSourceParserStream + JSON.parse",
    at("EventSourceParserStream", "commands"),
    espJson,
  );
  if (cf) {
    row(
      `@cloudflare/sandbox ${cf} parseSSEStream (parses each data itself)`,
      at("parseSSEStream", "commands"),
      espJson,
    );
  }
  const espOnly = at("eventsource-parser", "commands-nojson");
  row(
    "createSseParser, no JSON.parse (parser only)",
    at("createSseParser", "commands-nojson"),
    espOnly,
  );
  row("eventsource-parser, no JSON.parse (parser only)", espOnly, espOnly);
  row("JSON.parse alone of the 200k payloads (floor, no stream)", at("JSON.parse", "json-floor"));

  console.log(`\nB. one 4 MiB data: line (a valid update command)`);
  const bigJobs: Job[] = [
    ...names.flatMap((n): Job[] => [
      [n, "big-1k"],
      [n, "big-64k"],
    ]),
    ["pass-through", "big-1k"],
    // 64 KiB chunks only: it re-scans its whole buffer on every chunk, so 4,096
    // chunks of one 4 MiB line would take minutes (quadratic).
    ...(cf ? [["parseSSEStream", "big-64k"] as Job] : []),
  ];
  const b = measureAll(bigJobs);
  const big = (name: string, workload: string) =>
    b[bigJobs.findIndex(([n, w]) => n === name && w === workload)] as Measured;
  const floor = big("pass-through", "big-1k");
  console.log(
    "| consumer | 1 KiB chunks, ms CPU [wall] | 64 KiB chunks, ms CPU [wall] | 1 KiB / 64 KiB | 1 KiB / pass-through |",
  );
  console.log("| --- | ---: | ---: | ---: | ---: |");
  for (const n of names) {
    const k1 = big(n, "big-1k");
    const k64 = big(n, "big-64k");
    console.log(
      `| ${n} | ${fmt(k1.cpu, 1)} [${fmt(k1.wall, 1)}] | ${fmt(k64.cpu, 1)} [${fmt(k64.wall, 1)}] | ${fmt(k1.cpu / k64.cpu, 2)} | ${fmt(k1.cpu / floor.cpu, 1)} |`,
    );
  }
  if (cf) {
    const k64 = big("parseSSEStream", "big-64k");
    console.log(
      `| @cloudflare/sandbox parseSSEStream | not run (quadratic) | ${fmt(k64.cpu, 1)} [${fmt(k64.wall, 1)}] | | |`,
    );
  }
  console.log(
    `| pass-through stream (same 1 KiB chunks, no parsing) | ${fmt(floor.cpu, 1)} [${fmt(floor.wall, 1)}] | | | 1.0 |`,
  );
  console.log(`\ntotal ${fmt((performance.now() - started) / 1000, 1)} s`);
}

if (process.argv[2] === "--worker") {
  await worker(process.argv[3] ?? "", process.argv[4] ?? "");
} else {
  await main();
}
