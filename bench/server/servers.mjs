// The processes the server benchmarks compare, and how they are measured:
// our server (dist/cli/main.js serve: memory log, heartbeats off, a fixed
// token) and the raw node:http baseline (raw-server.mjs), each in its own
// process so that its CPU time and RSS are its own; read from Linux /proc.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const TOKEN = "bench-token";

/** Spawns `node argv` and resolves once its stdout matches `match` (group 1 = URL). */
function startProcess(argv, match) {
  const child = spawn(process.execPath, argv, { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let out = "";
    const onData = (c) => {
      out += c;
      const m = match.exec(out);
      if (m) {
        child.stdout.off("data", onData);
        child.stdout.resume();
        resolve({ child, url: m[1] });
      }
    };
    child.stdout.on("data", onData);
    child.on("exit", (code) => reject(new Error(`process exited early (${code})`)));
  });
}

/**
 * Starts our server and the raw baseline. `stop()` ends both (waiting for
 * ours, which kills its running commands) and removes the workspace.
 */
export async function startServers() {
  const dir = mkdtempSync(path.join(tmpdir(), "ac-bench-server-"));
  const ours = await startProcess(
    [
      path.resolve(here, "../../dist/cli/main.js"),
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
  const raw = await startProcess([path.join(here, "raw-server.mjs")], /raw listening: (\S+)/);
  return {
    ours,
    raw,
    async stop() {
      ours.child.kill("SIGTERM");
      raw.child.kill("SIGTERM");
      await new Promise((r) => ours.child.once("exit", r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** User + system CPU seconds used so far by process `pid` (clock ticks of 10 ms). */
export function cpuSeconds(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) / 100;
}

/** Resident set size of process `pid` in MiB. */
export function rssMiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}
