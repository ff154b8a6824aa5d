// Live executions, part (b) of `bench:scale`: N executions at once, each
// printing one line every 100 ms for D seconds, each followed by one
// subscriber: SSE over node:http, one WebSocket per execution with `ws`
// ("ws"), or one WebSocket per server carrying every subscription ("ws-mux",
// what the SDK's WebSocket transport does).
//
// Each line is "<i> <CLOCK_REALTIME>" written by bash itself ($EPOCHREALTIME
// and `read -t` on a pipe nobody writes: no fork per line, so the 2-core box
// spends its time on the server, not on `date`/`sleep`). The subscriber
// subtracts the stamp from its own clock on receipt: child write → client
// receipt. Every subscriber checks that seqs are gap-free from 1 and that the
// line numbers run 1..10·D with none missing, then an exit frame: nothing lost.
// Commands wait 1 s before their first line so that the subscriber (attached
// after the start returned) measures live delivery, not a replay.
//
// Reported: p50/p99/max latency over all lines and over the steady window
// (every execution started, none finished), server RSS per live execution
// (RSS with all N live minus RSS before, over N, summed over nodes), server
// CPU, and the benchmark process's own event-loop delay p99 (a client that
// lags inflates the latency it measures).

import http from "node:http";
import { monitorEventLoopDelay } from "node:perf_hooks";
import WebSocket from "ws";
import { cpuSeconds } from "../support/processes.js";
import { percentile } from "../support/stats.js";
import { agent, requestJson, type ScaleCluster, TOKEN } from "./nodes.js";

export type Transport = "sse" | "ws" | "ws-mux";

interface Sub {
  lastSeq: number;
  lastLine: number;
  problems: string[];
  exited: boolean;
}

const nowMs = () => performance.timeOrigin + performance.now();

function script(seconds: number): string {
  return `exec 9<> <(:); read -t 1 -u 9; i=0; while [ $i -lt ${seconds * 10} ]; do i=$((i+1)); echo "$i $EPOCHREALTIME"; read -t 0.1 -u 9; done; exit 0`;
}

interface Frame {
  id?: string;
  seq?: number;
  name: string;
  value?: unknown;
  code?: string;
  message?: string;
}

class Collector {
  readonly all: number[] = [];
  readonly stamped: { ts: number; lat: number }[] = [];
  lines = 0;

  /** One exec-wire frame of subscriber `s`. */
  frame(s: Sub, f: Frame, at: number): void {
    if (f.name === "error") {
      s.problems.push(`error frame ${f.code}: ${f.message}`);
      return;
    }
    if (f.seq !== s.lastSeq + 1) s.problems.push(`seq ${f.seq} after ${s.lastSeq}`);
    s.lastSeq = f.seq ?? s.lastSeq;
    if (f.name === "exit") {
      s.exited = true;
      if (f.value !== 0) s.problems.push(`exit ${String(f.value)}`);
      return;
    }
    if (f.name !== "stdout") {
      s.problems.push(`${f.name}: ${String(f.value)}`);
      return;
    }
    for (const line of String(f.value).split("\n")) {
      if (!line) continue;
      const sp = line.indexOf(" ");
      const i = Number(line.slice(0, sp));
      const ts = Number(line.slice(sp + 1)) * 1000;
      if (i !== s.lastLine + 1) s.problems.push(`line ${i} after ${s.lastLine}`);
      s.lastLine = i;
      const lat = at - ts;
      this.all.push(lat);
      this.stamped.push({ ts, lat });
      this.lines++;
    }
  }
}

