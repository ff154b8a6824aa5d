// The EventLog contract as a vitest suite factory. Every log implementation
// (memory, SQLite, Redis Streams) runs it unchanged:
//
//   runEventLogContract("memory", (opts) => new MemoryEventLog(opts));
//
// It only talks to the log through the EventLog interface and never assumes
// the log lives in this process: ids are unique per test (a shared Redis may
// hold other data), expiry is polled rather than timed, and nothing relies on
// object identity between what was appended and what is read back.

import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import type { LoggedEvent, OutputEvent } from "../../wire/types.js";
import type { EventLog, NewExecRecord } from "../types.js";

export interface ContractLogOptions {
  logMaxBytes?: number;
  retentionMs?: number;
}

export type MakeLog = (options: ContractLogOptions) => EventLog | Promise<EventLog>;

const enc = new TextEncoder();

function out(id: string, seq: number, text: string, name: "stdout" | "stderr" = "stdout") {
  return { id, seq, name, value: enc.encode(text) } as OutputEvent<Uint8Array>;
}

function text(ev: LoggedEvent): string {
  if (ev.name === "exit") return `exit:${ev.value}`;
  return typeof ev.value === "string" ? ev.value : new TextDecoder().decode(ev.value);
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code ?? "NO_CODE";
  }
}

async function eventually(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error("condition not met in time");
}

