// Backpressure against a reference model: the pipes pause only when a reader
// is really more than half the capacity behind, resume only once every reader
// is within a quarter, a reader that holds the pipes without pulling is cut
// with ELAGGING, and an unbounded log tracks nothing.
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ComputerError } from "../wire/errors.js";
import { Backpressure, type Reader } from "./backpressure.js";

function reader(after = 0): Reader & { cuts: ComputerError[] } {
  const cuts: ComputerError[] = [];
  return {
    after,
    lastPull: Date.now(),
    cuts,
    cut(err) {
      cuts.push(err);
    },
  };
}

type Op =
  | { kind: "produce"; size: number }
  | { kind: "advance"; reader: number; to: number }
  | { kind: "add"; reader: number }
  | { kind: "remove"; reader: number };

const op = (maxSize: number): fc.Arbitrary<Op> =>
  fc.oneof(
    {
      weight: 5,
      arbitrary: fc.record({
        kind: fc.constant("produce" as const),
        size: fc.integer({ min: 64, max: maxSize }),
      }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant("advance" as const),
        reader: fc.nat(2),
        to: fc.double({ min: 0, max: 1, noNaN: true }),
      }),
    },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("add" as const), reader: fc.nat(2) }) },
    {
      weight: 1,
      arbitrary: fc.record({ kind: fc.constant("remove" as const), reader: fc.nat(2) }),
    },
  );

/**
 * Runs `ops` against Backpressure and an exact model (every cumulative size
 * kept), checking the thresholds after each step.
 */
function runModel(capacity: number, ops: Op[]): void {
  const pauseAt = Math.floor(capacity / 2);
  const resumeAt = Math.floor(pauseAt / 2);
  let changes = 0;
  const bp = new Backpressure("x", capacity, 1e9, () => changes++);
  const cum = [0]; // cum[seq] = bytes produced up to and including seq
  const readers = [reader(), reader(), reader()];
  const active = new Set<number>();
  const maxLag = () => {
    let m = 0;
    for (const i of active) m = Math.max(m, cum[cum.length - 1]! - cum[readers[i]!.after]!);
    return m;
  };
  for (const o of ops) {
    const was = bp.paused;
    if (o.kind === "produce") {
      cum.push(cum[cum.length - 1]! + o.size);
      bp.produced(cum.length - 1, o.size);
    } else if (o.kind === "advance") {
      const r = readers[o.reader]!;
      const last = cum.length - 1;
      r.after = Math.max(r.after, Math.round(r.after + (last - r.after) * o.to));
      if (active.has(o.reader)) bp.advanced();
    } else if (o.kind === "add") {
      if (active.has(o.reader)) continue;
      active.add(o.reader);
      bp.add(readers[o.reader]!);
    } else {
      active.delete(o.reader);
      bp.remove(readers[o.reader]!);
    }
    const lag = maxLag();
    if (!was && bp.paused) expect(lag).toBeGreaterThan(pauseAt);
    if (was && !bp.paused) expect(lag).toBeLessThanOrEqual(resumeAt);
    if (!bp.paused) expect(lag).toBeLessThanOrEqual(pauseAt);
    if (bp.paused && o.kind !== "produce") expect(lag).toBeGreaterThan(resumeAt);
  }
  bp.stop();
  expect(changes % 2).toBe(bp.paused ? 1 : 0);
}

it("pauses as soon as a fresh reader at seq 0 is more than half the capacity behind", () => {
  const bp = new Backpressure("x", 1024, 1e9, () => {});
  bp.add(reader());
  bp.produced(1, 126);
  bp.produced(2, 173);
  expect(bp.paused).toBe(false);
  bp.produced(3, 214); // 513 bytes behind: over the 512 at which it pauses
  expect(bp.paused).toBe(true);
  bp.stop();
});

