// Execution runtime benchmark (`npm run bench:exec`). In one run, side by side:
//  1. throughput of `head -c SIZE /dev/zero` read through run.events() with the
//     memory log (default: evicted events spill to disk), the memory log with
//     spilling off (memory only), and the SQLite log, against the same command
//     read straight from a child_process pipe;
//  2. latency from exec("true") to its exit event, against raw spawn to close,
//     unconfined and confined (every execution through the sandbox: bubblewrap,
//     cgroups, rlimits; skipped with a note when the host cannot confine), back
//     to back and PACE_MS apart (confined: then served by the warm pool, which
//     refills between runs; back to back is faster than it refills), and the
//     confined throughput against the unconfined one, per round;
//  3. peak RSS of each throughput phase, and of the memory-log phase at 1/4 of
//     the size, to show memory stays flat as output grows (it plateaus at the
//     ring plus garbage V8 has not collected yet, then stays there).
// Every measurement runs in a fresh Node process (so maxRSS belongs to that
// phase alone); the median of REPS runs is reported. Usage (after
// `npm run bench:build`; `npm run bench:exec -- ARGS` builds first):
//   node .bench-out/bench/exec/run.js [--size MiB] [--reps N] [--confine-only] [--verbose]
//   node .bench-out/bench/exec/run.js --phase raw|memory|nospill|sqlite|spawn|exec --bytes N [--n RUNS]
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { flag, numberOption, stringOption } from "../support/args.js";
import { execTrueToExit } from "../support/exec-true.js";
import { median } from "../support/stats.js";

type Kind =
  | "raw"
  | "memory"
  | "nospill"
  | "sqlite"
  | "spawn"
  | "exec"
  | "confined"
  | "exec-confined"
  | "exec-paced"
  | "exec-confined-paced";

/** Pause between the runs of the paced latency phases (not timed): the warm pool refills. */
const PACE_MS = 150;

/** What one phase process reports: bytes and time, or time per run. */
interface PhaseResult {
  bytes: number;
  ms: number;
  perMs: number;
  maxRssMiB: number;
  cpuMs: number;
}

// The runtime is imported inside the phases that use it, so the raw phases'
// processes never load it (their peak RSS is the baseline's alone).
const loadRuntime = () => import("../../src/index.js");

/** A Computer whose executions go through a sandbox that must confine (the phases "…confined"). */
async function confinedComputer(ws: string) {
  const { Computer } = await loadRuntime();
  const { createSandbox } = await import("../../src/sandbox/index.js");
  const sandbox = await createSandbox({ workspace: ws, confine: "required" });
  await sandbox.adopt(ws);
  return { computer: new Computer({ workspace: ws, sandbox }), sandbox };
}