export function runEventLogContract(name: string, makeLog: MakeLog): void {
  describe(`EventLog contract: ${name}`, () => {
    const logs: EventLog[] = [];
    const make = async (o: ContractLogOptions = {}) => {
      const log = await makeLog(o);
      logs.push(log);
      return log;
    };
    const newId = () => `c-${randomUUID()}`;
    const rec = (id: string, extra: Partial<NewExecRecord> = {}): NewExecRecord => ({
      id,
      command: "echo hi",
      cwd: "",
      encoding: "b64",
      node: "local",
      startedAt: Date.now(),
      ...extra,
    });

    afterEach(async () => {
      while (logs.length) await logs.pop()!.close();
    });

    it("creates a running record with an empty log", async () => {
      const log = await make();
      const id = newId();
      await log.create(rec(id, { command: ["ls", "-la"], pid: 42 }));
      const r = await log.get(id);
      expect(r).toMatchObject({
        id,
        command: ["ls", "-la"],
        state: "running",
        lastSeq: 0,
        earliestSeq: 1,
        pid: 42,
      });
      expect(await log.read(id, 0)).toEqual([]);
      expect(await log.get(newId())).toBeUndefined();
    });

    it("appends and reads back in seq order across stdout and stderr", async () => {
      const log = await make();
      const id = newId();
      await log.create(rec(id));
      await log.append(id, [out(id, 1, "a"), out(id, 2, "b", "stderr")]);
      await log.append(id, [{ id, seq: 3, name: "stdout", value: "text" }]);
      const evs = await log.read(id, 0);
      expect(evs.map((e) => [e.seq, e.name, text(e)])).toEqual([
        [1, "stdout", "a"],
        [2, "stderr", "b"],
        [3, "stdout", "text"],
      ]);
      expect(evs[0]!.value).toBeInstanceOf(Uint8Array);
      expect(typeof evs[2]!.value).toBe("string");
      expect((await log.read(id, 2)).map((e) => e.seq)).toEqual([3]);
      expect(await log.read(id, 3)).toEqual([]);
      expect((await log.read(id, 0, { limit: 2 })).map((e) => e.seq)).toEqual([1, 2]);
      expect((await log.get(id))!.lastSeq).toBe(3);
    });

    it("rejects gaps, repeats out of order and events after exit with EINVAL", async () => {
      const log = await make();
      const id = newId();
      await log.create(rec(id));
      expect(await codeOf(log.append(id, [out(id, 2, "x")]))).toBe("EINVAL");
      await log.append(id, [out(id, 1, "a")]);
      expect(await codeOf(log.append(id, [out(id, 3, "x")]))).toBe("EINVAL");
      await log.append(id, [{ id, seq: 2, name: "exit", value: 0, reason: "exited" }]);
      expect(await codeOf(log.append(id, [out(id, 3, "late")]))).toBe("EINVAL");
      expect((await log.read(id, 0)).length).toBe(2);
    });

    it("treats re-appending stored seqs as a no-op (seq is the idempotency key)", async () => {
      const log = await make();
      const id = newId();
      await log.create(rec(id));
      await log.append(id, [out(id, 1, "a"), out(id, 2, "b")]);
      await log.append(id, [out(id, 1, "a"), out(id, 2, "b")]);
      // A retried batch that overlaps the stored tail appends only what is new.
      await log.append(id, [out(id, 2, "b"), out(id, 3, "c")]);
      expect((await log.read(id, 0)).map(text)).toEqual(["a", "b", "c"]);
    });

    it("fails with ENOENT for unknown executions", async () => {
      const log = await make();
      const id = newId();
      expect(await codeOf(log.read(id, 0))).toBe("ENOENT");
      expect(await codeOf(log.append(id, [out(id, 1, "a")]))).toBe("ENOENT");
      expect(await codeOf(log.update(id, { pid: 1 }))).toBe("ENOENT");
      await log.dispose(id); // unknown: no-op
    });

    it("refuses to create a running id (EEXEC_BUSY) and replaces a finished one", async () => {
      const log = await make();
      const id = newId();
      await log.create(rec(id));
      expect(await codeOf(log.create(rec(id)))).toBe("EEXEC_BUSY");
      await log.append(id, [out(id, 1, "old"), { id, seq: 2, name: "exit", value: 0 }]);
      await log.create(rec(id, { command: "second" }));
      const r = await log.get(id);
      expect(r).toMatchObject({ state: "running", lastSeq: 0, command: "second" });
      expect(await log.read(id, 0)).toEqual([]);
    });

    it("finishes the record on exit with the state derived from the reason", async () => {
      const log = await make();
      const cases = [
        [undefined, "exited"],
        ["exited", "exited"],
        ["killed", "killed"],
        ["timeout", "timeout"],
        ["lost", "lost"],
      ] as const;
      for (const [reason, state] of cases) {
        const id = newId();
        await log.create(rec(id));
        const exit: LoggedEvent = { id, seq: 1, name: "exit", value: 143 };
        if (reason) Object.assign(exit, { reason, signal: "SIGTERM" });
        await log.append(id, [exit]);
        const r = await log.get(id);
        expect(r?.state).toBe(state);
        expect(r?.exitCode).toBe(143);
        expect(typeof r?.endedAt).toBe("number");
        if (reason) expect(r?.signal).toBe("SIGTERM");
        const [ev] = await log.read(id, 0);
        expect(ev).toMatchObject({ seq: 1, name: "exit", value: 143 });
        if (reason) expect(ev).toMatchObject({ reason, signal: "SIGTERM" });
      }
    });

    it("lists executions oldest first, and update changes mutable fields", async () => {
      const log = await make();
      const a = newId();
      const b = newId();
      await log.create(rec(a, { startedAt: 1000 }));
      await log.create(rec(b, { startedAt: 2000 }));
      const ids = (await log.list()).map((r) => r.id).filter((x) => x === a || x === b);
      expect(ids).toEqual([a, b]);
      await log.update(a, { pid: 777 });
      expect((await log.get(a))?.pid).toBe(777);
      // A record read out is a copy: changing it does not change the log.
      const r = (await log.get(a))!;
      r.pid = 1;
      expect((await log.get(a))?.pid).toBe(777);
    });

    it("dispose forgets an execution at once and wakes its waiters", async () => {
      const log = await make();
      const id = newId();
      await log.create(rec(id));
      await log.append(id, [out(id, 1, "a")]);
      const waiting = log.waitFor(id, 1);
      await log.dispose(id);
      await waiting;
      expect(await log.get(id)).toBeUndefined();
      expect(await codeOf(log.read(id, 0))).toBe("ENOENT");
    });

    it("waitFor resolves on new events, on exit, and at once when already satisfied", async () => {
      const log = await make();
      const id = newId();
      await log.create(rec(id));
      await log.append(id, [out(id, 1, "a")]);
      await log.waitFor(id, 0); // already there
      let woke = false;
      const w = log.waitFor(id, 1).then(() => {
        woke = true;
      });
      await new Promise((r) => setTimeout(r, 30));
      expect(woke).toBe(false);
      await log.append(id, [out(id, 2, "b")]);
      await w;
      const w2 = log.waitFor(id, 2);
      await log.append(id, [{ id, seq: 3, name: "exit", value: 0 }]);
      await w2;
      await log.waitFor(id, 3); // finished: never blocks
    });

    it("wakes many concurrent waiters with one append", async () => {
      const log = await make();
      const id = newId();
      await log.create(rec(id));
      const waits = Array.from({ length: 50 }, () => log.waitFor(id, 0));
      await log.append(id, [out(id, 1, "x")]);
      await Promise.all(waits);
      const reads = await Promise.all(waits.map(() => log.read(id, 0)));
      for (const r of reads) expect(r.map(text)).toEqual(["x"]);
    });

    it("waitFor rejects with EABORTED when its signal aborts", async () => {
      const log = await make();
      const id = newId();
      await log.create(rec(id));
      const ac = new AbortController();
      const w = log.waitFor(id, 0, ac.signal);
      setTimeout(() => ac.abort(), 20);
      expect(await codeOf(w)).toBe("EABORTED");
      const pre = new AbortController();
      pre.abort();
      expect(await codeOf(log.waitFor(id, 0, pre.signal))).toBe("EABORTED");
      // The log still works for others after an aborted wait.
      await log.append(id, [out(id, 1, "x")]);
      expect((await log.read(id, 0)).length).toBe(1);
    });

    it("drops the oldest events past logMaxBytes and reports ELOG_TRUNCATED with earliestSeq", async () => {
      const cap = 64 * 1024;
      const log = await make({ logMaxBytes: cap });
      const id = newId();
      await log.create(rec(id));
      const chunk = "x".repeat(1000);
      const n = 400; // ~400 KB of events: far past the cap
      for (let s = 1; s <= n; s += 20) {
        const batch: LoggedEvent[] = [];
        for (let k = s; k < s + 20 && k <= n; k++) batch.push(out(id, k, chunk));
        await log.append(id, batch);
      }
      await log.append(id, [{ id, seq: n + 1, name: "exit", value: 0 }]);
      const r = (await log.get(id))!;
      expect(r.lastSeq).toBe(n + 1);
      expect(r.earliestSeq).toBeGreaterThan(1);
      expect(r.earliestSeq).toBeLessThanOrEqual(n + 1);
      const err = await log.read(id, 0).catch((e) => e);
      expect(err.code).toBe("ELOG_TRUNCATED");
      expect(err.earliestSeq).toBe(r.earliestSeq);
      // Reading from just before the earliest retained seq works and is gap-free to exit.
      const seqs: number[] = [];
      let after = r.earliestSeq - 1;
      for (;;) {
        const evs = await log.read(id, after);
        if (evs.length === 0) break;
        for (const e of evs) seqs.push(e.seq);
        after = evs[evs.length - 1]!.seq;
      }
      expect(seqs[0]).toBe(r.earliestSeq);
      expect(seqs[seqs.length - 1]).toBe(n + 1);
      expect(seqs.length).toBe(n + 2 - r.earliestSeq);
      // What is retained respects the cap (payload bytes, one event of slack).
      expect((seqs.length - 1) * chunk.length).toBeLessThanOrEqual(cap + chunk.length);
    });

    it("sweeps finished executions after retentionMs, never running ones", async () => {
      const log = await make({ retentionMs: 150 });
      const done = newId();
      const running = newId();
      await log.create(rec(done));
      await log.create(rec(running));
      await log.append(done, [out(done, 1, "a"), { id: done, seq: 2, name: "exit", value: 0 }]);
      await log.append(running, [out(running, 1, "a")]);
      expect(await log.get(done)).toBeDefined();
      await eventually(async () => (await log.get(done)) === undefined);
      expect(await codeOf(log.read(done, 0))).toBe("ENOENT");
      expect((await log.get(running))?.state).toBe("running");
    });

    it("finishes a running execution as lost with an exit reason lost and wakes its waiters", async () => {
      const log = await make();
      const id = newId();
      await log.create(rec(id));
      const w = log.waitFor(id, 0);
      await log.append(id, [{ id, seq: 1, name: "exit", value: -1, reason: "lost" }]);
      await w;
      expect((await log.get(id))?.state).toBe("lost");
    });

    it("rejects use after close with ECLOSED", async () => {
      const log = await makeLog({});
      await log.close();
      expect(await codeOf(log.get(newId()))).toBe("ECLOSED");
      await log.close(); // idempotent
    });
  });
}
