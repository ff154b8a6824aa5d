// The server's own cost per byte, without a Node client competing for the
// CPU: `curl` (C, a few % of a core) streams a command's output from our
// server (exec-wire and SSE) and from the raw node:http baseline, and we read
// each server's CPU time from /proc before and after. On 2 cores the
// end-to-end benchmark (run.ts) mixes server and client costs; this one
// shows what a server change saves. Alternating rounds, one line per run.
//   npm run bench:server-cpu -- [MiB per run, default 512] [rounds, default 3]
//   (or after `npm run bench:build`: node .bench-out/bench/server/server-cpu.js ...)
// Linux only (/proc); needs curl on PATH.
import { spawn } from "node:child_process";
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

const servers = await startServers();
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
console.log("| round | server | MB/s of output | server CPU s/GiB |\n| ---: | --- | ---: | ---: |");
try {
  for (let r = 1; r <= ROUNDS; r++) {
    for (const [name, [srv, run]] of Object.entries(runs)) {
      const c0 = cpuSeconds(srv.child.pid);
      const { ms, wireBytes } = await run();
      // Raw sends the bytes as they are; our frames carry them in base64 (4/3).
      if (name === "raw" ? wireBytes !== SIZE : wireBytes < (SIZE * 4) / 3) {
        throw new Error(`${name}: ${wireBytes} bytes on the wire for ${SIZE} of output`);
      }
      const cpu = cpuSeconds(srv.child.pid) - c0;
      const perGiB = (cpu * 2 ** 30) / SIZE;
      console.log(`| ${r} | ${name} | ${(SIZE / 1e3 / ms).toFixed(0)} | ${perGiB.toFixed(2)} |`);
    }
  }
} finally {
  await servers.stop();
}
