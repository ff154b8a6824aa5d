// The helpers every EventLog shares: event sizing for the byte cap, states
// from exit reasons (old spellings included), the exit patch, content
// equality for idempotent re-appends, batch continuity checks, and Waiters.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LoggedEvent } from "../wire/types.js";
import {
  abortedError,
  busy,
  checkBatch,
  closedError,
  EVENT_OVERHEAD_BYTES,
  eventSize,
  finishPatch,
  normalizeState,
  notFound,
  sameEvent,
  stateForReason,
  truncated,
  Waiters,
} from "./common.js";

const out = (seq: number, value: Uint8Array | string = "x"): LoggedEvent => ({
  id: "e",
  seq,
  name: "stdout",
  value,
});
const exit = (seq: number): LoggedEvent => ({ id: "e", seq, name: "exit", value: 0 });
const einval = expect.objectContaining({ code: "EINVAL" });

describe("eventSize", () => {
  it("counts payload bytes (UTF-8 for text) plus the fixed overhead; an exit is the overhead alone", () => {
    expect(eventSize(out(1, ""))).toBe(EVENT_OVERHEAD_BYTES);
    expect(eventSize(out(1, "é€"))).toBe(EVENT_OVERHEAD_BYTES + 5);
    expect(eventSize(out(1, new Uint8Array(10).subarray(2, 7)))).toBe(EVENT_OVERHEAD_BYTES + 5);
    expect(eventSize(exit(1))).toBe(EVENT_OVERHEAD_BYTES);
  });

  it("sizes text and its UTF-8 bytes alike (property)", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme" }), (s) => {
        expect(eventSize(out(1, s))).toBe(eventSize(out(1, new TextEncoder().encode(s))));
      }),
    );
  });
});

describe("states", () => {
  it("finishes an execution with the state spelled like its exit reason, exited by default", () => {
    for (const r of ["exited", "killed", "timeout", "lost"] as const)
      expect(stateForReason(r)).toBe(r);
    expect(stateForReason(undefined)).toBe("exited");
  });

  it("reads today's states as themselves, timed_out as timeout, and anything else as unknown", () => {
    for (const s of ["running", "exited", "killed", "timeout", "lost"])
      expect(normalizeState(s)).toBe(s);
    expect(normalizeState("timed_out")).toBe("timeout");
    for (const s of ["", "Running", "done", "timedout"]) expect(normalizeState(s)).toBeUndefined();
  });

  it("patches state, exit code, end time and (only when present) the signal from an exit event", () => {
    expect(finishPatch({ id: "e", seq: 3, name: "exit", value: 2 }, 99)).toEqual({
      state: "exited",
      exitCode: 2,
      endedAt: 99,
    });
    expect(
      finishPatch(
        { id: "e", seq: 3, name: "exit", value: 143, signal: "SIGTERM", reason: "killed" },
        5,
      ),
    ).toEqual({ state: "killed", exitCode: 143, endedAt: 5, signal: "SIGTERM" });
  });
});

describe("sameEvent", () => {
  it("compares seq, name and content, bytes by value whatever their backing buffer", () => {
    const backing = new Uint8Array([9, 1, 2, 3, 9]);
    expect(sameEvent(out(1, new Uint8Array([1, 2, 3])), out(1, backing.subarray(1, 4)))).toBe(true);
    expect(sameEvent(out(1, new Uint8Array([1, 2, 3])), out(1, new Uint8Array([1, 2, 4])))).toBe(
      false,
    );
    expect(sameEvent(out(1, new Uint8Array([1, 2])), out(1, new Uint8Array([1, 2, 3])))).toBe(
      false,
    );
    expect(sameEvent(out(1, "a"), out(2, "a"))).toBe(false);
    expect(sameEvent(out(1, "a"), { ...out(1, "a"), name: "stderr" } as LoggedEvent)).toBe(false);
    expect(sameEvent(out(1, "a"), out(1, "a"))).toBe(true);
  });

  it("never takes text for the bytes that spell it", () => {
    expect(sameEvent(out(1, "a"), out(1, new Uint8Array([97])))).toBe(false);
  });

  it("compares exits by code, signal and reason", () => {
    const a: LoggedEvent = {
      id: "e",
      seq: 2,
      name: "exit",
      value: 1,
      signal: "SIGINT",
      reason: "killed",
    };
    expect(sameEvent(a, { ...a })).toBe(true);
    expect(sameEvent(a, { ...a, value: 2 })).toBe(false);
    expect(sameEvent(a, { ...a, signal: undefined })).toBe(false);
    expect(sameEvent(a, { ...a, reason: "exited" })).toBe(false);
    expect(sameEvent(a, out(2, "x"))).toBe(false);
  });
});

