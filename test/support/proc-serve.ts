// `agent-computer serve` as a real child process (dist/cli/main.js) for the
// process-lifetime tests: start it, read its URL, crash or signal it, and
// check whether a pid still runs (zombies count as gone: nothing reaps the
// orphans of a crashed server in some containers).

import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { ComputerClient } from "../../src/client/client.js";

const root = path.resolve(__dirname, "../..");
const cli = path.join(root, "dist/cli/main.js");
export const PROC_TOKEN = "proc-lifetime-test-token";

export interface ServeProc {
  url: string;
  child: ChildProcess;
  client: ComputerClient;
  stderr(): string;
  exited: Promise<void>;
}

/**
 * The URL a `serve` child prints on its "listening:" line; rejects when it
 * exits first or stays silent for 30 s (`label` and `output()` say which and why).
 */
export function listeningUrl(
  child: ChildProcess,
  label: string,
  output: () => string,
): Promise<string> {
  let out = "";
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${label} did not start: ${output()}`)),
      30_000,
    );
    child.stdout!.on("data", (d) => {
      out += d;
      const m = /listening: (http:\/\/[^/\s]+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${label} exited with ${code}: ${output()}`));
    });
  });
}

export async function startServe(args: string[], env: NodeJS.ProcessEnv = {}): Promise<ServeProc> {
  // Unconfined: these tests prove the guarantees that hold without namespaces
  // (a sandbox's PID namespace would also hide the pids they check).
  const child = spawn(
    process.execPath,
    [cli, "serve", "--port", "0", "--quiet", "--confine", "off", ...args],
    {
      env: { ...process.env, AGENT_COMPUTER_TOKEN: PROC_TOKEN, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let err = "";
  child.stderr!.on("data", (d) => {
    err += d;
  });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const url = await listeningUrl(child, "serve", () => err);
  child.stdout!.resume();
  return {
    url,
    child,
    client: new ComputerClient({ url, token: PROC_TOKEN }),
    stderr: () => err,
    exited,
  };
}

/** True while `pid` is a live (non-zombie) process. */
export function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

/** Polls until none of `pids` runs, or the deadline; returns those still running. */
export async function waitGone(pids: number[], ms: number): Promise<number[]> {
  const deadline = Date.now() + ms;
  for (;;) {
    const left = pids.filter(running);
    if (left.length === 0 || Date.now() > deadline) return left;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Polls `f` until it returns a value other than undefined. */
export async function until<T>(
  f: () => T | undefined | Promise<T | undefined>,
  ms = 10_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Kill leftovers of a failed test (best effort). */
export function killAll(pids: number[]): void {
  for (const p of pids) {
    try {
      process.kill(p, "SIGKILL");
    } catch {
      /* gone */
    }
  }
}