async function phase(kind: string, bytes: number, n: number) {
  let cpu0 = process.cpuUsage();
  const cmd = `head -c ${bytes} /dev/zero`;
  let result: Partial<PhaseResult> = {};
  /**
   * 20 warm-up runs of `once`, then `n` timed ones (the CPU clock restarts
   * with them), with `gapMs` of idle time before each; the p50 run.
   */
  const timePerRun = async (once: () => Promise<unknown>, gapMs = 0) => {
    for (let i = 0; i < 20; i++) await once();
    cpu0 = process.cpuUsage();
    const each: number[] = [];
    for (let i = 0; i < n; i++) {
      if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
      const t0 = process.hrtime.bigint();
      await once();
      each.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    return { perMs: median(each) };
  };
  if (kind === "raw") {
    const t0 = process.hrtime.bigint();
    cpu0 = process.cpuUsage();
    let got = 0;
    await new Promise((resolve, reject) => {
      const child = spawn("/bin/sh", ["-c", cmd], { stdio: ["ignore", "pipe", "pipe"] });
      child.stdout.on("data", (c: Buffer) => {
        got += c.length;
      });
      child.on("error", reject);
      child.on("close", resolve);
    });
    result = { bytes: got, ms: Number(process.hrtime.bigint() - t0) / 1e6 };
  } else if (kind === "memory" || kind === "nospill" || kind === "sqlite" || kind === "confined") {
    const { Computer } = await loadRuntime();
    const ws = mkdtempSync(path.join(tmpdir(), "ac-bench-"));
    const eventLog = kind === "sqlite" ? { sqlite: path.join(ws, "bench.db") } : "memory";
    const spill = kind === "nospill" ? { spillMaxBytes: 0 } : {};
    const boxed = kind === "confined" ? await confinedComputer(ws) : undefined;
    const computer = boxed?.computer ?? new Computer({ workspace: ws, eventLog, spill });
    await computer.exec("true").then((r) => r.result()); // warm up the log
    const t0 = process.hrtime.bigint();
    cpu0 = process.cpuUsage();
    const run = await computer.exec(cmd);
    const reader = run.events().getReader();
    let got = 0;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      if (value.name === "stdout") got += (value.value as Uint8Array).byteLength; // b64: bytes
    }
    result = { bytes: got, ms: Number(process.hrtime.bigint() - t0) / 1e6 };
    await computer.close();
    await boxed?.sandbox.dispose();
    rmSync(ws, { recursive: true, force: true });
  } else if (kind === "spawn") {
    const once = () =>
      new Promise<void>((resolve, reject) => {
        const child = spawn("/bin/sh", ["-c", "true"], { stdio: ["ignore", "pipe", "pipe"] });
        child.on("error", reject);
        child.on("close", resolve);
      });
    result = await timePerRun(once);
  } else if (kind.startsWith("exec")) {
    const { Computer } = await loadRuntime();
    const ws = mkdtempSync(path.join(tmpdir(), "ac-bench-"));
    const boxed = kind.startsWith("exec-confined") ? await confinedComputer(ws) : undefined;
    const computer = boxed?.computer ?? new Computer({ workspace: ws });
    const once = () => execTrueToExit(computer);
    result = await timePerRun(once, kind.endsWith("-paced") ? PACE_MS : 0);
    await computer.close();
    await boxed?.sandbox.dispose();
    rmSync(ws, { recursive: true, force: true });
  }
  const cpu = process.cpuUsage(cpu0);
  result.maxRssMiB = process.resourceUsage().maxRSS / 1024;
  // CPU the Node process spent in the measured part (user + system, all
  // threads): steadier on a busy machine, where wall time also measures
  // everyone else's load.
  result.cpuMs = (cpu.user + cpu.system) / 1000;
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

function runPhase(kind: Kind, bytes: number, n = 200): Promise<PhaseResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [fileURLToPath(import.meta.url), "--phase", kind, "--bytes", String(bytes), "--n", String(n)],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let out = "";
    child.stdout.on("data", (c) => {
      out += c;
    });
    child.on("close", (code) =>
      code === 0
        ? resolve(JSON.parse(out.trim().split("\n").pop() ?? ""))
        : reject(new Error(`${kind} failed`)),
    );
  });
}

