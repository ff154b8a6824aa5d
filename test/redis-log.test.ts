// RedisEventLog against a real redis-server: the shared EventLog contract,
// unchanged, plus what only a shared, remote log has to get right: two
// instances (two nodes) seeing each other's writes and wake-ups, retried
// appends after a lost reply, closing a dead node's executions exactly once,
// and surviving a Redis restart with AOF without duplicates or gaps.

import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisEventLog } from "../src/store/redis/log.js";
import { runEventLogContract } from "../src/store/test-support/event-log-contract.js";
import type { NewExecRecord } from "../src/store/types.js";
import type { LoggedEvent, OutputEvent } from "../src/wire/types.js";
import { type RedisServer, redisAvailable, startRedis } from "./support/redis-server.js";

const hasRedis = redisAvailable();
let prefixN = 0;
const newPrefix = () => `t${process.pid}-${prefixN++}:`;

function rec(id: string, node = "a"): NewExecRecord {
  return { id, command: "x", cwd: "", encoding: "b64", node, startedAt: Date.now() };
}
function out(id: string, seq: number, bytes: Uint8Array): OutputEvent<Uint8Array> {
  return { id, seq, name: "stdout", value: bytes };
}

describe.skipIf(!hasRedis)("RedisEventLog", () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis({ aof: true });
  });
  afterAll(async () => {
    await server?.close();
  });

  runEventLogContract("redis", (o) => new RedisEventLog({ ...o, redis: server.url, prefix: "c:" }));

  it("two instances share one log: reads, waits and listing cross nodes", async () => {
    const prefix = newPrefix();
    const a = new RedisEventLog({ redis: server.url, prefix });
    const b = new RedisEventLog({ redis: server.url, prefix });
    try {
      const id = randomUUID();
      await a.create(rec(id));
      const waiting = b.waitFor(id, 0);
      await a.append(id, [out(id, 1, new Uint8Array([0, 255, 10]))]);
      await waiting;
      const [ev] = await b.read(id, 0);
      expect(ev).toMatchObject({ id, seq: 1, name: "stdout" });
      expect([...(ev!.value as Uint8Array)]).toEqual([0, 255, 10]);
      expect((await b.list()).map((r) => r.id)).toEqual([id]);
      const w2 = b.waitFor(id, 1);
      await a.append(id, [{ id, seq: 2, name: "exit", value: 0, reason: "exited" }]);
      await w2;
      expect((await b.get(id))?.state).toBe("exited");
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("a follower on another instance (read, then waitFor) never misses a wake-up", async () => {
    const prefix = newPrefix();
    const w = new RedisEventLog({ redis: server.url, prefix });
    const r = new RedisEventLog({ redis: server.url, prefix, waitPollMs: 60_000 });
    try {
      const id = randomUUID();
      await w.create(rec(id));
      const N = 300;
      const seen: number[] = [];
      const follow = (async () => {
        let after = 0;
        for (;;) {
          const evs = await r.read(id, after);
          for (const e of evs) seen.push(e.seq);
          if (evs.length) after = evs.at(-1)!.seq;
          if (evs.at(-1)?.name === "exit") return;
          // The poll is 60 s: a missed notification would hang this test.
          if (!evs.length) await r.waitFor(id, after);
        }
      })();
      for (let s = 1; s <= N; s++) {
        await w.append(id, [out(id, s, new Uint8Array([s & 255]))]);
        if (Math.random() < 0.3) await new Promise((res) => setTimeout(res, Math.random() * 3));
      }
      await w.append(id, [{ id, seq: N + 1, name: "exit", value: 0 }]);
      await follow;
      expect(seen).toEqual(Array.from({ length: N + 1 }, (_, i) => i + 1));
      // Finished: an empty read followed by waitFor returns at once.
      expect(await r.read(id, N + 1)).toEqual([]);
      await r.waitFor(id, N + 1);
    } finally {
      await w.close();
      await r.close();
    }
  });

  it("coalesces un-awaited appends in order and keeps every byte", async () => {
    const eventLog = new RedisEventLog({ redis: server.url, prefix: newPrefix() });
    try {
      const id = randomUUID();
      await eventLog.create(rec(id));
      const all: Promise<void>[] = [];
      for (let s = 1; s <= 2000; s++) {
        all.push(eventLog.append(id, [out(id, s, new Uint8Array([s & 255]))]));
      }
      await Promise.all(all);
      const seqs: number[] = [];
      let after = 0;
      for (;;) {
        const evs = await eventLog.read(id, after);
        if (evs.length === 0) break;
        for (const e of evs) {
          seqs.push(e.seq);
          expect((e.value as Uint8Array)[0]).toBe(e.seq & 255);
        }
        after = evs.at(-1)!.seq;
      }
      expect(seqs).toEqual(Array.from({ length: 2000 }, (_, i) => i + 1));
    } finally {
      await eventLog.close();
    }
  });

  it("closeLost writes exactly one lost exit when many nodes race, and the owner cannot write after it", async () => {
    const prefix = newPrefix();
    const eventLogs = Array.from(
      { length: 3 },
      () => new RedisEventLog({ redis: server.url, prefix }),
    );
    try {
      const id = randomUUID();
      await eventLogs[0]!.create(rec(id, "dead"));
      await eventLogs[0]!.append(id, [out(id, 1, new Uint8Array([1]))]);
      expect(await eventLogs[1]!.runningOn("dead")).toEqual([id]);
      const seqs = await Promise.all(eventLogs.map((l) => l.closeLost(id, "dead")));
      expect(seqs.filter((s) => s > 0)).toEqual([2]);
      const evs = await eventLogs[2]!.read(id, 0);
      expect(evs.map((e) => [e.seq, e.name])).toEqual([
        [1, "stdout"],
        [2, "exit"],
      ]);
      expect(evs[1]).toMatchObject({ reason: "lost", value: -1 });
      expect((await eventLogs[2]!.get(id))?.state).toBe("lost");
      expect(await eventLogs[0]!.runningOn("dead")).toEqual([]);
      const late = await eventLogs[0]!
        .append(id, [out(id, 2, new Uint8Array([2]))])
        .catch((e) => e);
      expect(late.code).toBe("EINVAL");
    } finally {
      for (const l of eventLogs) await l.close();
    }
  });

  it("a re-sent create (reply lost) is not EEXEC_BUSY, another creator is", async () => {
    const eventLog = new RedisEventLog({ redis: server.url, prefix: newPrefix() });
    try {
      const id = randomUUID();
      await eventLog.create(rec(id));
      const err = await eventLog.create(rec(id)).catch((e) => e);
      expect(err.code).toBe("EEXEC_BUSY");
    } finally {
      await eventLog.close();
    }
  });

  it("survives a Redis restart mid-stream with AOF: appends wait, then continue without duplicates or gaps", async () => {
    const prefix = newPrefix();
    const writer = new RedisEventLog({ redis: server.url, prefix });
    const reader = new RedisEventLog({ redis: server.url, prefix });
    try {
      const id = randomUUID();
      await writer.create(rec(id));
      const N = 400;
      const got: LoggedEvent[] = [];
      // A follower: read, wait, read ... across the outage.
      const follow = (async () => {
        let after = 0;
        for (;;) {
          let evs: LoggedEvent[];
          try {
            evs = await reader.read(id, after);
          } catch (err) {
            throw new Error(`reader failed: ${(err as Error).message}`);
          }
          for (const e of evs) got.push(e);
          if (evs.length) after = evs.at(-1)!.seq;
          if (evs.at(-1)?.name === "exit") return;
          if (!evs.length) await reader.waitFor(id, after);
        }
      })();
      let restarted: Promise<void> | undefined;
      for (let s = 1; s <= N; s++) {
        if (s === N / 2) restarted = server.restart();
        await writer.append(id, [out(id, s, new Uint8Array([s & 255, (s >> 8) & 255]))]);
        if (s % 50 === 0) await new Promise((r) => setTimeout(r, 5));
      }
      await writer.append(id, [{ id, seq: N + 1, name: "exit", value: 0 }]);
      await restarted;
      await follow;
      expect(got.map((e) => e.seq)).toEqual(Array.from({ length: N + 1 }, (_, i) => i + 1));
      for (const e of got.slice(0, N)) {
        const v = e.value as Uint8Array;
        expect(v[0]! | (v[1]! << 8)).toBe(e.seq);
      }
    } finally {
      await writer.close();
      await reader.close();
    }
  });

  it("update to a finished state wakes waiters on other nodes and starts retention", async () => {
    const prefix = newPrefix();
    const a = new RedisEventLog({ redis: server.url, prefix, retentionMs: 60_000 });
    const b = new RedisEventLog({ redis: server.url, prefix });
    try {
      const id = randomUUID();
      await a.create(rec(id));
      const w = b.waitFor(id, 0);
      await a.update(id, { state: "lost" });
      await w;
      const r = await b.get(id);
      expect(r?.state).toBe("lost");
      expect(typeof r?.endedAt).toBe("number");
      expect(await a.redis.pttl(a.keys.meta(id))).toBeGreaterThan(0);
      expect(await a.runningOn("a")).toEqual([]);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
