// The processes the server benchmarks compare, and how they are measured:
// our server (the CLI's `serve`: memory log, heartbeats off, a fixed token)
// and the raw node:http baseline (raw-server.ts), each in its own process so
// that its CPU time and RSS are its own; read from Linux /proc.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startNodeProcess, stopProcess } from "../support/processes.js";

const here = path.dirname(fileURLToPath(import.meta.url));
/**
 * The CLI compiled beside this file: `npm run bench:build` compiles src/ and
 * bench/ into one tree (.bench-out/), so this is the same build as the code
 * the benchmark imports.
 */
const CLI = path.resolve(here, "../../src/cli/main.js");
export const TOKEN = "bench-token-0123456789";

export interface BenchServer {
  readonly child: ChildProcess & { readonly pid: number };
  readonly url: string;
}

async function start(argv: string[], ready: RegExp): Promise<BenchServer> {
  const { child, ready: url } = await startNodeProcess(argv, ready);
  return { child: child as BenchServer["child"], url };
}

/**
 * Starts our server and the raw baseline. `stop()` ends both (waiting for
 * ours, which kills its running commands) and removes the workspace.
 */
export async function startServers() {
  const dir = mkdtempSync(path.join(tmpdir(), "ac-bench-server-"));
  const ours = await start(
    [
      CLI,
      "serve",
      "--port",
      "0",
      "--workspace",
      path.join(dir, "ws"),
      "--token",
      TOKEN,
      "--quiet",
      "--heartbeat-ms",
      "0",
    ],
    /agent-computer listening: (http:\/\/[^/\s]+)/,
  );
  const raw = await start([path.join(here, "raw-server.js")], /raw listening: (\S+)/);
  return {
    ours,
    raw,
    async stop() {
      await Promise.all([stopProcess(ours.child), stopProcess(raw.child)]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
