// The hand-over at the live end: a reader takes an accepted batch only when
// it continues exactly where the reader stands, is sent to the log in every
// other case (never left waiting for something already accepted), and
// readers never share a value.
import { describe, expect, it } from "vitest";
import type { LoggedEvent } from "../wire/types.js";
import { LiveTail } from "./live-tail.js";

function batch(from: number, to: number): LoggedEvent[] {
  const out: LoggedEvent[] = [];
  for (let s = from; s <= to; s++) {
    out.push({ id: "x", seq: s, name: "stdout", value: new Uint8Array([s, s + 1]) });
  }
  return out;
}

/** Whether `p` settled by the time queued microtasks ran. */
async function settled<T>(p: Promise<T>): Promise<{ done: boolean; value?: T }> {
  let r: { done: boolean; value?: T } = { done: false };
  void p.then((value) => {
    r = { done: true, value };
  });
  await new Promise((res) => setImmediate(res));
  return r;
}

describe("LiveTail", () => {
  it("hands the next accepted batch, as it is, to a reader parked where it starts", async () => {
    const tail = new LiveTail();
    tail.accepted(batch(1, 2));
    const w = tail.wait(2);
    expect((await settled(w.promise)).done).toBe(false);
    const b = batch(3, 5);
    tail.accepted(b);
    expect(await w.promise).toBe(b);
  });

  it("gives a reader parked inside the batch only the events after its position", async () => {
    const tail = new LiveTail();
    const w = tail.wait(0);
    // Parked at 0, but the batch starts at 1: all of it.
    tail.accepted(batch(1, 3));
    expect((await w.promise).map((e) => e.seq)).toEqual([1, 2, 3]);
  });

  it("sends a reader behind the batch to the log, with nothing handed over", async () => {
    const tail = new LiveTail();
    const w = tail.wait(0);
    tail.accepted(batch(4, 6)); // 1..3 were accepted while it was not parked here
    expect(await w.promise).toEqual([]);
  });

  it("returns at once when the log accepted more than the reader has (it parked too late)", async () => {
    const tail = new LiveTail();
    tail.accepted(batch(1, 3));
    const w = tail.wait(2);
    expect(await settled(w.promise)).toEqual({ done: true, value: [] });
  });

  it("keeps waiting a reader that already read the batch from the log", async () => {
    const tail = new LiveTail();
    const w = tail.wait(3);
    tail.accepted(batch(1, 3));
    expect((await settled(w.promise)).done).toBe(false);
    tail.accepted(batch(4, 4));
    expect((await w.promise).map((e) => e.seq)).toEqual([4]);
  });

  it("gives every reader after the first its own copies: no value is shared", async () => {
    const tail = new LiveTail();
    const a = tail.wait(0);
    const b = tail.wait(0);
    const c = tail.wait(1);
    const sent = batch(1, 2);
    tail.accepted(sent);
    const [ea, eb, ec] = await Promise.all([a.promise, b.promise, c.promise]);
    const values = [...ea, ...eb, ...ec].map((e) => e.value as Uint8Array);
    expect(new Set(values.map((v) => v.buffer)).size).toBe(values.length);
    expect(ea === sent || eb === sent).toBe(true);
    for (const got of [ea, eb]) {
      expect(got.map((e) => [e.seq, [...(e.value as Uint8Array)]])).toEqual([
        [1, [1, 2]],
        [2, [2, 3]],
      ]);
    }
    expect(ec.map((e) => e.seq)).toEqual([2]);
  });

  it("a cancelled wait resolves with nothing and takes no batch", async () => {
    const tail = new LiveTail();
    const w = tail.wait(0);
    w.cancel();
    expect(await w.promise).toEqual([]);
    const other = tail.wait(0);
    const b = batch(1, 1);
    tail.accepted(b);
    expect(await other.promise).toBe(b); // the cancelled reader took no copy slot
  });

  it("wakes everyone with nothing when closed or the log refused, and later waits return at once", async () => {
    const tail = new LiveTail();
    const a = tail.wait(0);
    tail.wakeAll();
    expect(await a.promise).toEqual([]);
    const b = tail.wait(0);
    tail.close();
    expect(await b.promise).toEqual([]);
    expect(await settled(tail.wait(0).promise)).toEqual({ done: true, value: [] });
  });
});
