// How a burst of exec requests affects everything else the server does.
// N concurrent `POST /v1/execs` (each spawns a short command), against the
// same number of `GET /healthz` as the peer (same HTTP path, no spawn), and
// against the same exec burst on a server whose spawn queue is off
// (`spawnSliceMs: Infinity`: every spawn that is ready runs in the same turn
// of the event loop, as before the queue existed). For each, measured while
// the burst runs and its commands end:
//  - the server's event-loop stalls (perf_hooks.monitorEventLoopDelay in the
//    server's process): worst and p99;
//  - what another client sees meanwhile: the latency of a `GET /healthz`
//    loop, and the delivery delay of an unrelated event stream (a command
//    printing its clock every 20 ms, read with `GET /v1/execs/:id/events`);
//  - that every exec request got its execution (201s, executions finished).
// The clients run in child processes so their work does not count as the
// server's stall.
//   npm run bench:exec-burst -- [--n 200] [--rounds 3]
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { Computer } from "../../src/runtime/computer.js";
import { createComputerServer } from "../../src/server/app.js";
import { numberOption } from "../support/args.js";
import { percentile } from "../support/stats.js";

const N = numberOption("n", 200);
const ROUNDS = numberOption("rounds", 3);
const TOKEN = "bench-token-0123456789";

/** The burst: N requests at once; prints the time and the statuses. */
const CLIENT = `
const [url, token, n, kind] = process.argv.slice(1);
const auth = { authorization: "Bearer " + token, "content-type": "application/json" };
const statuses = {};
const one = () => (kind === "exec"
  ? fetch(url + "/v1/execs", { method: "POST", headers: auth,
      body: JSON.stringify({ command: "echo hi; sleep 0.2" }) })
  : fetch(url + "/healthz", { headers: auth }))
  .then(async (r) => { await r.arrayBuffer(); statuses[r.status] = (statuses[r.status] ?? 0) + 1; });
const t0 = performance.now();
await Promise.all(Array.from({ length: Number(n) }, one));
console.log(JSON.stringify({ ms: Math.round(performance.now() - t0), statuses }));
`;

/**
 * The bystander: a GET /healthz loop (one at a time, 10 ms apart) and the
 * event stream of the ticker execution, recording between "start" and "stop"
 * lines on stdin; "stop" prints the samples.
 */
const PROBE = `
const [url, token, id] = process.argv.slice(1);
const auth = { authorization: "Bearer " + token };
const now = () => performance.timeOrigin + performance.now();
let rec = null;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
(async () => {
  for (;;) {
    const t0 = performance.now();
    await fetch(url + "/healthz", { headers: auth }).then((r) => r.arrayBuffer());
    rec?.health.push(performance.now() - t0);
    await sleep(10);
  }
})();
(async () => {
  const r = await fetch(url + "/v1/execs/" + id + "/events?after=tail&heartbeats=0",
    { headers: { ...auth, accept: "application/x-ndjson" } });
  const dec = new TextDecoder();
  let buf = "", out = "";
  for await (const chunk of r.body) {
    buf += dec.decode(chunk, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\\n")) >= 0) {
      const frame = JSON.parse(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      if (frame.name !== "stdout") continue;
      out += frame.value;
      let el;
      while ((el = out.indexOf("\\n")) >= 0) {
        const sent = Number(out.slice(0, el));
        out = out.slice(el + 1);
        rec?.stream.push(now() - sent);
      }
    }
  }
})();
const lines = (await import("node:readline")).createInterface({ input: process.stdin });
lines.on("line", (l) => {
  if (l === "start") rec = { health: [], stream: [] };
  else if (l === "stop") { console.log(JSON.stringify(rec)); rec = null; }
  else if (l === "exit") process.exit(0);
});
`;

const TICKER = `node -e 'setInterval(() => console.log(performance.timeOrigin + performance.now()), 20)'`;

function burst(url: string, kind: string): Promise<{ ms: number; statuses: object }> {
  return new Promise((resolve, reject) => {
    const c = spawn(
      process.execPath,
      ["--input-type=module", "-e", CLIENT, url, TOKEN, String(N), kind],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let out = "";
    c.stdout.on("data", (d: Buffer) => {
      out += d;
    });
    c.once("error", reject);
    c.once("exit", (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`exit ${code}`)),
    );
  });
}

