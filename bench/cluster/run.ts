// Cluster benchmark (`npm run bench:cluster`): one node with the memory log vs
// three nodes sharing one Redis, side by side in one run on the same machine.
//
// 1. Aggregate output throughput: 300 concurrent chatty commands (a shell loop
//    writing one ~90-byte line per write(2)), each streamed to a client over
//    HTTP (exec-wire). Single node: exec and stream on the node. Cluster: exec
//    on node k%3, stream from node (k+1)%3, so every byte crosses Redis.
// 2. Latency from the child's write to a client: commands print their own
//    CLOCK_REALTIME (date +%s%N) every 20 ms; the client subtracts it from its
//    clock on receipt. Cluster: the client is attached to another node.
// 3. Redis memory per MiB of retained output (INFO used_memory delta over the
//    payload bytes retained), for large chunks and for chatty small events.
//
// Nodes run as separate processes (bench/cluster/node.ts). Redis runs without
// persistence here (AOF costs are discussed in docs/operations.md), started
// as the Redis tests start it. Sizes from the environment: BENCH_COMMANDS
// (300 concurrent commands), BENCH_LINES (2,000 lines each).

import type { ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { ComputerClient, type RemoteExecHandle } from "../../src/client/index.js";
import { type ExecEvent, type LoggedEvent, openEventLog } from "../../src/index.js";
import { REDIS_SERVER_BIN, startRedis } from "../../test/support/redis-server.js";
import { startNodeProcess, stopProcess } from "../support/processes.js";
import { percentile } from "../support/stats.js";

const here = fileURLToPath(new URL(".", import.meta.url));
const COMMANDS = Number(process.env.BENCH_COMMANDS ?? 300);
const LINES = Number(process.env.BENCH_LINES ?? 2000);
const LAT_CMDS = 10;
const LAT_SAMPLES = 100;

if (!existsSync(REDIS_SERVER_BIN)) {
  console.error(`bench:cluster needs ${REDIS_SERVER_BIN} (apt-get install redis-server)`);
  process.exit(1);
}

// Node processes are killed if the benchmark dies half-way.
const children: ChildProcess[] = [];
process.on("exit", () => {
  for (const c of children) c.kill("SIGKILL");
});

interface BenchNode {
  id: string;
  url: string;
  client: ComputerClient;
  stop(): Promise<void>;
}

async function startNode(id: string, log: string): Promise<BenchNode> {
  const { child, ready } = await startNodeProcess(
    [join(here, "node.js"), "--id", id, "--log", log],
    /^(\{.*\})$/m,
  );
  children.push(child);
  const { url } = JSON.parse(ready) as { url: string };
  return {
    id,
    url,
    client: new ComputerClient({ url, token: "bench-token-0123456789" }),
    stop: () => stopProcess(child),
  };
}

/**
 * One retry for request-level socket errors: with hundreds of requests at once
 * a keep-alive connection the server is closing can be picked for a new
 * request (a client/server race, not a cluster property). Streams themselves
 * auto-resume in the client.
 */
async function retry<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if ((err as { code?: string } | undefined)?.code !== "ENETWORK") throw err;
    retries++;
    return await fn();
  }
}
let retries = 0;

async function drain(handle: RemoteExecHandle, onEvent?: (ev: ExecEvent) => void) {
  let bytes = 0;
  let events = 0;
  const reader = handle.events({ after: 0 }).getReader();
  for (;;) {
    const { value: ev, done } = await reader.read();
    if (done) break;
    if (ev.name === "exit") break;
    if (ev.name === "heartbeat") continue;
    events++;
    bytes += typeof ev.value === "string" ? Buffer.byteLength(ev.value) : ev.value.byteLength;
    onEvent?.(ev);
  }
  return { bytes, events };
}

/**
 * A chatty command: `lines` lines of ~90 bytes, one write(2) per line (the
 * shell's builtin echo), so the producers themselves cost little CPU and the
 * log/stream path is what is measured. The runtime reads whatever is in the
 * pipe, so how many events that becomes depends on how fast it keeps up.
 */
function chatty(lines: number): string {
  return `i=0; while [ $i -lt ${lines} ]; do echo "${"x".repeat(80)} $i"; i=$((i+1)); done`;
}

/** 300 chatty commands, each streamed (through `streamFrom(k)`) until exit. */
async function throughput(nodes: BenchNode[]) {
  const cmd = chatty(LINES);
  const t0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: COMMANDS }, async (_, k) => {
      const owner = nodes[k % nodes.length] as BenchNode;
      const reader = nodes[(k + 1) % nodes.length] as BenchNode;
      const run = await retry(() => owner.client.exec(cmd, { encoding: "b64" }));
      return drain(await retry(() => reader.client.get(run.id)));
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  const bytes = results.reduce((a, r) => a + r.bytes, 0);
  const events = results.reduce((a, r) => a + r.events, 0);
  return { secs, bytes, events, mbps: bytes / 1e6 / secs, evps: events / secs };
}

function nowNs(): bigint {
  return BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e3)) * 1000n;
}