async function main() {
  const sizeMiB = numberOption("size", 1024);
  const reps = numberOption("reps", 3);
  // Only what the confined-vs-unconfined comparison needs (shorter rounds).
  const confineOnly = flag("confine-only");
  const bytes = sizeMiB * 1024 * 1024;
  const rows: Record<string, PhaseResult[]> = {};
  const add = (k: string, v: PhaseResult) => {
    rows[k] ??= [];
    rows[k].push(v);
  };
  const rowsOf = (k: string) => rows[k] ?? [];
  console.log(`exec bench: ${sizeMiB} MiB of /dev/zero, ${reps} rounds, node ${process.version}`);
  const { probeHost } = await import("../../src/sandbox/index.js");
  const host = await probeHost();
  const canConfine = host.verdict.required.ok;
  console.log(
    canConfine
      ? `sandbox: ${host.verdict.required.message}`
      : `sandbox: SKIPPED, cannot confine here: ${host.verdict.required.message}`,
  );
  for (let r = 0; r < reps; r++) {
    // Interleave the phases so drift on a shared machine hits them alike.
    const kinds = confineOnly
      ? (["raw", "memory"] as const)
      : (["raw", "memory", "nospill", "sqlite"] as const);
    for (const kind of kinds) add(kind, await runPhase(kind, bytes));
    if (!confineOnly) add("memory-small", await runPhase("memory", Math.floor(bytes / 4)));
    add("spawn", await runPhase("spawn", 0));
    add("exec", await runPhase("exec", 0));
    add("exec-paced", await runPhase("exec-paced", 0, 100));
    if (canConfine) {
      add("confined", await runPhase("confined", bytes));
      add("exec-confined", await runPhase("exec-confined", 0, 100));
      add("exec-confined-paced", await runPhase("exec-confined-paced", 0, 100));
    }
    process.stdout.write(".");
  }
  console.log("");
  if (flag("verbose")) console.log(JSON.stringify(rows));
  const mbps = (k: string) => median(rowsOf(k).map((x) => x.bytes / 1e6 / (x.ms / 1000)));
  const rss = (k: string) => median(rowsOf(k).map((x) => x.maxRssMiB));
  const cpu = (k: string) => median(rowsOf(k).map((x) => (x.cpuMs / x.bytes) * 1e6 * 1.048576));
  for (const k of ["raw", "memory", "nospill", "sqlite", "memory-small", "confined"]) {
    for (const x of rowsOf(k)) {
      const want = k === "memory-small" ? Math.floor(bytes / 4) : bytes;
      if (x.bytes !== want) throw new Error(`${k}: got ${x.bytes} bytes, want ${want}`);
    }
  }
  const raw = mbps("raw");
  const spawnMs = median(rowsOf("spawn").map((x) => x.perMs));
  const execMs = median(rowsOf("exec").map((x) => x.perMs));
  const row = (label: string, k: string) => [
    label,
    `${mbps(k).toFixed(0)} MB/s`,
    `${(mbps(k) / raw).toFixed(2)}x`,
    `${cpu(k).toFixed(2)} ms`,
    `${rss(k).toFixed(0)} MiB`,
  ];
  const table: string[][] = [];
  const rowIf = (label: string, k: string) => {
    if (rowsOf(k).length > 0) table.push(row(label, k));
  };
  for (const [label, k] of [
    [`raw child_process pipe, ${sizeMiB} MiB`, "raw"],
    [`run.events(), memory log + disk spill (default), ${sizeMiB} MiB`, "memory"],
    [`run.events(), memory log, spill off, ${sizeMiB} MiB`, "nospill"],
    [`run.events(), SQLite log, ${sizeMiB} MiB`, "sqlite"],
    [`run.events(), memory log, ${sizeMiB / 4} MiB`, "memory-small"],
  ] as const)
    rowIf(label, k);
  if (canConfine) rowIf(`run.events(), memory log, CONFINED, ${sizeMiB} MiB`, "confined");
  console.log(
    "| path | throughput (median) | vs raw | Node CPU per MiB | peak RSS |\n| --- | --- | --- | --- | --- |",
  );
  for (const row of table) console.log(`| ${row.join(" | ")} |`);
  console.log("");
  console.log("| start to exit of `true` | p50 | vs raw |\n| --- | --- | --- |");
  console.log(`| raw spawn -> close | ${spawnMs.toFixed(2)} ms | 1.00x |`);
  console.log(
    `| exec("true") -> exit event, unconfined | ${execMs.toFixed(2)} ms | ${(execMs / spawnMs).toFixed(2)}x |`,
  );
  const pacedMs = median(rowsOf("exec-paced").map((x) => x.perMs));
  console.log(
    `| exec("true") -> exit event, unconfined, ${PACE_MS} ms apart | ${pacedMs.toFixed(2)} ms | ${(pacedMs / spawnMs).toFixed(2)}x |`,
  );
  if (canConfine) {
    const boxedMs = median(rowsOf("exec-confined").map((x) => x.perMs));
    const boxedPacedMs = median(rowsOf("exec-confined-paced").map((x) => x.perMs));
    console.log(
      `| exec("true") -> exit event, confined, back to back | ${boxedMs.toFixed(2)} ms | ${(boxedMs / spawnMs).toFixed(2)}x |`,
    );
    console.log(
      `| exec("true") -> exit event, confined, ${PACE_MS} ms apart (warm pool) | ${boxedPacedMs.toFixed(2)} ms | ${(boxedPacedMs / spawnMs).toFixed(2)}x |`,
    );
    console.log("");
    const perRound = (k: string) =>
      rowsOf(k).map(
        (x, i) => x.bytes / x.ms / (rowsOf("memory")[i]!.bytes / rowsOf("memory")[i]!.ms),
      );
    console.log(
      `confinement adds ${(boxedPacedMs - pacedMs).toFixed(2)} ms per exec("true") ${PACE_MS} ms apart (warm pool; goal <= 5), ` +
        `${(boxedMs - execMs).toFixed(2)} ms back to back (faster than the pool refills: mostly cold); ` +
        `confined throughput ${(mbps("confined") / mbps("memory")).toFixed(2)}x the unconfined (goal >= 0.9; per round: ${perRound(
          "confined",
        )
          .map((r) => r.toFixed(2))
          .join(", ")})`,
    );
  }
}

const phaseKind = stringOption("phase");
if (phaseKind) {
  await phase(phaseKind, numberOption("bytes", 0), numberOption("n", 200));
} else {
  await main();
}
