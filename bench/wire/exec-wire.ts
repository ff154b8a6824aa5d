// exec-wire codec benchmark: ours vs a plain baseline decoder
// (bench/wire/baseline-exec-wire.ts), split2 + JSON.parse and ndjson, on the
// same inputs. Every (workload, implementation) runs in a fresh process:
// warm-up, then 2 timed runs; rounds repeat this round-robin over the
// implementations and the median over rounds is reported. Quadratic peers on
// the long-line workloads run once alone under a time cap, reported as ">Ns".
//
// Usage: npm run bench:wire   (or, after `npm run bench:build`:
//        node .bench-out/bench/wire/exec-wire.js [--quick]; --quick: 1 round instead of 3)
// Child mode (one workload, some implementations, in this process):
//        node .bench-out/bench/wire/exec-wire.js --child WORKLOAD IMPL[,IMPL] ROUNDS WARM(1|"")

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Readable } from "node:stream";
import type { ReadableStream as NodeReadableStream } from "node:stream/web";
import { fileURLToPath } from "node:url";
import type { ExecEvent } from "../../src/index.js";
import { flag } from "../support/args.js";
import { median } from "../support/stats.js";
import { chunk, streamOf } from "./chunks.js";

const SELF = fileURLToPath(import.meta.url);
const require = createRequire(import.meta.url);
const MiB = 1024 * 1024;

// ---------------------------------------------------------------------------
// Inputs (deterministic)

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS: string[] =
  "the quick brown fox jumps over lazy dog build test ok error warn info debug compiling linking done".split(
    " ",
  );

function textEvents(n: number): ExecEvent[] {
  const r = rng(1);
  const evs = new Array<ExecEvent>(n);
  for (let i = 0; i < n; i++) {
    let t = `[${i}]`;
    while (t.length < 99) t += ` ${WORDS[(r() * WORDS.length) | 0]}`;
    evs[i] = { id: "exec_7f3a9c21", seq: i + 1, name: "stdout", value: `${t.slice(0, 99)}\n` };
  }
  return evs;
}

function binaryEvents(n: number, size: number): ExecEvent[] {
  const r = rng(2);
  const evs = new Array<ExecEvent>(n);
  for (let i = 0; i < n; i++) {
    const b = new Uint8Array(size);
    for (let j = 0; j < size; j++) b[j] = (r() * 256) | 0;
    evs[i] = { id: "exec_7f3a9c21", seq: i + 1, name: "stdout", value: b };
  }
  return evs;
}

function bigTextEvent(bytes: number): ExecEvent[] {
  const r = rng(3);
  const parts: string[] = [];
  let len = 0;
  while (len < bytes) {
    const w = WORDS[(r() * WORDS.length) | 0] as string;
    parts.push(w);
    len += w.length + 1;
  }
  return [{ id: "exec_7f3a9c21", seq: 1, name: "stdout", value: parts.join(" ").slice(0, bytes) }];
}

function concat(arrays: readonly Uint8Array[]): Uint8Array {
  let n = 0;
  for (const a of arrays) n += a.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const a of arrays) {
    out.set(a, o);
    o += a.length;
  }
  return out;
}

interface Workload {
  desc: string;
  events: () => ExecEvent[];
  /** Chunk size of the byte input (decode workloads). */
  chunk?: number;
}

const WORKLOADS: Record<string, Workload> = {
  text100: {
    desc: "200,000 stdout events of ~100 B text, 64 KiB chunks",
    events: () => textEvents(200_000),
    chunk: 64 * 1024,
  },
  bin64k: {
    desc: "2,000 events of 64 KiB random bytes (b64), 64 KiB chunks",
    events: () => binaryEvents(2000, 64 * 1024),
    chunk: 64 * 1024,
  },
  line8m_1k: {
    desc: "one 8 MiB text event in 1 KiB chunks",
    events: () => bigTextEvent(8 * MiB),
    chunk: 1024,
  },
  line256k_1b: {
    desc: "one 256 KiB text event in 1-byte chunks",
    events: () => bigTextEvent(256 * 1024),
    chunk: 1,
  },
  enc_text: { desc: "encode 200,000 ~100 B text events", events: () => textEvents(200_000) },
  enc_bin: {
    desc: "encode 300 events of 64 KiB random bytes",
    events: () => binaryEvents(300, 64 * 1024),
  },
};