async function latency(nodes: BenchNode[]) {
  // The command waits 1 s before its first sample so the client is attached
  // by then: samples written before the attach would measure replay, not
  // live delivery, and are discarded anyway (timestamp before the attach).
  const cmd = `sleep 1; i=0; while [ $i -lt ${LAT_SAMPLES} ]; do date +%s%N; sleep 0.02; i=$((i+1)); done`;
  const samples: number[] = [];
  const dec = new TextDecoder();
  await Promise.all(
    Array.from({ length: LAT_CMDS }, async (_, k) => {
      const owner = nodes[k % nodes.length] as BenchNode;
      const reader = nodes[(k + 1) % nodes.length] as BenchNode;
      const run = await retry(() => owner.client.exec(cmd));
      const handle = await retry(() => reader.client.get(run.id));
      const attached = nowNs();
      await drain(handle, (ev) => {
        const t = nowNs();
        // b64 (the default): output arrives as bytes.
        for (const l of dec.decode(ev.value as Uint8Array).split("\n")) {
          if (l && BigInt(l) > attached) samples.push(Number(t - BigInt(l)) / 1e6);
        }
      });
    }),
  );
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

interface MemoryRow {
  payloadMiB: number;
  events: number;
  redisMiB: number;
  perByte: number;
  perEvent: number;
}

/**
 * Redis memory per MiB retained, for three event sizes, measured by appending
 * straight through the Redis event log (deterministic event sizes; the runtime
 * would coalesce small writes differently on every machine).
 */
async function redisMemory(redisUrl: string, redis: Redis) {
  const used = async () => {
    const info = await redis.info("memory");
    return Number(/used_memory:(\d+)/.exec(info)?.[1]);
  };
  const MiB = 1024 * 1024;
  const out: Record<string, MemoryRow> = {};
  for (const [name, size] of [
    ["64 KiB events", 64 * 1024],
    ["4 KiB events", 4096],
    ["90 B events", 90],
  ] as const) {
    const log = await openEventLog(`${redisUrl}?prefix=mem${size}:`, { logMaxBytes: 1 << 30 });
    const total = 32 * MiB;
    const perExec = 4 * MiB;
    const chunk = new Uint8Array(size).fill(120);
    const before = await used();
    let events = 0;
    for (let e = 0; e < total / perExec; e++) {
      const id = `mem-${size}-${e}`;
      await log.create({
        id,
        command: "x",
        cwd: "",
        encoding: "b64",
        node: "bench",
        startedAt: Date.now(),
      });
      let seq = 0;
      const n = Math.floor(perExec / size);
      for (let i = 0; i < n; i += 256) {
        const batch: LoggedEvent[] = [];
        for (let k = i; k < Math.min(n, i + 256); k++)
          batch.push({ id, seq: ++seq, name: "stdout", value: chunk });
        await log.append(id, batch);
      }
      events += n;
    }
    const after = await used();
    const payload = events * size;
    out[name] = {
      payloadMiB: payload / MiB,
      events,
      redisMiB: (after - before) / MiB,
      perByte: (after - before) / payload,
      perEvent: (after - before - payload) / events,
    };
    await log.close();
  }
  return out;
}

const fmt = (x: number, d = 1) => x.toFixed(d);

console.log(
  `cluster bench: ${COMMANDS} concurrent commands x ${LINES} lines; latency ${LAT_CMDS} x ${LAT_SAMPLES} samples`,
);

// --- single node, memory log
const single = await startNode("single", "memory");
await throughput([single]); // warm-up (JIT, page cache)
const singleTp = await throughput([single]);
const singleLat = await latency([single]);
await single.stop();

// --- three nodes, one Redis
const redisServer = await startRedis();
const redis = new Redis(redisServer.url, { maxRetriesPerRequest: null });
const cluster: BenchNode[] = [];
for (const id of ["a", "b", "c"]) cluster.push(await startNode(id, redisServer.url));
await throughput(cluster);
const clusterTp = await throughput(cluster);
const clusterLat = await latency(cluster);
const mem = await redisMemory(redisServer.url, redis);
for (const n of cluster) await n.stop();
redis.disconnect();
await redisServer.close();

console.log("\n| setup | throughput MB/s | events/s | wall s | p50 ms | p99 ms |");
console.log("| --- | --- | --- | --- | --- | --- |");
console.log(
  `| 1 node, memory log | ${fmt(singleTp.mbps)} | ${fmt(singleTp.evps, 0)} | ${fmt(singleTp.secs, 2)} | ${fmt(singleLat.p50, 2)} | ${fmt(singleLat.p99, 2)} |`,
);
console.log(
  `| 3 nodes, one Redis (stream from another node) | ${fmt(clusterTp.mbps)} | ${fmt(clusterTp.evps, 0)} | ${fmt(clusterTp.secs, 2)} | ${fmt(clusterLat.p50, 2)} | ${fmt(clusterLat.p99, 2)} |`,
);
console.log(
  `\ncluster / single throughput: ${fmt(clusterTp.mbps / singleTp.mbps, 2)}x (target >= 0.5x); cross-node p99 ${fmt(clusterLat.p99, 2)} ms (target < 50 ms)`,
);
console.log(
  "\n| Redis memory | payload MiB | events | Redis MiB | Redis MiB per MiB retained | overhead bytes per event |",
);
console.log("| --- | --- | --- | --- | --- | --- |");
for (const [name, m] of Object.entries(mem)) {
  console.log(
    `| ${name} | ${fmt(m.payloadMiB)} | ${m.events} | ${fmt(m.redisMiB)} | ${fmt(m.perByte, 2)} | ${fmt(m.perEvent, 0)} |`,
  );
}
if (retries) console.log(`\n(${retries} request(s) retried after a socket error)`);
process.exit(0);
