// Cluster side of "no process outlives its server" and of Redis faults, with
// real Redis servers and in-process cluster nodes:
// - the node that closes a dead node's executions as lost says on the record
//   that it could not kill their processes from there;
// - a node re-registers itself on every heartbeat, so after Redis lost its
//   data (restart without persistence) a node that dies is still swept.

import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ClusterNode } from "../src/cluster/node.js";
import { startNode } from "../src/host/start-node.js";
import type { RedisEventLog } from "../src/store/redis/log.js";
import { newExecRecord } from "./support/cluster.js";
import { type RedisServer, redisAvailable, startRedis } from "./support/redis-server.js";

const hasRedis = redisAvailable();
const quiet = () => {};
let n = 0;

const newExec = async (eventLog: RedisEventLog, node: string) =>
  (await newExecRecord(eventLog, node)).id;

async function until<T>(f: () => Promise<T | undefined>, ms: number): Promise<T | undefined> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.skipIf(!hasRedis)("cluster: dead nodes' processes and a Redis that lost its data", () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await server?.close();
  });

  const start = (prefix: string, nodeId: string) =>
    ClusterNode.start({
      nodeId,
      redis: server.url,
      eventLogOptions: { prefix },
      ttlMs: 600,
      sweepMs: 200,
      logger: quiet,
    });

  it("the sweeping node records that it could not kill a dead node's processes", async () => {
    const prefix = `pc${n++}:`;
    const a = await start(prefix, "a");
    const b = await start(prefix, "b");
    try {
      const id = await newExec(a.eventLog, "a");
      // "Kill" node a: stop refreshing without releasing its key (as a crash would).
      (a.liveness as unknown as { stopped: boolean }).stopped = true;
      const rec = await until(async () => {
        const r = await b.eventLog.get(id);
        return r?.state === "lost" && r.lostNote ? r : undefined;
      }, 10_000);
      expect(rec?.lostNote).toMatch(
        /node b closed this execution but could not kill its processes/,
      );
    } finally {
      await b.close();
      await a.close();
    }
  }, 30_000);

  it("a node re-registers on every heartbeat: after Redis lost its data, a dead node is still swept", async () => {
    const own = await startRedis(); // restarted below: not shared with the other tests
    const prefix = `pc${n++}:`;
    const opts = (nodeId: string) => ({
      nodeId,
      redis: own.url,
      eventLogOptions: { prefix },
      ttlMs: 600,
      sweepMs: 200,
      logger: quiet,
    });
    const a = await ClusterNode.start(opts("a"));
    const b = await ClusterNode.start(opts("b"));
    try {
      await own.restart(); // no persistence: every key is gone
      await until(async () => (a.eventLog.redis.status === "ready" ? true : undefined), 10_000);
      const id = await newExec(a.eventLog, "a");
      (a.liveness as unknown as { stopped: boolean }).stopped = true;
      const rec = await until(async () => {
        const r = await b.eventLog.get(id);
        return r?.state === "lost" ? r : undefined;
      }, 15_000);
      expect(rec?.state).toBe("lost");
    } finally {
      await b.close();
      await a.close();
      await own.close();
    }
  }, 60_000);

  it("/healthz is 503 and exec calls fail fast with EUNAVAILABLE while Redis is down, then recover", async () => {
    const own = await startRedis();
    const token = "proc-cluster-health-token";
    const node = await startNode({
      workspace: mkdtempSync(path.join(tmpdir(), "ac-proc-health-")),
      port: 0,
      token,
      eventLog: `${own.url}?prefix=ph:`,
      nodeId: "health",
      logger: false,
    });
    const call = (method: string, p: string, body?: unknown) =>
      fetch(`${node.url}${p}`, {
        method,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        // The defect is a hang: give up long after any honest answer.
        signal: AbortSignal.timeout(20_000),
      });
    try {
      expect((await fetch(`${node.url}/healthz`)).status).toBe(200);
      expect((await call("POST", "/v1/execs", { command: "true" })).status).toBe(201);
      await own.stop();
      const health = await fetch(`${node.url}/healthz`);
      expect(health.status).toBe(503);
      expect(await health.json()).toMatchObject({
        ok: false,
        reason: expect.stringMatching(/redis/),
      });
      for (const [method, p, body] of [
        ["POST", "/v1/execs", { command: "echo hi" }],
        ["GET", "/v1/execs", undefined],
        ["GET", "/v1/execs/nope", undefined],
      ] as const) {
        const res = await call(method, p, body);
        expect(res.status).toBe(503);
        expect(await res.json()).toMatchObject({ error: { code: "EUNAVAILABLE" } });
      }
      await own.start();
      await until(
        async () => ((await fetch(`${node.url}/healthz`)).status === 200 ? true : undefined),
        15_000,
      );
      const res = await call("POST", "/v1/execs", { command: "echo back" });
      expect(res.status).toBe(201);
    } finally {
      await node.close();
      await own.close();
    }
  }, 60_000);
});