// ---------------------------------------------------------------------------
// Implementations (each returns the number of events it produced)

// Web streams are consumed the way our docs and most users do it, with
// `for await`; `drainReader` (getReader().read() per event) is also shown
// for ours, since our `for await` takes a batch fast path.
async function drainIter(stream: ReadableStream<unknown> | AsyncIterable<unknown>) {
  let n = 0;
  // Node's web streams are async iterable; the DOM typings do not say so.
  for await (const _ of stream as AsyncIterable<unknown>) n++;
  return n;
}

async function drain(stream: ReadableStream<unknown>): Promise<number> {
  const r = stream.getReader();
  let n = 0;
  for (;;) {
    const { done } = await r.read();
    if (done) return n;
    n++;
  }
}

async function drainNode(readable: AsyncIterable<unknown>): Promise<number> {
  let n = 0;
  for await (const _ of readable) n++;
  return n;
}

type Chunks = Uint8Array[];

/** The same web stream, typed as Node's (the DOM and Node typings of ReadableStream differ). */
const nodeWeb = (s: ReadableStream<Uint8Array>) => s as unknown as NodeReadableStream<Uint8Array>;

async function loadImpls() {
  const wire = await import("../../src/wire/index.js");
  const { baselineDecode, baselineEncode } = await import("./baseline-exec-wire.js");
  const { default: split2 } = await import("split2");
  const { default: ndjson } = await import("ndjson");
  return {
    ours_stream: (chunks: Chunks) => drainIter(wire.decodeExecEvents(streamOf(chunks))),
    ours_stream_reader: (chunks: Chunks) => drain(wire.decodeExecEvents(streamOf(chunks))),
    ours_push: async (chunks: Chunks) => {
      const d = new wire.ExecWireDecoder();
      const r = streamOf(chunks).getReader();
      let n = 0;
      for (;;) {
        const { done, value } = await r.read();
        if (done) break;
        n += d.push(value).length;
      }
      return n + d.end().length;
    },
    baseline: (chunks: Chunks) => drainIter(baselineDecode(streamOf(chunks))),
    split2: (chunks: Chunks) =>
      drainNode(Readable.fromWeb(nodeWeb(streamOf(chunks))).pipe(split2(JSON.parse))),
    ndjson: (chunks: Chunks) =>
      drainNode(Readable.fromWeb(nodeWeb(streamOf(chunks))).pipe(ndjson.parse())),
    passthrough: (chunks: Chunks) => drain(streamOf(chunks)),
    ours_encode: (events: ExecEvent[]) => {
      let bytes = 0;
      for (const ev of events) bytes += wire.encodeExecEvent(ev).length;
      return bytes;
    },
    baseline_encode: (events: ExecEvent[]) => {
      let bytes = 0;
      for (const ev of events) bytes += baselineEncode(ev).length;
      return bytes;
    },
    wire,
  };
}

type Impls = Awaited<ReturnType<typeof loadImpls>>;
/** An implementation by name: decoders take chunks, encoders take events. */
type Impl = (input: Chunks | ExecEvent[]) => number | Promise<number>;

/** One implementation's timings in a child, or why there are none. */
interface Outcome {
  median?: number;
  min?: number;
  runs?: number;
  bytes?: number;
  events?: number;
  /** Killed at this time cap (ms): a lower bound. */
  capped?: number;
  /** Exit code of a child that failed. */
  failed?: number | null;
}

// ---------------------------------------------------------------------------
// Child: one workload and one implementation (the code can run several
// interleaved in one process, but their garbage then lands on each other's
// timings: a fresh process per implementation is fairer).

async function prepare(impls: Impls, workload: string, chunkSize?: number) {
  const w = WORKLOADS[workload];
  if (!w) throw new Error(`unknown workload ${workload}`);
  const events = w.events();
  const frames = events.map((ev) => impls.wire.encodeExecEvent(ev));
  const all = concat(frames);
  return { events, bytes: all.length, chunks: chunk(all, chunkSize ?? w.chunk ?? 65536) };
}

