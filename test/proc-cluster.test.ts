// Cluster side of "no process outlives its server" and of Redis faults, with
// real Redis servers and in-process cluster nodes:
// - the node that closes a dead node's executions as lost says on the record
//   that it could not kill their processes from there;
// - a node re-registers itself on every heartbeat, so after Redis lost its
//   data (restart without persistence) a node that dies is still swept.

import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ClusterNode } from "../src/cluster/node.js";
import type { RedisEventLog } from "../src/store/redis/log.js";
import { type RedisServer, redisAvailable, startRedis } from "./support/redis-server.js";

const hasRedis = redisAvailable();
const quiet = () => {};
let n = 0;

async function newExec(eventLog: RedisEventLog, node: string): Promise<string> {
  const id = randomUUID();
  await eventLog.create({
    id,
    command: "x",
    cwd: "",
    encoding: "b64",
    node,
    startedAt: Date.now(),
  });
  return id;
}

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
});
