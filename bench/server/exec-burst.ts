// How long a burst of exec requests blocks the server's event loop. 200
// concurrent `POST /v1/execs` (each spawns a short command) against the same
// number of `GET /healthz` as the peer (same HTTP path, no spawn), measured
// with perf_hooks.monitorEventLoopDelay in the server's process; prints the
// worst and p99 stall of each and their ratio. The clients run in a child
// process so their own work does not count as the server's stall.
//   npm run bench:exec-burst -- [requests, default 200] [rounds, default 3]
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { Computer } from "../../src/runtime/computer.js";
import { createComputerServer } from "../../src/server/app.js";

const N = Number(process.argv[2] ?? 200);
const ROUNDS = Number(process.argv[3] ?? 3);
const TOKEN = "bench-token-0123456789";

const CLIENT = `
const [url, token, n, kind] = process.argv.slice(1);
const auth = { authorization: "Bearer " + token, "content-type": "application/json" };
const one = kind === "exec"
  ? () => fetch(url + "/v1/execs", { method: "POST", headers: auth,
      body: JSON.stringify({ command: "echo hi; sleep 0.2" }) }).then((r) => r.arrayBuffer())
  : () => fetch(url + "/healthz", { headers: auth }).then((r) => r.arrayBuffer());
const t0 = performance.now();
await Promise.all(Array.from({ length: Number(n) }, one));
console.log(Math.round(performance.now() - t0));
`;

function burst(url: string, kind: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const c = spawn(
      process.execPath,
      ["--input-type=module", "-e", CLIENT, url, TOKEN, String(N), kind],
      {
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    let out = "";
    c.stdout.on("data", (d: Buffer) => {
      out += d;
    });
    c.once("error", reject);
    c.once("exit", (code) =>
      code === 0 ? resolve(Number(out)) : reject(new Error(`exit ${code}`)),
    );
  });
}

async function measure(url: string, kind: string) {
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  const ms = await burst(url, kind);
  await new Promise((r) => setTimeout(r, 500)); // the commands end meanwhile
  h.disable();
  return { ms, max: h.max / 1e6, p99: h.percentile(99) / 1e6 };
}

const base = await mkdtemp(path.join(tmpdir(), "ac-burst-"));
const server = createComputerServer({
  workspace: base,
  port: 0,
  token: TOKEN,
  logger: false,
  computer: (observer) => new Computer({ workspace: base, observer }),
});
const url = await server.listen();
console.log(
  `exec burst: ${N} concurrent requests, ${ROUNDS} rounds (loaded 2-core box shared with other jobs)`,
);
for (let r = 0; r < ROUNDS; r++) {
  const peer = await measure(url, "healthz");
  const exec = await measure(url, "exec");
  console.log(
    `round ${r + 1}: healthz worst stall ${peer.max.toFixed(1)} ms (p99 ${peer.p99.toFixed(1)}, ${peer.ms} ms total) | ` +
      `exec worst stall ${exec.max.toFixed(1)} ms (p99 ${exec.p99.toFixed(1)}, ${exec.ms} ms total) | ` +
      `ratio ${(exec.max / peer.max).toFixed(1)}x`,
  );
}
await server.close();
await rm(base, { recursive: true, force: true });