async function child(workload: string, implList: string, rounds: number, warm: boolean) {
  const impls = await loadImpls();
  const names = implList.split(",");
  const input = await prepare(impls, workload);
  // "ours_stream_64k": the same workload's bytes in 64 KiB chunks.
  const alt = names.some((n) => n.endsWith("_64k"))
    ? chunk(concat(input.events.map((ev) => impls.wire.encodeExecEvent(ev))), 65536)
    : undefined;
  const run = async (name: string) => {
    const f = (impls as unknown as Record<string, Impl>)[name.replace(/_64k$/, "")];
    if (!f) throw new Error(`unknown implementation ${name}`);
    if (name.endsWith("_encode")) return f(input.events);
    const n = await f((name.endsWith("_64k") ? alt : input.chunks) ?? []);
    if (name !== "passthrough" && n !== input.events.length) {
      throw new Error(`${name} on ${workload}: ${n} events, expected ${input.events.length}`);
    }
    return n;
  };
  if (warm) for (const name of names) await run(name);
  const times: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(k + r) % names.length] as string;
      const t0 = performance.now();
      await run(name);
      times[name]?.push(performance.now() - t0);
    }
  }
  const out: Record<string, Outcome> = {};
  for (const [name, ts] of Object.entries(times)) {
    out[name] = {
      median: median(ts),
      min: Math.min(...ts),
      runs: ts.length,
      bytes: input.bytes,
      events: input.events.length,
    };
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

// ---------------------------------------------------------------------------
// Parent: run the groups and the capped peers, print the table

/** A child's answer: its timings per implementation, or why there are none. */
interface ChildAnswer {
  timings?: Record<string, Outcome>;
  capped?: number;
  failed?: number | null;
}

function runChild(args: string[], capMs: number): Promise<ChildAnswer> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [SELF, ...args], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    p.stdout.on("data", (d) => {
      out += d;
    });
    const timer = setTimeout(() => p.kill("SIGKILL"), capMs);
    p.on("exit", (code, signal) => {
      clearTimeout(timer);
      if (signal === "SIGKILL") resolve({ capped: capMs });
      else if (code !== 0) resolve({ failed: code });
      else resolve({ timings: JSON.parse(out.trim().split("\n").pop() ?? "{}") });
    });
  });
}

/** The outcome of implementation `name` in a child's answer. */
function outcomeOf(answer: ChildAnswer, name: string): Outcome {
  return answer.timings ? (answer.timings[name] ?? {}) : answer;
}