describe("Backpressure", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("never pauses unless a reader is over half the capacity behind, nor stays paused once all are within a quarter; misses each threshold by at most one event (model)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1024, max: 8192 }),
        fc.array(op(256), { maxLength: 200 }),
        (cap, ops) => {
          runModel(cap, ops);
        },
      ),
      { numRuns: 200 },
    );
  });

  it("pauses for a reader older than the whole window", () => {
    const bp = new Backpressure("x", 1000, 1e9, () => {});
    const r = reader(0);
    bp.add(r);
    for (let seq = 1; seq <= 100; seq++) bp.produced(seq, 64);
    expect(bp.paused).toBe(true);
    r.after = 100;
    bp.advanced();
    expect(bp.paused).toBe(false);
    bp.stop();
  });

  it("rewind() forgets events the log refused: a reader at the last logged one holds nothing", () => {
    const bp = new Backpressure("x", 1000, 1e9, () => {});
    for (let seq = 1; seq <= 3; seq++) bp.produced(seq, 100);
    for (let seq = 4; seq <= 10; seq++) bp.produced(seq, 100); // refused by the log
    const r = reader(3);
    bp.add(r);
    expect(bp.paused).toBe(true);
    bp.rewind(3);
    expect(bp.paused).toBe(false);
    // Numbering goes on from 4; the accounting follows it.
    for (let seq = 4; seq <= 10; seq++) bp.produced(seq, 100);
    expect(bp.paused).toBe(true);
    r.after = 10;
    bp.advanced();
    expect(bp.paused).toBe(false);
    // Rewinding before the window starts a new window there.
    for (let seq = 11; seq <= 40; seq++) bp.produced(seq, 100);
    bp.rewind(2);
    r.after = 2;
    bp.advanced();
    expect(bp.paused).toBe(false);
    bp.stop();
  });

  it("a reader added while far behind pauses at once; removing it resumes", () => {
    let changes = 0;
    const bp = new Backpressure("x", 1000, 1e9, () => changes++);
    for (let seq = 1; seq <= 10; seq++) bp.produced(seq, 100);
    const r = reader(0);
    bp.add(r);
    expect(bp.paused).toBe(true);
    bp.remove(r);
    expect(bp.paused).toBe(false);
    expect(changes).toBe(2);
    bp.stop();
  });

  it("tracks nothing and never pauses when the log never drops events (capacity Infinity)", () => {
    let changes = 0;
    const bp = new Backpressure("x", Number.POSITIVE_INFINITY, 10, () => changes++);
    bp.add(reader(0));
    for (let seq = 1; seq <= 1000; seq++) bp.produced(seq, 1 << 20);
    expect(bp.paused).toBe(false);
    expect(changes).toBe(0);
    bp.stop();
  });

  it("cuts a reader that holds the pipes and pulls nothing for stallMs with ELAGGING, then resumes", () => {
    vi.useFakeTimers();
    let changes = 0;
    const bp = new Backpressure("exec-1", 1000, 400, () => changes++);
    const slow = reader(0);
    const fast = reader(0);
    bp.add(slow);
    bp.add(fast);
    for (let seq = 1; seq <= 10; seq++) bp.produced(seq, 100);
    expect(bp.paused).toBe(true);
    fast.after = 10;
    fast.lastPull = Date.now();
    bp.advanced();
    expect(bp.paused).toBe(true);
    vi.advanceTimersByTime(300);
    expect(slow.cuts).toHaveLength(0);
    fast.lastPull = Date.now(); // the fast reader keeps pulling
    vi.advanceTimersByTime(200);
    expect(slow.cuts).toHaveLength(1);
    expect(slow.cuts[0]).toMatchObject({ code: "ELAGGING" });
    expect(slow.cuts[0]!.message).toContain("exec-1");
    expect(fast.cuts).toHaveLength(0);
    expect(bp.paused).toBe(false);
    expect(changes).toBe(2);
    bp.stop();
  });

  it("does not cut a paused reader that keeps pulling", () => {
    vi.useFakeTimers();
    const bp = new Backpressure("x", 1000, 100, () => {});
    const r = reader(0);
    bp.add(r);
    for (let seq = 1; seq <= 10; seq++) bp.produced(seq, 100);
    for (let i = 0; i < 20; i++) {
      r.lastPull = Date.now();
      vi.advanceTimersByTime(25);
    }
    expect(r.cuts).toHaveLength(0);
    expect(bp.paused).toBe(true);
    bp.stop();
  });

  it("stop() ends stall checks and forgets readers", () => {
    vi.useFakeTimers();
    const bp = new Backpressure("x", 1000, 100, () => {});
    const r = reader(0);
    bp.add(r);
    for (let seq = 1; seq <= 10; seq++) bp.produced(seq, 100);
    bp.stop();
    vi.advanceTimersByTime(10_000);
    expect(r.cuts).toHaveLength(0);
  });
});
