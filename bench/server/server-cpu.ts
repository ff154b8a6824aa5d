// The server's own cost per byte, without a Node client competing for the
// CPU: `curl` (C, a few % of a core) streams a command's output from our
// server (exec-wire and SSE) and from the raw node:http baseline, and we read
// each server's CPU time from /proc before and after. On 2 cores the
// end-to-end benchmark (run.ts) mixes server and client costs; this one
// shows what a server change saves. Alternating rounds, one line per run.
//   npm run bench:server-cpu -- [MiB per run, default 512] [rounds, default 3]
//   (or after `npm run bench:build`: node .bench-out/bench/server/server-cpu.js ...)
// GC counts of each server process (full = mark-compact) come from
// bench/support/gc-counter.ts, loaded into both servers through NODE_OPTIONS.
// Linux only (/proc); needs curl on PATH.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { readGcCounts } from "../support/gc-counter.js";
import { cpuSeconds } from "../support/processes.js";
import { type BenchServer, startServers, TOKEN } from "./servers.js";

const SIZE = Number(process.argv[2] ?? 512) * 1024 * 1024;
const ROUNDS = Number(process.argv[3] ?? 3);

function curl(args: string[]): Promise<{ wireBytes: number; ms: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const c = spawn("curl", ["-fsSN", "-o", "/dev/null", "-w", "%{size_download}", ...args], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    c.stdout.on("data", (d: Buffer) => {
      out += d;
    });
    c.once("error", reject);
    c.once("exit", (code) =>
      code === 0
        ? resolve({ wireBytes: Number(out), ms: performance.now() - t0 })
        : reject(new Error(`curl exited ${code}`)),
    );
  });
}

const gcDir = mkdtempSync(path.join(tmpdir(), "ac-bench-gc-"));
const gcCounter = pathToFileURL(
  path.join(path.dirname(fileURLToPath(import.meta.url)), "../support/gc-counter.js"),
).href;
process.env.AC_BENCH_GC_DIR = gcDir;
process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ""} --import ${gcCounter}`;
const servers = await startServers();
delete process.env.NODE_OPTIONS;
const { ours, raw } = servers;
const cmd = `head -c ${SIZE} /dev/zero`;
const ourRun = (accept: string) =>
  curl([
    "-X",
    "POST",
    "-H",
    `authorization: Bearer ${TOKEN}`,
    "-H",
    "content-type: application/json",
    "-H",
    `accept: ${accept}`,
    "-d",
    JSON.stringify({ command: cmd }),
    `${ours.url}/v1/execs?stream=1`,
  ]);
const runs: Record<string, [BenchServer, () => ReturnType<typeof curl>]> = {
  raw: [raw, () => curl([`${raw.url}/?cmd=${encodeURIComponent(cmd)}`])],
  "exec-wire": [ours, () => ourRun("application/x-ndjson")],
  SSE: [ours, () => ourRun("text/event-stream")],
};
console.log(`# server CPU per GiB of command output, curl client, ${SIZE >> 20} MiB per run`);
console.log(
  "| round | server | MB/s of output | server CPU s/GiB | full GCs per GiB | scavenges per GiB | GC ms per GiB |\n| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
);
try {
  for (let r = 1; r <= ROUNDS; r++) {
    for (const [name, [srv, run]] of Object.entries(runs)) {
      const c0 = cpuSeconds(srv.child.pid);
      const g0 = readGcCounts(gcDir, srv.child.pid);
      const { ms, wireBytes } = await run();
      // Raw sends the bytes as they are; our frames carry them in base64 (4/3).
      if (name === "raw" ? wireBytes !== SIZE : wireBytes < (SIZE * 4) / 3) {
        throw new Error(`${name}: ${wireBytes} bytes on the wire for ${SIZE} of output`);
      }
      const cpu = cpuSeconds(srv.child.pid) - c0;
      await new Promise((resolve) => setTimeout(resolve, 200)); // the counter writes every 50 ms
      const g1 = readGcCounts(gcDir, srv.child.pid);
      const per = (x: number) => ((x * 2 ** 30) / SIZE).toFixed(x < 10 ? 1 : 0);
      const perGiB = (cpu * 2 ** 30) / SIZE;
      console.log(
        `| ${r} | ${name} | ${(SIZE / 1e3 / ms).toFixed(0)} | ${perGiB.toFixed(2)} | ${per(g1.major - g0.major)} | ${per(g1.minor - g0.minor)} | ${per(g1.ms - g0.ms)} |`,
      );
    }
  }
} finally {
  await servers.stop();
  rmSync(gcDir, { recursive: true, force: true });
}
