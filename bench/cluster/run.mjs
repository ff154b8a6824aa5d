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
// Nodes run as separate processes (bench/cluster/node.mjs). Redis runs without
// persistence here (AOF costs are discussed in docs/operations.md).

import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { ComputerClient } from "../../dist/client/client.js";
import { RedisEventLog } from "../../dist/store/redis/log.js";

const here = fileURLToPath(new URL(".", import.meta.url));
const REDIS_BIN = process.env.REDIS_SERVER_BIN ?? "/usr/bin/redis-server";
const COMMANDS = Number(process.env.BENCH_COMMANDS ?? 300);
const LINES = Number(process.env.BENCH_LINES ?? 2000);
const LAT_CMDS = 10;
const LAT_SAMPLES = 100;

if (!existsSync(REDIS_BIN)) {
  console.error(`bench:cluster needs ${REDIS_BIN} (apt-get install redis-server)`);
  process.exit(1);
}

const children = [];
process.on("exit", () => {
  for (const c of children) c.kill("SIGKILL");
});

async function freePort() {
  return await new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function startRedis() {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "ac-bench-redis-"));
  const child = spawn(
    REDIS_BIN,
    [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--dir",
      dir,
      "--save",
      "",
      "--appendonly",
      "no",
    ],
    { stdio: "ignore" },
  );
  children.push(child);
  const r = new Redis(port, "127.0.0.1", { lazyConnect: true, maxRetriesPerRequest: null });
  r.on("error", () => {}); // connection attempts before redis listens
  for (let i = 0; ; i++) {
    try {
      await r.connect();
      await r.ping();
      break;
    } catch {
      if (i > 100) throw new Error("redis did not start");
      await new Promise((res) => setTimeout(res, 50));
    }
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    redis: r,
    async stop() {
      r.disconnect();
      child.kill("SIGTERM");
      await new Promise((res) => child.once("exit", res));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function startNode(id, log) {
  const child = spawn(process.execPath, [join(here, "node.mjs"), "--id", id, "--log", log], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(child);
  const rl = createInterface({ input: child.stdout });
  const line = await new Promise((resolve, reject) => {
    rl.once("line", resolve);
    child.once("exit", (code) => reject(new Error(`node ${id} exited (${code})`)));
  });
  rl.close();
  const { url } = JSON.parse(line);
  return {
    id,
    url,
    client: new ComputerClient({ url, token: "bench" }),
    async stop() {
      child.kill("SIGTERM");
      await new Promise((res) => child.once("exit", res));
    },
  };
}

/**
 * One retry for request-level socket errors: with hundreds of requests at once
 * a keep-alive connection the server is closing can be picked for a new
 * request (a client/server race, not a cluster property). Streams themselves
 * auto-resume in the client.
 */
async function retry(fn) {
  try {
    return await fn();
  } catch (err) {
    if (err?.code !== "ENETWORK") throw err;
    retries++;
    return await fn();
  }
}
let retries = 0;

async function drain(handle, onEvent) {
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
function chatty(lines) {
  return `i=0; while [ $i -lt ${lines} ]; do echo "${"x".repeat(80)} $i"; i=$((i+1)); done`;
}

/** 300 chatty commands, each streamed (through `streamFrom(k)`) until exit. */
async function throughput(nodes) {
  const cmd = chatty(LINES);
  const t0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: COMMANDS }, async (_, k) => {
      const owner = nodes[k % nodes.length];
      const reader = nodes[(k + 1) % nodes.length];
      const run = await retry(() => owner.client.exec(cmd, { encoding: "b64" }));
      return drain(await retry(() => reader.client.get(run.id)));
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  const bytes = results.reduce((a, r) => a + r.bytes, 0);
  const events = results.reduce((a, r) => a + r.events, 0);
  return { secs, bytes, events, mbps: bytes / 1e6 / secs, evps: events / secs };
}

function nowNs() {
  return BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e3)) * 1000n;
}

async function latency(nodes) {
  // The command waits 1 s before its first sample so the client is attached
  // by then: samples written before the attach would measure replay, not
  // live delivery, and are discarded anyway (timestamp before the attach).
  const cmd = `sleep 1; i=0; while [ $i -lt ${LAT_SAMPLES} ]; do date +%s%N; sleep 0.02; i=$((i+1)); done`;
  const samples = [];
  const dec = new TextDecoder();
  await Promise.all(
    Array.from({ length: LAT_CMDS }, async (_, k) => {
      const owner = nodes[k % nodes.length];
      const reader = nodes[(k + 1) % nodes.length];
      const run = await retry(() => owner.client.exec(cmd));
      const handle = await retry(() => reader.client.get(run.id));
      const attached = nowNs();
      await drain(handle, (ev) => {
        const t = nowNs();
        for (const l of dec.decode(ev.value).split("\n")) {
          if (l && BigInt(l) > attached) samples.push(Number(t - BigInt(l)) / 1e6);
        }
      });
    }),
  );
  samples.sort((a, b) => a - b);
  const q = (p) => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))];
  return { n: samples.length, p50: q(0.5), p99: q(0.99), max: samples.at(-1) };
}

/**
 * Redis memory per MiB retained, for three event sizes, measured by appending
 * straight through RedisEventLog (deterministic event sizes; the runtime would
 * coalesce small writes differently on every machine).
 */
async function redisMemory(redisUrl, redis) {
  const used = async () => {
    const info = await redis.info("memory");
    return Number(/used_memory:(\d+)/.exec(info)[1]);
  };
  const MiB = 1024 * 1024;
  const out = {};
  for (const [name, size] of [
    ["64 KiB events", 64 * 1024],
    ["4 KiB events", 4096],
    ["90 B events", 90],
  ]) {
    const log = new RedisEventLog({ redis: redisUrl, prefix: `mem${size}:`, logMaxBytes: 1 << 30 });
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
        const batch = [];
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

const fmt = (x, d = 1) => x.toFixed(d);

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
const redis = await startRedis();
const cluster = [];
for (const id of ["a", "b", "c"]) cluster.push(await startNode(id, redis.url));
await throughput(cluster);
const clusterTp = await throughput(cluster);
const clusterLat = await latency(cluster);
const mem = await redisMemory(redis.url, redis.redis);
for (const n of cluster) await n.stop();
await redis.stop();

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