describe("checkBatch", () => {
  it("returns the index of the first new event: earlier ones are re-appends of stored seqs", () => {
    expect(checkBatch("e", 0, false, [out(1), out(2)])).toBe(0);
    expect(checkBatch("e", 2, false, [out(1), out(2), out(3)])).toBe(2);
    expect(checkBatch("e", 5, false, [out(4), out(5)])).toBe(2);
    expect(checkBatch("e", 5, true, [out(5)])).toBe(1);
    expect(checkBatch("e", 3, false, [])).toBe(0);
  });

  it("accepts exactly the batches that continue the log (property)", () => {
    fc.assert(
      fc.property(fc.nat(50), fc.nat(5), fc.nat(5), (last, back, fresh) => {
        const from = Math.max(1, last - back + 1);
        const events: LoggedEvent[] = [];
        for (let s = from; s <= last + fresh; s++) events.push(out(s));
        expect(checkBatch("e", last, false, events)).toBe(last - from + 1);
      }),
    );
  });

  it("refuses a gap, a repeat, a non-integer seq or an event of another execution", () => {
    expect(() => checkBatch("e", 2, false, [out(4)])).toThrow(einval);
    expect(() => checkBatch("e", 2, false, [out(3), out(3)])).toThrow(einval);
    expect(() => checkBatch("e", 2, false, [out(3.5)])).toThrow(einval);
    expect(() => checkBatch("e", 2, false, [{ ...out(3), id: "other" }])).toThrow(
      expect.objectContaining({ code: "EINVAL", message: expect.stringContaining("other") }),
    );
  });

  it("accepts an event without an id", () => {
    const { id: _id, ...noId } = out(1) as LoggedEvent & { id?: string };
    expect(checkBatch("e", 0, false, [noId as LoggedEvent])).toBe(0);
  });

  it("refuses events after an exit, in the batch or already stored", () => {
    expect(() => checkBatch("e", 0, false, [exit(1), out(2)])).toThrow(einval);
    expect(() => checkBatch("e", 1, true, [out(2)])).toThrow(einval);
    expect(checkBatch("e", 0, false, [out(1), exit(2)])).toBe(0);
  });

  it("refuses re-appended seqs out of order (a shuffle, not a retry)", () => {
    expect(() => checkBatch("e", 5, false, [out(2), out(1), out(6)])).toThrow(einval);
  });
});

describe("errors", () => {
  it("carry the codes the log contract names", () => {
    expect(notFound("x")).toMatchObject({ code: "ENOENT", message: expect.stringContaining("x") });
    expect(truncated("x", 2, 7)).toMatchObject({ code: "ELOG_TRUNCATED", earliestSeq: 7 });
    expect(busy("x")).toMatchObject({ code: "EEXEC_BUSY" });
    expect(closedError()).toMatchObject({ code: "ECLOSED" });
    const ac = new AbortController();
    ac.abort("why");
    expect(abortedError(ac.signal)).toMatchObject({ code: "EABORTED", cause: "why" });
  });
});

describe("Waiters", () => {
  it("wakes every parked wait at once and forgets them", async () => {
    const w = new Waiters();
    const woken: number[] = [];
    const all = [1, 2, 3].map((n) => w.wait().then(() => woken.push(n)));
    expect(w.size).toBe(3);
    w.wakeAll();
    await Promise.all(all);
    expect(woken.sort()).toEqual([1, 2, 3]);
    expect(w.size).toBe(0);
  });

  it("rejects with EABORTED on abort, or at once when already aborted, and drops the waiter", async () => {
    const w = new Waiters();
    const ac = new AbortController();
    const p = w.wait(ac.signal);
    expect(w.size).toBe(1);
    ac.abort();
    await expect(p).rejects.toMatchObject({ code: "EABORTED" });
    expect(w.size).toBe(0);
    await expect(w.wait(ac.signal)).rejects.toMatchObject({ code: "EABORTED" });
    expect(w.size).toBe(0);
  });

  it("a woken wait ignores a later abort", async () => {
    const w = new Waiters();
    const ac = new AbortController();
    const p = w.wait(ac.signal);
    w.wakeAll();
    ac.abort();
    await expect(p).resolves.toBeUndefined();
  });
});
