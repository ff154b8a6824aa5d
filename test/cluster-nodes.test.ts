// Cluster mode end to end: three server nodes (ClusterNode + Computer + HTTP
// server, in this process) sharing one real redis-server. Clients talk HTTP to
// whichever node; every byte must arrive exactly once, in order, whichever
// node serves it and however often the connection breaks, and control
// requests sent to any node must reach the process on its owner.

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ComputerClient } from "../src/client/client.js";
import {
  collect,
  startNode,
  startSwitchingProxy,
  type TestNode,
  TOKEN,
} from "./support/cluster.js";
import { type RedisServer, redisAvailable, startRedis } from "./support/redis-server.js";

const hasRedis = redisAvailable();

function expectContiguous(seqs: number[], from = 1): void {
  expect(seqs.length).toBeGreaterThan(0);
  for (let i = 0; i < seqs.length; i++) {
    if (seqs[i] !== from + i) {
      throw new Error(`seq gap/duplicate at index ${i}: got ${seqs[i]}, want ${from + i}`);
    }
  }
}

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

describe.skipIf(!hasRedis)("cluster: three nodes on one Redis", () => {
  let redis: RedisServer;
  let nodes: TestNode[] = [];
  let a: TestNode;
  let b: TestNode;
  let c: TestNode;

  beforeAll(async () => {
    redis = await startRedis({ aof: true });
    const prefix = `e2e${process.pid}:`;
    // A ring big enough for the 50 MiB test: a reader on another node does not
    // hold the producer back (only subscribers on the owning node do), so the
    // ring must cover how far a remote reader may fall behind.
    nodes = [];
    for (const id of ["a", "b", "c"]) {
      nodes.push(await startNode(redis.url, prefix, id, { logMaxBytes: 96 * 1024 * 1024 }));
    }
    [a, b, c] = nodes as [TestNode, TestNode, TestNode];
  });
  afterAll(async () => {
    for (const n of [...nodes].reverse()) await n.close().catch(() => {});
    await redis?.close();
  });

  it("start on A, stream from B, resume mid-stream on C, kill via B: byte-exact and gap-free", async () => {
    const lines = 150_000;
    const expected = execFileSync("seq", ["-f", "line %06g", "1", String(lines)], {
      maxBuffer: 64 << 20,
    });
    const run = await a.client.exec(`seq -f 'line %06g' 1 ${lines}; exec sleep 600`);
    // B: stream the first third, then drop the connection.
    const fromB = await collect((await b.client.get(run.id)).events({ after: 0 }), {
      stopAfterBytes: Math.floor(expected.length / 3),
    });
    expectContiguous(fromB.seqs);
    const lastB = fromB.seqs.at(-1)!;
    expect(fromB.bytes.length).toBeLessThan(expected.length);
    // Any node lists it, with its owner.
    expect((await c.client.list()).find((r) => r.id === run.id)).toMatchObject({
      node: "a",
      state: "running",
    });
    // C: resume after the last seq B delivered; once all output is in, kill via B.
    let kill: Promise<void> | undefined;
    const fromC = await collect((await c.client.get(run.id)).events({ after: lastB }), {
      onEvent: (_ev, total) => {
        if (!kill && fromB.bytes.length + total === expected.length) {
          kill = b.client.kill(run.id, "SIGTERM");
        }
      },
    });
    await kill;
    expect(kill).toBeDefined();
    expect(fromC.exit).toMatchObject({ reason: "killed" });
    expectContiguous([...fromB.seqs, ...fromC.seqs]);
    expect(sha(Buffer.concat([fromB.bytes, fromC.bytes]))).toBe(sha(expected));
    expect(await (await c.client.get(run.id)).info()).toMatchObject({ state: "killed", node: "a" });
  });

  it("any node lists the cluster's nodes with their advertised URLs (for pinning)", async () => {
    const res = await b.client.request("GET", "/v1/cluster/nodes");
    const body = (await res.json()) as {
      self: string;
      nodes: { id: string; alive: boolean; info?: { url?: string } }[];
    };
    expect(body.self).toBe("b");
    expect(body.nodes.map((x) => [x.id, x.alive, x.info?.url])).toEqual([
      ["a", true, a.url],
      ["b", true, b.url],
      ["c", true, c.url],
    ]);
  });

  it("stdin written via C and closed via B reaches the process on A, in order", async () => {
    const run = await a.client.exec("cat", { stdin: "pipe" });
    const viaC = await c.client.get(run.id);
    const chunks = Array.from({ length: 20 }, (_, i) => `chunk-${i};`);
    for (const ch of chunks) await viaC.write(ch);
    await (await b.client.get(run.id)).end();
    const res = await (await b.client.get(run.id)).result();
    expect(res.status).toBe("exited");
    expect(new TextDecoder().decode(res.stdout as Uint8Array)).toBe(chunks.join(""));
  });

  it("dispose via C removes an execution running on A (process gone, log gone)", async () => {
    const run = await a.client.exec("exec sleep 600");
    await c.client.dispose(run.id);
    const err = await b.client.get(run.id).catch((e) => e);
    expect(err.code).toBe("ENOENT");
    expect(a.computer.running()).not.toContain(run.id);
  });

  it("a client reconnecting to a different node on every break during a 50 MiB stream: byte-exact, no duplicates", async () => {
    const n = 6_800_000; // `seq 1 n` is ~50.8 MiB
    const expected = execFileSync("seq", ["1", String(n)], { maxBuffer: 64 << 20 });
    expect(expected.length).toBeGreaterThan(50 * 1024 * 1024);
    const run = await a.client.exec(`seq 1 ${n}`);
    const proxy = await startSwitchingProxy(
      nodes.map((x) => x.url),
      () => (2 + Math.random() * 4) * 1024 * 1024,
    );
    try {
      const client = new ComputerClient({
        url: proxy.url,
        token: TOKEN,
        resume: { maxRetries: 30, initialDelayMs: 5, maxDelayMs: 100 },
      });
      const got = await collect((await client.get(run.id)).events({ after: 0 }));
      expect(got.exit).toMatchObject({ value: 0 });
      expectContiguous(got.seqs);
      expect(got.bytes.length).toBe(expected.length);
      expect(sha(got.bytes)).toBe(sha(expected));
      // Breaks happened, and successive connections went to different nodes.
      expect(proxy.routed.length).toBeGreaterThanOrEqual(6);
      expect(new Set(proxy.routed)).toEqual(new Set([0, 1, 2]));
    } finally {
      await proxy.close();
      await b.client.dispose(run.id).catch(() => {});
    }
  });

  it("Redis restarted mid-stream (AOF on): the stream from another node resumes with no duplicates and no gaps", async () => {
    const cmd =
      "i=0; while [ $i -lt 30 ]; do seq $((i*5000+1)) $((i*5000+5000)); sleep 0.04; i=$((i+1)); done";
    const expected = execFileSync("sh", ["-c", cmd.replaceAll("sleep 0.04", "true")], {
      maxBuffer: 64 << 20,
    });
    const run = await a.client.exec(cmd);
    let restart: Promise<void> | undefined;
    const got = await collect((await b.client.get(run.id)).events({ after: 0 }), {
      onEvent: (_ev, total) => {
        if (!restart && total > expected.length / 3) restart = redis.restart();
      },
    });
    await restart;
    expect(restart).toBeDefined();
    expect(got.exit).toMatchObject({ value: 0, reason: "exited" });
    expectContiguous(got.seqs);
    expect(sha(got.bytes)).toBe(sha(expected));
  });
});
