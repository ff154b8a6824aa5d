// Exec rate, part (a) of `bench:scale`: how many short commands per second.
//  - over HTTP: `concurrency` clients, each in a loop starting `true` with
//    `POST /v1/execs?stream=1` (exec-wire) and reading its stream to the exit
//    frame, against a plain Node loop spawning `/bin/sh -c true` with the same
//    concurrency (each waited for to `close`, as the server waits for the
//    pipes). Same duration, interleaved rounds, medians and their ratio.
//  - in process: `Computer.exec("true")` → exit event, against a raw spawn →
//    close, one at a time, p50 of each round and the ratio.
// The raw loop runs in the benchmark process; the server is another process
// with the benchmark as its HTTP client: on 2 cores the client's cost is part
// of what the server loses, as it would be for a real client on the box.

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { execTrueToExit } from "../support/exec-true.js";
import { median } from "../support/stats.js";
import { requestText, type ScaleNode } from "./nodes.js";

function rawOnce(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn("/bin/sh", ["-c", "true"], { stdio: ["ignore", "pipe", "pipe"] });
    child.on("error", reject);
    child.on("close", () => resolve());
  });
}

/** One `true` over HTTP, streamed to its exit frame; rejects unless it exited 0. */
async function httpOnce(url: string): Promise<void> {
  const { status, text } = await requestText(
    `${url}/v1/execs?stream=1`,
    "POST",
    { command: "true", encoding: "utf8" },
    { accept: "application/x-ndjson" },
  );
  if (status !== 200 || !text.includes('"name":"exit","value":0')) {
    throw new Error(`exec true: ${status} ${text.slice(0, 200)}`);
  }
}

/** Runs `once` from `concurrency` loops for `ms`; completed runs per second. */
async function loops(concurrency: number, ms: number, once: () => Promise<void>): Promise<number> {
  const end = performance.now() + ms;
  let done = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        await once();
        done++;
      }
    }),
  );
  return done / ((performance.now() - t0) / 1000);
}

/**
 * Exec rate of each server in `setups` against the raw loop, interleaved: in
 * every round each server runs, then the raw loop, so that they share the
 * machine's state (on a shared VM the raw loop alone swings by ~1.5x from
 * one minute to the next).
 */
export async function execRate(
  setups: { label: string; node: ScaleNode }[],
  concurrency: number,
  seconds: number,
  rounds: number,
) {
  const ms = seconds * 1000;
  // Warm-up: a server's first seconds run cold code (measured: ~20% fewer
  // execs in the first 5 s than from the third run on); a server is measured warm.
  for (const { node } of setups) await loops(concurrency, 3000, () => httpOnce(node.url));
  await loops(concurrency, 1000, rawOnce);
  const ours: number[][] = setups.map(() => []);
  const raw: number[] = [];
  console.log(
    `\n## Exec rate: ${concurrency} concurrent \`true\`, ${seconds} s per run, ${rounds} interleaved rounds`,
  );
  const heads = setups.map((x) => `${x.label}: exec/s, ratio`);
  console.log(
    `| round | ${heads.join(" | ")} | raw spawn loop (exec/s) |\n| ---: | ${heads.map(() => "---:").join(" | ")} | ---: |`,
  );
  for (let r = 1; r <= rounds; r++) {
    const got = [];
    for (const { node } of setups) got.push(await loops(concurrency, ms, () => httpOnce(node.url)));
    const b = await loops(concurrency, ms, rawOnce);
    for (const [i, a] of got.entries()) ours[i]!.push(a);
    raw.push(b);
    const cells = got.map((a) => `${a.toFixed(0)}, ${(a / b).toFixed(2)}×`);
    console.log(`| ${r} | ${cells.join(" | ")} | ${b.toFixed(0)} |`);
  }
  // Per-round ratios (each against the raw loop of its own round), then their median.
  const ratios = ours.map((xs) => median(xs.map((a, i) => a / raw[i]!)));
  const cells = ours.map((xs, i) => `${median(xs).toFixed(0)}, **${ratios[i]!.toFixed(2)}×**`);
  console.log(`| median | ${cells.join(" | ")} | ${median(raw).toFixed(0)} |`);
  console.log("(ratio: per round, against that round's raw loop; median of those; goal ≥ 0.6×)");
  return setups.map((x, i) => ({ label: x.label, ours: median(ours[i]!), ratio: ratios[i]! }));
}

/** In-process `exec("true")` → exit against raw spawn → close, one at a time. */
export async function inProcessLatency(runs: number, rounds: number) {
  const { Computer } = await import("../../src/index.js");
  const ws = mkdtempSync(path.join(tmpdir(), "ac-bench-scale-"));
  const computer = new Computer({ workspace: ws, heartbeatMs: 0 });
  const execOnce = () => execTrueToExit(computer);
  const time = async (once: () => Promise<void>) => {
    const each: number[] = [];
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now();
      await once();
      each.push(performance.now() - t0);
    }
    return median(each);
  };
  for (let i = 0; i < 20; i++) {
    await execOnce();
    await rawOnce();
  }
  console.log(
    `\n## In-process exec("true") → exit vs raw spawn → close, p50 of ${runs} runs, ${rounds} interleaved rounds`,
  );
  console.log("| round | exec p50 ms | spawn p50 ms | ratio |\n| ---: | ---: | ---: | ---: |");
  const ours: number[] = [];
  const raw: number[] = [];
  for (let r = 1; r <= rounds; r++) {
    const a = await time(execOnce);
    const b = await time(rawOnce);
    ours.push(a);
    raw.push(b);
    console.log(`| ${r} | ${a.toFixed(2)} | ${b.toFixed(2)} | ${(a / b).toFixed(2)}× |`);
  }
  const ratio = median(ours) / median(raw);
  console.log(
    `| median | ${median(ours).toFixed(2)} | ${median(raw).toFixed(2)} | **${ratio.toFixed(2)}×** (goal ≤ 1.3×) |`,
  );
  await computer.close();
  rmSync(ws, { recursive: true, force: true });
  return { ours: median(ours), raw: median(raw), ratio };
}
