// The spawn queue on its own: spawns run in admission order, a slice per turn
// of the event loop with other work in between, a failed spawn fails only its
// own caller, and the bound on executions starting yields ELIMIT (429).
import { describe, expect, it } from "vitest";
import { ComputerError, ERROR_STATUS } from "../wire/errors.js";
import { SpawnQueue } from "./spawn-queue.js";

/** Records "tick" on every turn of the loop until stopped. */
function ticker(log: string[]): () => void {
  let on = true;
  const tick = () => {
    if (!on) return;
    log.push("tick");
    setImmediate(tick);
  };
  setImmediate(tick);
  return () => {
    on = false;
  };
}

describe("SpawnQueue", () => {
  it("runs one spawn per turn with sliceMs 0, in order, with other work between them", async () => {
    const queue = new SpawnQueue({ sliceMs: 0 });
    const log: string[] = [];
    const stop = ticker(log);
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        queue.admit().spawn(() => {
          log.push(`spawn${i}`);
          return i;
        }),
      ),
    );
    stop();
    expect(results).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    const spawns = log.filter((e) => e !== "tick");
    expect(spawns).toEqual(results.map((i) => `spawn${i}`));
    // Never two spawns in a row: the loop turned (and served the ticker) in between.
    for (let i = 1; i < log.length; i++) {
      if (log[i]!.startsWith("spawn")) expect(log[i - 1]).toBe("tick");
    }
    expect(queue.starting).toBe(0);
  });

  it("runs spawns in one turn while they fit in the slice", async () => {
    const queue = new SpawnQueue({ sliceMs: 10_000 });
    const log: string[] = [];
    const stop = ticker(log);
    await Promise.all(
      Array.from({ length: 5 }, (_, i) => queue.admit().spawn(() => log.push(`spawn${i}`))),
    );
    stop();
    const first = log.indexOf("spawn0");
    expect(log.slice(first, first + 5)).toEqual(["spawn0", "spawn1", "spawn2", "spawn3", "spawn4"]);
  });

  it("a spawn that throws rejects its own caller only", async () => {
    const queue = new SpawnQueue({ sliceMs: 0 });
    const results = await Promise.allSettled([
      queue.admit().spawn(() => 1),
      queue.admit().spawn(() => {
        throw new Error("E2BIG");
      }),
      queue.admit().spawn(() => 3),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(queue.starting).toBe(0);
  });

  it("refuses admission past maxStarting with ELIMIT (429) until a place is released", async () => {
    const queue = new SpawnQueue({ maxStarting: 2 });
    const a = queue.admit();
    const b = queue.admit();
    let err: unknown;
    try {
      queue.admit();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ComputerError);
    expect((err as ComputerError).code).toBe("ELIMIT");
    expect(ERROR_STATUS[(err as ComputerError).code]).toBe(429);
    expect((err as Error).message).toMatch(/maxStarting 2/);
    a.release();
    a.release(); // idempotent: frees one place only
    const c = queue.admit();
    expect(() => queue.admit()).toThrow(/maxStarting/);
    await b.spawn(() => undefined); // a spawn frees its place
    queue.admit().release();
    c.release();
    expect(queue.starting).toBe(0);
  });

  it("rejects bad options with EINVAL", () => {
    expect(() => new SpawnQueue({ sliceMs: -1 })).toThrow(/spawnSliceMs/);
    expect(() => new SpawnQueue({ maxStarting: 0 })).toThrow(/maxStarting/);
  });
});