function followSse(url: string, id: string, s: Sub, c: Collector): Promise<void> {
  return new Promise((resolve) => {
    const req = http.get(
      `${url}/v1/execs/${id}/events?after=0&heartbeats=0`,
      { agent, headers: { authorization: `Bearer ${TOKEN}`, accept: "text/event-stream" } },
      (res) => {
        if (res.statusCode !== 200) s.problems.push(`status ${res.statusCode}`);
        res.setEncoding("utf8");
        let buf = "";
        res.on("data", (chunk: string) => {
          const at = nowMs();
          buf += chunk;
          let nl = buf.indexOf("\n");
          while (nl >= 0) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            if (line.startsWith("data: {")) c.frame(s, JSON.parse(line.slice(6)) as Frame, at);
            nl = buf.indexOf("\n");
          }
        });
        res.on("end", () => resolve());
        res.on("error", (err) => {
          s.problems.push(String(err));
          resolve();
        });
      },
    );
    req.on("error", (err) => {
      s.problems.push(String(err));
      resolve();
    });
  });
}

function followWs(url: string, id: string, s: Sub, c: Collector): Promise<void> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${url.replace(/^http/, "ws")}/v1/ws`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    ws.on("open", () =>
      ws.send(JSON.stringify({ type: "subscribe", id, after: 0, heartbeats: false })),
    );
    ws.on("message", (data: Buffer) => {
      const at = nowMs();
      for (const line of data.toString("utf8").split("\n")) {
        if (line) c.frame(s, JSON.parse(line) as Frame, at);
      }
      if (s.exited || s.problems.length > 0) ws.close();
    });
    ws.on("error", (err) => {
      s.problems.push(String(err));
    });
    ws.on("close", () => resolve());
  });
}

/** One WebSocket to a server carrying every subscription made through it. */
class MuxSocket {
  private readonly ws: WebSocket;
  private readonly opened: Promise<void>;
  private readonly subs = new Map<string, { s: Sub; done: () => void }>();

  constructor(url: string, c: Collector) {
    this.ws = new WebSocket(`${url.replace(/^http/, "ws")}/v1/ws`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    this.opened = new Promise((resolve, reject) => {
      this.ws.once("open", () => resolve());
      this.ws.once("error", reject);
    });
    this.ws.on("message", (data: Buffer) => {
      const at = nowMs();
      for (const line of data.toString("utf8").split("\n")) {
        if (!line) continue;
        const f = JSON.parse(line) as Frame;
        const entry = f.id === undefined ? undefined : this.subs.get(f.id);
        if (!entry) {
          // An error without an id concerns the socket: every subscription on it.
          if (f.name === "error") for (const e of this.subs.values()) c.frame(e.s, f, at);
          continue;
        }
        c.frame(entry.s, f, at);
        if (entry.s.exited || entry.s.problems.length > 0) {
          this.subs.delete(f.id!);
          entry.done();
        }
      }
    });
    this.ws.on("close", () => {
      for (const e of this.subs.values()) {
        e.s.problems.push("socket closed");
        e.done();
      }
      this.subs.clear();
    });
  }

  follow(id: string, s: Sub): Promise<void> {
    return new Promise((done) => {
      this.subs.set(id, { s, done });
      this.opened.then(
        () => this.ws.send(JSON.stringify({ type: "subscribe", id, after: 0, heartbeats: false })),
        (err: unknown) => {
          s.problems.push(String(err));
          this.subs.delete(id);
          done();
        },
      );
    });
  }

  close(): void {
    this.ws.close();
  }
}

export async function liveExecutions(
  cluster: ScaleCluster,
  n: number,
  seconds: number,
  transport: Transport,
) {
  const { nodes } = cluster;
  const rss0 = nodes.map((x) => x.rssMiB());
  const cpu0 = nodes.map((x) => cpuSeconds(x.pid));
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const c = new Collector();
  const subs: Sub[] = [];
  const follows: Promise<void>[] = [];
  const argv = ["bash", "-c", script(seconds)];
  const muxes = new Map<string, MuxSocket>();
  const muxOf = (url: string): MuxSocket => {
    let m = muxes.get(url);
    if (!m) muxes.set(url, (m = new MuxSocket(url, c)));
    return m;
  };
  const tStart = nowMs();
  let next = 0;
  // Starts go 32 at a time: a thousand spawns at once would only queue.
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < n) {
        const k = next++;
        const owner = nodes[k % nodes.length]!;
        const reader = nodes[(k + 1) % nodes.length]!;
        const sub: Sub = { lastSeq: 0, lastLine: 0, problems: [], exited: false };
        subs.push(sub);
        const body = { argv, encoding: "utf8" };
        // One retry: a keep-alive socket the server is closing can be picked
        // for a new request (a client/server race, not what is measured).
        const r = await requestJson(`${owner.url}/v1/execs`, "POST", body)
          .catch(() => requestJson(`${owner.url}/v1/execs`, "POST", body))
          .catch((err: unknown) => ({ status: 0, body: String(err) }));
        if (r.status !== 201) {
          sub.problems.push(`start: ${r.status} ${JSON.stringify(r.body)}`);
          continue;
        }
        const id = (r.body as { id: string }).id;
        follows.push(
          transport === "sse"
            ? followSse(reader.url, id, sub, c)
            : transport === "ws"
              ? followWs(reader.url, id, sub, c)
              : muxOf(reader.url).follow(id, sub),
        );
      }
    }),
  );
  const tAllStarted = nowMs();
  // Every execution is live between tAllStarted and the first one's end.
  const steadyEnd = tStart + 1000 + seconds * 1000;
  let rssLive: number[] | undefined;
  if (steadyEnd - tAllStarted > 2000) {
    await new Promise((r) => setTimeout(r, (steadyEnd - tAllStarted) / 2));
    rssLive = nodes.map((x) => x.rssMiB());
  }
  await Promise.all(follows);
  for (const m of muxes.values()) m.close();
  loop.disable();
  const cpu = nodes.reduce((a, x, i) => a + cpuSeconds(x.pid) - cpu0[i]!, 0);
  const wall = (nowMs() - tStart) / 1000;
  const expected = n * seconds * 10;
  const problems = subs.filter(
    (s) => s.problems.length > 0 || !s.exited || s.lastLine !== seconds * 10,
  );
  const steady = c.stamped
    .filter((x) => x.ts >= tAllStarted && x.ts <= steadyEnd)
    .map((x) => x.lat);
  const rssPer = rssLive
    ? (rssLive.reduce((a, b) => a + b, 0) - rss0.reduce((a, b) => a + b, 0)) / n
    : Number.NaN;
  const result = {
    setup: cluster.label,
    transport,
    n,
    seconds,
    startSecs: (tAllStarted - tStart) / 1000,
    lines: c.lines,
    expected,
    badSubscribers: problems.length,
    firstProblem: problems[0]
      ? (problems[0].problems[0] ?? `exited=${problems[0].exited} lines=${problems[0].lastLine}`)
      : "",
    p50: percentile(c.all, 50),
    p99: percentile(c.all, 99),
    max: percentile(c.all, 100),
    steadyP99: steady.length ? percentile(steady, 99) : Number.NaN,
    steadyLines: steady.length,
    rssPerExecKiB: rssPer * 1024,
    serverCpuPct: (cpu / wall) * 100,
    clientLagP99: loop.percentile(99) / 1e6,
  };
  return result;
}

export function printLive(rows: Awaited<ReturnType<typeof liveExecutions>>[]): void {
  console.log(
    "\n| setup | sub | N × D s | start-up s | lines got/expected | subscribers with a gap, loss or error | p50 ms | p99 ms | max ms | steady p99 ms (lines) | server RSS per live exec | server CPU % (all nodes) | client loop lag p99 ms |",
  );
  console.log(
    "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  );
  for (const r of rows) {
    console.log(
      `| ${r.setup} | ${r.transport} | ${r.n} × ${r.seconds} | ${r.startSecs.toFixed(1)} | ${r.lines}/${r.expected} | ${r.badSubscribers}${r.firstProblem ? ` (${r.firstProblem})` : ""} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.max.toFixed(0)} | ${r.steadyP99.toFixed(1)} (${r.steadyLines}) | ${r.rssPerExecKiB.toFixed(0)} KiB | ${r.serverCpuPct.toFixed(0)} | ${r.clientLagP99.toFixed(1)} |`,
    );
  }
}
