// Counts a Node process's garbage collections, for benchmarks that compare
// GC work (server CPU per GiB): loaded into the measured process with
// `--import` (through NODE_OPTIONS, so the process under test needs no flag
// of its own), it keeps counts by kind from the `gc` performance entries and
// writes them as JSON to `$AC_BENCH_GC_DIR/<pid>.json` whenever they changed
// (checked every 50 ms, off the hot path). The benchmark reads that file
// before and after a run (readGcCounts).

import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { constants, PerformanceObserver } from "node:perf_hooks";

export interface GcCounts {
  /** Mark-compact (full) collections. */
  major: number;
  /** Scavenges (young generation). */
  minor: number;
  /** Milliseconds spent in all collections. */
  ms: number;
}

/** The counts the process `pid` last wrote (zeros before its first GC). */
export function readGcCounts(dir: string, pid: number): GcCounts {
  try {
    return JSON.parse(readFileSync(path.join(dir, `${pid}.json`), "utf8")) as GcCounts;
  } catch {
    return { major: 0, minor: 0, ms: 0 };
  }
}

const dir = process.env.AC_BENCH_GC_DIR;
if (dir && process.argv[1] && !process.argv[1].endsWith("server-cpu.js")) {
  const counts: GcCounts = { major: 0, minor: 0, ms: 0 };
  let dirty = false;
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = (e as unknown as { detail?: { kind?: number } }).detail?.kind;
      if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) counts.major++;
      else if (kind === constants.NODE_PERFORMANCE_GC_MINOR) counts.minor++;
      counts.ms += e.duration;
      dirty = true;
    }
  }).observe({ entryTypes: ["gc"] });
  const file = path.join(dir, `${process.pid}.json`);
  setInterval(() => {
    if (!dirty) return;
    dirty = false;
    writeFileSync(file, JSON.stringify(counts));
  }, 50).unref();
}