class Probe {
  private readonly child: ChildProcess;
  private readonly replies: Array<(line: string) => void> = [];
  constructor(url: string, tickerId: string) {
    this.child = spawn(
      process.execPath,
      ["--input-type=module", "-e", PROBE, url, TOKEN, tickerId],
      { stdio: ["pipe", "pipe", "inherit"] },
    );
    createInterface({ input: this.child.stdout! }).on("line", (l) => this.replies.shift()?.(l));
  }
  start(): void {
    this.child.stdin!.write("start\n");
  }
  stop(): Promise<{ health: number[]; stream: number[] }> {
    return new Promise((resolve) => {
      this.replies.push((l) => resolve(JSON.parse(l)));
      this.child.stdin!.write("stop\n");
    });
  }
  close(): void {
    this.child.stdin!.write("exit\n");
  }
}

let finished = 0;
async function measure(url: string, kind: string, probe: Probe) {
  const h = monitorEventLoopDelay({ resolution: 2 });
  finished = 0;
  probe.start();
  h.enable();
  const b = await burst(url, kind);
  // The commands end meanwhile (sleep 0.2 after the last one started).
  const t0 = Date.now();
  while (kind === "exec" && finished < N && Date.now() - t0 < 10_000) {
    await new Promise((r) => setTimeout(r, 50));
  }
  await new Promise((r) => setTimeout(r, 300));
  h.disable();
  const seen = await probe.stop();
  return { ...b, finished, max: h.max / 1e6, p99: h.percentile(99) / 1e6, seen };
}

const fmt = (xs: number[]) =>
  xs.length === 0
    ? "no samples"
    : `p50 ${percentile(xs, 50).toFixed(1)} / p99 ${percentile(xs, 99).toFixed(1)} / max ${Math.max(...xs).toFixed(1)} ms (${xs.length})`;

/** A server with its ticker execution and its bystander. */
async function startServer(base: string, spawnSliceMs: number | undefined) {
  const workspace = await mkdtemp(path.join(base, "ws-"));
  const server = createComputerServer({
    workspace,
    port: 0,
    token: TOKEN,
    logger: false,
    computer: (observer) =>
      new Computer({
        workspace,
        ...(spawnSliceMs !== undefined ? { spawnSliceMs } : {}),
        observer: {
          ...observer,
          finished(rec) {
            finished++;
            observer?.finished?.(rec);
          },
        },
      }),
  });
  const url = await server.listen();
  const ticker = (await (
    await fetch(`${url}/v1/execs`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ command: TICKER, encoding: "utf8" }),
    })
  ).json()) as { id: string };
  return { server, url, ticker: ticker.id, probe: new Probe(url, ticker.id) };
}

const base = await mkdtemp(path.join(tmpdir(), "ac-burst-"));
const queued = await startServer(base, undefined);
const unqueued = await startServer(base, Number.POSITIVE_INFINITY);
await new Promise((r) => setTimeout(r, 1000)); // the tickers and the probes are up
console.log(
  `exec burst: ${N} concurrent requests, ${ROUNDS} rounds (loaded 2-core box shared with other jobs)`,
);
const contenders = [
  { name: "healthz (peer)", kind: "healthz", s: queued },
  { name: "exec, queue off", kind: "exec", s: unqueued },
  { name: "exec, spawn queue", kind: "exec", s: queued },
];
const worst = new Map<string, number[]>();
for (let r = 0; r < ROUNDS; r++) {
  for (const c of contenders) {
    const m = await measure(c.s.url, c.kind, c.s.probe);
    worst.set(c.name, [...(worst.get(c.name) ?? []), m.max]);
    console.log(
      `round ${r + 1} ${c.name}: loop stall worst ${m.max.toFixed(1)} ms (p99 ${m.p99.toFixed(1)}); ` +
        `burst ${m.ms} ms, statuses ${JSON.stringify(m.statuses)}` +
        (c.kind === "exec" ? `, finished ${m.finished}/${N}` : ""),
    );
    console.log(`    bystander GET /healthz: ${fmt(m.seen.health)}`);
    console.log(`    bystander event stream delay: ${fmt(m.seen.stream)}`);
  }
}
for (const [name, xs] of worst) {
  console.log(`${name}: worst stall per round ${xs.map((x) => x.toFixed(0)).join(", ")} ms`);
}
for (const s of [queued, unqueued]) {
  s.probe.close();
  await fetch(`${s.url}/v1/execs/${s.ticker}/kill`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  await s.server.close();
}
await rm(base, { recursive: true, force: true });
