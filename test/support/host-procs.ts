// Host processes found by their command line (/proc/<pid>/cmdline, NULs as
// spaces), for the sandbox suites that check what runs outside a sandbox,
// and what survives one.

import { readdirSync, readFileSync } from "node:fs";

/** Pids whose command line satisfies `match` (processes gone meanwhile are skipped). */
export function findHostProcesses(match: (cmdline: string) => boolean): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmd = readFileSync(`/proc/${name}/cmdline`, "utf8").replace(/\0/g, " ");
      if (match(cmd)) out.push(Number(name));
    } catch {
      // gone
    }
  }
  return out;
}