async function parent(quick: boolean) {
  const R = quick ? 1 : 3;
  const groups: [workload: string, impls: string[], rounds: number, warm: boolean][] = [
    [
      "text100",
      ["ours_stream", "ours_stream_reader", "ours_push", "baseline", "split2", "ndjson"],
      R,
      true,
    ],
    ["bin64k", ["ours_stream", "ours_push", "baseline", "split2", "ndjson"], R, false],
    ["line8m_1k", ["ours_stream", "ours_stream_64k", "passthrough"], R, true],
    ["line256k_1b", ["ours_stream", "passthrough"], R, true],
    ["enc_text", ["ours_encode", "baseline_encode"], R, true],
    ["enc_bin", ["ours_encode", "baseline_encode"], R, true],
  ];
  const capped: [workload: string, impl: string, capMs: number][] = [
    ["line8m_1k", "baseline", 10_000],
    ["line8m_1k", "split2", 10_000],
    ["line8m_1k", "ndjson", 10_000],
    ["line256k_1b", "baseline", 6_000],
    ["line256k_1b", "split2", 6_000],
    ["line256k_1b", "ndjson", 6_000],
  ];
  // Round-robin: each round starts one fresh process per implementation
  // (warm-up + 2 timed runs, its median), so load drift on this shared
  // machine spreads over all implementations instead of landing on one; the
  // figure reported is the median over rounds.
  const results: Record<string, Record<string, Outcome>> = {};
  const t0 = performance.now();
  for (const [w, names, rounds, warm] of groups) {
    const per: Record<string, Outcome[]> = Object.fromEntries(names.map((n) => [n, []]));
    for (let r = 0; r < rounds; r++) {
      for (const n of names) {
        const res = await runChild(["--child", w, n, "2", warm ? "1" : ""], 170_000);
        per[n]?.push(outcomeOf(res, n));
      }
    }
    for (const n of names) {
      const outcomes = per[n] ?? [];
      const ok = outcomes.filter((x) => x.median !== undefined);
      const meds = ok.map((x) => x.median as number).sort((a, b) => a - b);
      const result: Outcome = ok.length
        ? {
            ...ok[0],
            median: median(meds),
            min: Math.min(...ok.map((x) => x.min as number)),
            runs: ok.length,
          }
        : (outcomes[0] ?? {});
      (results[w] ??= {})[n] = result;
      process.stderr.write(
        `  ${w} ${n}: ${fmtTime(result)} [${meds.map((x) => x.toFixed(0)).join(", ")}]\n`,
      );
    }
  }
  for (const [w, name, cap] of capped) {
    const result = outcomeOf(await runChild(["--child", w, name, "1", ""], cap), name);
    (results[w] ??= {})[name] = result;
    process.stderr.write(`  ${w} ${name}: ${fmtTime(result)}\n`);
  }

  const rows: string[][] = [];
  for (const [w, impls] of Object.entries(results)) {
    for (const [impl, r] of Object.entries(impls)) {
      const mbps = r.median ? ((r.bytes ?? 0) / MiB / (r.median / 1000)).toFixed(0) : "";
      const evps =
        r.median && !w.startsWith("enc")
          ? Math.round((r.events ?? 0) / (r.median / 1000)).toLocaleString("en-US")
          : "";
      rows.push([w, impl, fmtTime(r), mbps, evps, String(r.runs ?? "")]);
    }
  }
  const header = ["workload", "implementation", "median", "MiB/s", "events/s", "runs"];
  console.log(`\nexec-wire benchmark, Node ${process.version}, ${new Date().toISOString()}`);
  // split2 4.2.0 and ndjson 2.0.0 (the devDependencies) are the newest on npm.
  const version = (name: string) =>
    (
      JSON.parse(readFileSync(require.resolve(`${name}/package.json`), "utf8")) as {
        version: string;
      }
    ).version;
  console.log(`  peers: split2 ${version("split2")}, ndjson ${version("ndjson")}`);
  for (const [k, w] of Object.entries(WORKLOADS)) console.log(`  ${k}: ${w.desc}`);
  console.log("  (ours_stream_64k: the line8m_1k bytes in 64 KiB chunks)");
  console.log(`\n${table([header, ...rows])}`);

  const m = (w: string, i: string) => results[w]?.[i]?.median;
  const best = (w: string, i: string) => results[w]?.[i]?.min;
  const ratio = (a: number | undefined, b: number | undefined) => (a && b ? b / a : undefined);
  // capped: a lower bound
  const lower = (w: string, i: string) => m(w, i) ?? results[w]?.[i]?.capped;
  type Op = ">=" | "<=";
  // [target, workload, a, b, op, needed]: the ratio is time(b) / time(a).
  const targets: [string, string, string, string, Op, number][] = [
    ["decode text: stream vs baseline", "text100", "ours_stream", "baseline", ">=", 2],
    ["decode text: push vs split2 (events/s)", "text100", "ours_push", "split2", ">=", 1.5],
    ["decode 64 KiB binary: stream vs baseline", "bin64k", "ours_stream", "baseline", ">=", 5],
    [
      "linear: 8 MiB line 1 KiB / 64 KiB chunks",
      "line8m_1k",
      "ours_stream_64k",
      "ours_stream",
      "<=",
      3,
    ],
    [
      "linear: 256 KiB line 1-byte chunks / pass-through",
      "line256k_1b",
      "passthrough",
      "ours_stream",
      "<=",
      3,
    ],
    ["encode text: ours vs baseline", "enc_text", "ours_encode", "baseline_encode", ">=", 2],
    [
      "encode 64 KiB binary: ours vs baseline",
      "enc_bin",
      "ours_encode",
      "baseline_encode",
      ">=",
      10,
    ],
  ];
  const verdict = (r: number | undefined, op: Op, target: number) =>
    r === undefined ? "?" : (op === ">=" ? r >= target : r <= target) ? "met" : "MISSED";
  const fx = (r: number | undefined) => (r === undefined ? "n/a" : `${r.toFixed(2)}x`);
  const trows = targets.map(([name, w, a, b, op, target]) => {
    const medians = ratio(m(w, a), m(w, b));
    // The same ratio from each implementation's fastest run: on a shared
    // machine load only ever adds time, so minima are the steadier estimate.
    const fastest = ratio(best(w, a), best(w, b));
    return [
      name,
      fx(medians),
      verdict(medians, op, target),
      fx(fastest),
      verdict(fastest, op, target),
      `${op} ${target}x`,
    ];
  });
  console.log(
    `\nTargets (ratios of medians over rounds, and of each one's fastest run)\n${table([["target", "medians", "", "fastest", "", "needed"], ...trows])}`,
  );
  // [label "workload: peer / ours ...", peer time, our time]
  const others: [string, number | undefined, number | undefined][] = [
    ["line8m_1k: baseline / ours", lower("line8m_1k", "baseline"), m("line8m_1k", "ours_stream")],
    ["line8m_1k: split2 / ours", lower("line8m_1k", "split2"), m("line8m_1k", "ours_stream")],
    ["line8m_1k: ndjson / ours", lower("line8m_1k", "ndjson"), m("line8m_1k", "ours_stream")],
    ["line256k_1b: split2 / ours", lower("line256k_1b", "split2"), m("line256k_1b", "ours_stream")],
    [
      "line8m_1k: pass-through of the 1 KiB chunks / ours",
      m("line8m_1k", "passthrough"),
      m("line8m_1k", "ours_stream"),
    ],
    ["text100: split2 / ours stream", m("text100", "split2"), m("text100", "ours_stream")],
    [
      "text100: baseline / ours stream read with reader.read()",
      m("text100", "baseline"),
      m("text100", "ours_stream_reader"),
    ],
    ["text100: ndjson / ours push", m("text100", "ndjson"), m("text100", "ours_push")],
    ["bin64k: split2 / ours stream", m("bin64k", "split2"), m("bin64k", "ours_stream")],
  ];
  const extra = others.map(([n, a, b]) => {
    // The peer named in the label ran into its time cap: its ratio is a lower bound.
    const [workload = "", rest = ""] = n.split(": ");
    const wasCapped = results[workload]?.[rest.split(" ")[0] ?? ""]?.capped;
    return [n, a && b ? `${(a / b).toFixed(1)}x${wasCapped ? " (at least)" : ""}` : "n/a"];
  });
  console.log(`\nOther ratios\n${table([["comparison (time / time)", "ratio"], ...extra])}`);
  console.log(`\ntotal bench time ${((performance.now() - t0) / 1000).toFixed(0)} s`);
}

function fmtTime(r: Outcome): string {
  if (r.capped) return `>${r.capped / 1000}s`;
  if (r.failed !== undefined) return `failed(${r.failed})`;
  const median = r.median ?? Number.NaN;
  return median >= 1000 ? `${(median / 1000).toFixed(2)} s` : `${median.toFixed(1)} ms`;
}

function table(rows: string[][]): string {
  const head = rows[0] ?? [];
  const widths = head.map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  const line = (r: string[]) =>
    `| ${r.map((c, i) => String(c).padEnd(widths[i] ?? 0)).join(" | ")} |`;
  return [
    line(head),
    `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`,
    ...rows.slice(1).map(line),
  ].join("\n");
}

const [mode, workload = "", impls = "", rounds = "1", warm = ""] = process.argv.slice(2);
if (mode === "--child") {
  await child(workload, impls, Number(rounds), warm === "1");
} else {
  await parent(flag("quick"));
}
