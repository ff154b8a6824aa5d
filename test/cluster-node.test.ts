// Cluster building blocks against a real redis-server, without HTTP: control
// requests routed to the owning node and answered (ok, error code, timeout),
// per-execution ordering of stdin chunks, liveness expiry closing a dead
// node's executions as `lost` exactly once, and a restarted node id closing
// what its previous incarnation left running.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ClusterNode } from "../src/cluster/node.js";
import { RedisEventLog } from "../src/store/redis/log.js";
import { ComputerError } from "../src/wire/errors.js";
import { newExecRecord } from "./support/cluster.js";
import { type RedisServer, redisAvailable, startRedis } from "./support/redis-server.js";

const hasRedis = redisAvailable();
let n = 0;
const quiet = () => {};

describe.skipIf(!hasRedis)("cluster node (liveness + control)", () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await server?.close();
  });

  const start = (prefix: string, nodeId: string, extra: object = {}) =>
    ClusterNode.start({
      nodeId,
      redis: server.url,
      eventLogOptions: { prefix },
      ttlMs: 600,
      sweepMs: 200,
      controlTimeoutMs: 1500,
      logger: quiet,
      ...extra,
    });

  const newExec = newExecRecord;

  it("routes kill/write/end/dispose to the owner in order and returns its result", async () => {
    const prefix = `cn${n++}:`;
    const a = await start(prefix, "a");
    const b = await start(prefix, "b");
    try {
      const seen: string[] = [];
      a.serve({
        kill: async (id, signal) => {
          seen.push(`kill ${id.slice(0, 4)} ${signal}`);
        },
        write: async (_id, chunk) => {
          // Random handling delays must not reorder chunks of one execution.
          await new Promise((r) => setTimeout(r, Math.random() * 5));
          seen.push(`write ${new TextDecoder().decode(chunk)}`);
        },
        end: async () => {
          seen.push("end");
        },
        dispose: async (id) => {
          throw new ComputerError("ENOENT", `no such execution: ${id}`);
        },
      });
      const rec = await newExec(a.eventLog, "a");
      await b.remote.kill(rec, "SIGINT");
      await Promise.all(["1", "2", "3", "4", "5"].map((c) => b.remote.write(rec, c)));
      await b.remote.end(rec);
      expect(seen).toEqual([
        `kill ${rec.id.slice(0, 4)} SIGINT`,
        "write 1",
        "write 2",
        "write 3",
        "write 4",
        "write 5",
        "end",
      ]);
      const err = await b.remote.dispose(rec).catch((e) => e);
      expect(err.code).toBe("ENOENT");
    } finally {
      await b.close();
      await a.close();
    }
  });

  it("times out with ENETWORK when the owner is alive but does not answer", async () => {
    const prefix = `cn${n++}:`;
    const a = await start(prefix, "a");
    const b = await start(prefix, "b");
    try {
      a.serve({
        kill: () => new Promise(() => {}), // hangs
        write: async () => {},
        end: async () => {},
        dispose: async () => {},
      });
      const rec = await newExec(a.eventLog, "a");
      const err = await b.remote.kill(rec).catch((e) => e);
      expect(err.code).toBe("ENETWORK");
      expect(err.message).toMatch(/node a did not answer kill/);
    } finally {
      await b.close();
      await a.close();
    }
  });

  it("closes a dead node's running executions as lost exactly once, not its A@UI journal; kill of a dead node's exec is immediate", async () => {
    const prefix = `cn${n++}:`;
    const a = await start(prefix, "a");
    const b = await start(prefix, "b");
    const c = await start(prefix, "c");
    const reader = new RedisEventLog({ redis: server.url, prefix });
    try {
      const r1 = await newExec(a.eventLog, "a");
      const r2 = await newExec(a.eventLog, "a");
      await a.eventLog.append(r1.id, [{ id: r1.id, seq: 1, name: "stdout", value: "hi" }]);
      const finished = await newExec(a.eventLog, "a");
      await a.eventLog.append(finished.id, [{ id: finished.id, seq: 1, name: "exit", value: 0 }]);
      // Node a's A@UI journal: a restarted a restores it; nobody closes it.
      const journal = (await newExec(a.eventLog, "a", `~aui/a/dashboard-${n}`)).id;
      // "Kill" node a: stop refreshing without releasing its key (as a crash would).
      (a.liveness as unknown as { stopped: boolean }).stopped = true;
      const waiting = reader.waitFor(r1.id, 1);
      await waiting; // resolves when the sweeper of b or c writes the lost exit
      const evs = await reader.read(r1.id, 0);
      expect(evs.map((e) => [e.seq, e.name])).toEqual([
        [1, "stdout"],
        [2, "exit"],
      ]);
      expect(evs[1]).toMatchObject({ reason: "lost" });
      for (;;) {
        if ((await reader.get(r2.id))?.state === "lost") break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect((await reader.read(r2.id, 0)).map((e) => e.seq)).toEqual([1]);
      expect((await reader.get(finished.id))?.state).toBe("exited");
      expect((await reader.get(journal))?.state).toBe("running");
      // Sweeps keep running on b and c: still exactly one exit each.
      await new Promise((r) => setTimeout(r, 500));
      expect((await reader.read(r1.id, 0)).length).toBe(2);
      // A kill for an execution whose owner is not alive closes it at once.
      const ghost = await newExec(b.eventLog, "ghost");
      await b.remote.kill(ghost, "SIGTERM");
      expect((await reader.get(ghost.id))?.state).toBe("lost");
      const nodes = await b.nodes();
      expect(nodes.find((x) => x.id === "a")).toBeUndefined(); // forgotten once empty
      expect(nodes.filter((x) => x.alive).map((x) => x.id)).toEqual(["b", "c"]);
    } finally {
      await reader.close();
      await c.close();
      await b.close();
      await a.close();
    }
  });

  it("closes its own orphans (recorded as running here, not run by this process) after two sweeps, never the A@UI journal", async () => {
    const prefix = `cn${n++}:`;
    const a = await start(prefix, "a");
    try {
      const running = new Set<string>();
      a.serve({
        running: () => [...running],
        kill: async () => {},
        dispose: async () => {},
        get: async () => ({ write: async () => {}, end: async () => {} }),
      });
      const kept = await newExec(a.eventLog, "a");
      running.add(kept.id);
      // The A@UI relay's journal shares the log; no process runs it.
      const journal = (await newExec(a.eventLog, "a", `~aui/a/dashboard-${n}`)).id;
      const orphan = await newExec(a.eventLog, "a");
      for (;;) {
        if ((await a.eventLog.get(orphan.id))?.state === "lost") break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect((await a.eventLog.get(kept.id))?.state).toBe("running");
      // Closed as lost, the journal would refuse every later write.
      expect((await a.eventLog.get(journal))?.state).toBe("running");
      await a.eventLog.append(journal, [{ id: journal, seq: 1, name: "stdout", value: "{}" }]);
    } finally {
      await a.close();
    }
  });

  it("a Redis outage longer than the TTL does not make live nodes look dead (sweeps wait a TTL after reconnect)", async () => {
    const aof = await startRedis({ aof: true });
    const prefix = `cn${n++}:`;
    const common = { eventLogOptions: { prefix }, ttlMs: 1500, sweepMs: 200, logger: quiet };
    // Node a reconnects late (its first retry comes 2.5 s after the drop), so
    // b is back well before a has refreshed its (by then expired) key.
    const a = await ClusterNode.start({
      ...common,
      nodeId: "a",
      redis: {
        host: "127.0.0.1",
        port: aof.port,
        retryStrategy: (times: number) => (times === 1 ? 2500 : 50),
      },
    });
    const b = await ClusterNode.start({ ...common, nodeId: "b", redis: aof.url });
    try {
      const rec = await newExec(a.eventLog, "a");
      await new Promise((r) => setTimeout(r, 2000)); // past b's start-up grace
      await aof.stop();
      await new Promise((r) => setTimeout(r, 1700)); // every liveness key expires meanwhile
      await aof.start();
      // Several sweeps of b after its reconnect, and after a's.
      await new Promise((r) => setTimeout(r, 3000));
      expect((await b.eventLog.get(rec.id))?.state).toBe("running");
      expect((await b.nodes()).map((x) => [x.id, x.alive])).toEqual([
        ["a", true],
        ["b", true],
      ]);
    } finally {
      await b.close();
      await a.close();
      await aof.close();
    }
  });

  it("a node restarted under the same id closes what its predecessor left running", async () => {
    const prefix = `cn${n++}:`;
    const a1 = await start(prefix, "a");
    const rec = await newExec(a1.eventLog, "a");
    // Crash: drop connections without releasing the liveness key.
    (a1.liveness as unknown as { stopped: boolean }).stopped = true;
    a1.eventLog.redis.disconnect();
    const a2 = await start(prefix, "a"); // waits out the stale key (one TTL), then sweeps itself
    try {
      const r = await a2.eventLog.get(rec.id);
      expect(r?.state).toBe("lost");
    } finally {
      await a2.close();
      await a1.close().catch(() => {});
    }
  });
});
