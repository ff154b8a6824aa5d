// Benchmarks run the code they measure in processes of their own (so that a
// process's CPU time and RSS are its own, and server and client do not share
// an event loop). This starts such a Node process, waits for the line that
// says it is ready, and reads its CPU time and RSS from Linux /proc.

import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";

export interface StartedProcess {
  readonly child: ChildProcess;
  /** Group 1 of the ready line's match (e.g. the URL it listens on). */
  readonly ready: string;
}

/**
 * Spawns `node argv` (stderr passed through) and resolves once its stdout
 * matches `ready`; rejects if it exits first. Later stdout is drained.
 */
export function startNodeProcess(argv: string[], ready: RegExp): Promise<StartedProcess> {
  const child = spawn(process.execPath, argv, { stdio: ["ignore", "pipe", "inherit"] });
  const stdout = child.stdout as NonNullable<ChildProcess["stdout"]>;
  return new Promise((resolve, reject) => {
    let out = "";
    const onData = (chunk: Buffer) => {
      out += chunk;
      const m = ready.exec(out);
      if (m) {
        stdout.off("data", onData);
        stdout.resume();
        resolve({ child, ready: m[1] ?? m[0] });
      }
    };
    stdout.on("data", onData);
    child.once("exit", (code) => reject(new Error(`${argv[0]} exited early (${code})`)));
  });
}

/** Sends `signal` to the child and resolves once it has exited. */
export async function stopProcess(
  child: ChildProcess,
  signal: NodeJS.Signals = "SIGTERM",
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill(signal);
  await exited;
}

/** User + system CPU seconds used so far by process `pid` (clock ticks of 10 ms). */
export function cpuSeconds(pid: number): number {
  const fields = (readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1] ?? "").split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Resident set size of process `pid` in MiB. */
export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}
