// The channel's own rules without any transport: validation, compaction of
// the retained state, the exact recent window, the bounds (floor, ELIMIT),
// subscriptions and ends, and the UI event log.
import { describe, expect, it, vi } from "vitest";
import { DEFAULT_CHANNEL_LIMITS, type RelayEntry, UiChannel } from "./channel.js";

const limits = DEFAULT_CHANNEL_LIMITS;
const render = (text?: string) => ({
  type: "render",
  component: "Label",
  ...(text === undefined ? {} : { params: { text } }),
});
const ev = (type: string, extra: Record<string, unknown> = {}) => ({
  type,
  widgetId: "w1",
  timestamp: 1,
  ...extra,
});

describe("UiChannel (compaction and bounds)", () => {
  it("rejects invalid commands with the reason", () => {
    const ch = new UiChannel("c", limits);
    expect(() => ch.publish({ type: "render" })).toThrow(/invalid command/);
    expect(() =>
      ch.publish({ type: "update", widgetId: "w1", params: { a: 1 }, component: "X" }),
    ).toThrow(/EINVAL|component/);
  });

  it("replays the current state: updates merged at the newest seq, destroyed widgets reduced to a tombstone", () => {
    const ch = new UiChannel("c", limits);
    const a = ch.publish({ type: "render", component: "Label", params: { text: "a", n: 1 } });
    const b = ch.publish({ type: "render", component: "Label", params: { text: "b" } });
    expect(a).toEqual({ seq: 1, widgetId: "w1" });
    ch.publish({ type: "update", widgetId: "w1", params: { text: "a2" } });
    ch.publish({ type: "update", widgetId: b.widgetId!, params: { text: "b2" } });
    ch.publish({ type: "update", widgetId: "w1", params: { n: 2 } });
    ch.publish({ type: "destroy", widgetId: "w2" });
    expect(ch.replay(0)).toEqual([
      { seq: 1, command: { type: "render", component: "Label", params: { text: "a", n: 1 } } },
      { seq: 5, command: { type: "update", widgetId: "w1", params: { text: "a2", n: 2 } } },
      { seq: 6, command: { type: "destroy", widgetId: "w2" } },
    ]);
    expect(ch.replay(5)).toEqual([{ seq: 6, command: { type: "destroy", widgetId: "w2" } }]);
    expect(() => ch.replay(99)).toThrow(/ahead/);
  });

  it("drops tombstones first when full, raising the floor (410 below it), and refuses renders when only live widgets remain", () => {
    const ch = new UiChannel("c", { ...limits, maxRetained: 3 });
    ch.publish({ type: "render", component: "Label" }); // 1
    ch.publish({ type: "destroy", widgetId: "w1" }); // 2 tombstone
    ch.publish({ type: "render", component: "Label" }); // 3
    ch.publish({ type: "render", component: "Label" }); // 4
    ch.publish({ type: "render", component: "Label" }); // 5 -> tombstone 2 dropped
    expect(ch.floor).toBe(2);
    expect(() => ch.replay(1)).toThrow(expect.objectContaining({ code: "ELOG_TRUNCATED" }));
    expect(ch.replay(2).map((e) => e.seq)).toEqual([3, 4, 5]);
    expect(() => ch.publish({ type: "render", component: "Label" })).toThrow(
      expect.objectContaining({ code: "ELIMIT" }),
    );
    // updates to live widgets still fit (merged in place)
    ch.publish({ type: "update", widgetId: "w3", params: { text: "x" } });
  });

  it("a resume inside the recent window gets exactly the commands it missed; an older one the compacted tail", () => {
    const ch = new UiChannel("c", { ...limits, maxRecent: 4 });
    ch.publish(render("0")); // 1
    for (let i = 1; i <= 9; i++) ch.publish({ type: "update", widgetId: "w1", params: { n: i } });
    expect(ch.lastSeq).toBe(10);
    // recent holds at most maxRecent * 1.25 entries, trimmed in batches down to maxRecent
    const recent = ch.replay(9);
    expect(recent.map((e) => e.seq)).toEqual([10]);
    expect(ch.replay(7).map((e) => e.seq)).toEqual([8, 9, 10]);
    expect(ch.replay(7).map((e) => (e.command as { params: unknown }).params)).toEqual([
      { n: 7 },
      { n: 8 },
      { n: 9 },
    ]);
    // seq 2 is older than the recent window: the compacted entries after it
    expect(ch.replay(2)).toEqual([
      { seq: 10, command: { type: "update", widgetId: "w1", params: { n: 9 } } },
    ]);
    expect(ch.replay(10)).toEqual([]);
  });

  it("keeps the recent window within its byte bound (never below the newest command)", () => {
    const big = "x".repeat(400);
    const ch = new UiChannel("c", { ...limits, maxRecentBytes: 1000 });
    ch.publish(render(big)); // 1
    for (let i = 2; i <= 4; i++)
      ch.publish({ type: "update", widgetId: "w1", params: { text: big, i } });
    // ~450 bytes each: the window now holds 3 and 4, so a page at 2 gets exactly those...
    expect(ch.replay(2).map((e) => e.seq)).toEqual([3, 4]);
    // ...and a page at 1 is older than the window: the compacted tail
    expect(ch.replay(1)).toEqual([
      { seq: 4, command: { type: "update", widgetId: "w1", params: { text: big, i: 4 } } },
    ]);
    const tiny = new UiChannel("t", { ...limits, maxRecentBytes: 10 });
    tiny.publish(render(big));
    tiny.publish(render(big));
    expect(tiny.replay(1).map((e) => e.seq)).toEqual([2]);
  });

  it("keeps commands for ids it did not mint, droppable first when full", () => {
    const ch = new UiChannel("c", { ...limits, maxRetained: 2 });
    ch.publish({ type: "update", widgetId: "page-uuid", params: { a: 1 } }); // 1, droppable
    ch.publish(render()); // 2
    expect(ch.replay(0).map((e) => e.seq)).toEqual([1, 2]);
    ch.publish(render()); // 3 -> 1 dropped
    expect(ch.floor).toBe(1);
    expect(ch.replay(0).map((e) => e.seq)).toEqual([2, 3]);
  });

  it("refuses a render that would pass the byte bound when nothing can be dropped", () => {
    const ch = new UiChannel("c", { ...limits, maxRetainedBytes: 200 });
    ch.publish(render("a".repeat(100)));
    expect(() => ch.publish(render("b".repeat(100)))).toThrow(
      expect.objectContaining({ code: "ELIMIT" }),
    );
    expect(ch.lastSeq).toBe(1);
  });

  it("publishAll validates the whole batch before applying any", () => {
    const ch = new UiChannel("c", limits);
    expect(() => ch.publishAll([render("a"), { type: "bogus" }])).toThrow(
      /invalid command at index 1/,
    );
    expect(ch.lastSeq).toBe(0);
    expect(ch.publishAll([render("a"), { type: "destroy", widgetId: "w1" }])).toEqual([
      { seq: 1, widgetId: "w1" },
      { seq: 2 },
    ]);
  });
});

describe("UiChannel subscriptions and ends", () => {
  it("subscribe replays then follows, and close ends every follower once", () => {
    const ch = new UiChannel("c", limits);
    ch.publish(render("a"));
    const seen: (RelayEntry | string)[] = [];
    const sub = ch.subscribe(0, (e) => seen.push(e));
    expect(sub.replay.map((e) => e.seq)).toEqual([1]);
    expect(ch.subscriberCount).toBe(1);
    ch.publish({ type: "update", widgetId: "w1", params: { text: "b" } });
    ch.close();
    ch.close("cut"); // idempotent: the first end wins
    expect(seen).toEqual([
      { seq: 2, command: { type: "update", widgetId: "w1", params: { text: "b" } } },
      "done",
    ]);
    expect(ch.subscriberCount).toBe(0);
    expect(ch.endMode).toBe("done");
    sub.unsubscribe();
  });

  it("a shutdown cuts followers; a closed channel refuses commands with 410 ECLOSED", () => {
    const ch = new UiChannel("c", limits);
    const seen: unknown[] = [];
    ch.subscribe(0, (e) => seen.push(e));
    ch.close("cut");
    expect(seen).toEqual(["cut"]);
    expect(() => ch.publish(render())).toThrow(
      expect.objectContaining({ code: "ECLOSED", status: 410 }),
    );
  });

  it("an unsubscribed follower hears nothing more", () => {
    const ch = new UiChannel("c", limits);
    const fn = vi.fn();
    ch.subscribe(0, fn).unsubscribe();
    ch.publish(render());
    expect(fn).not.toHaveBeenCalled();
  });
});

describe("UiChannel UI events", () => {
  it("logs validated events with seqs, reads after a seq, and refuses unknown fields", () => {
    const ch = new UiChannel("c", limits);
    expect(ch.postEvent(ev("Label:click", { payload: { n: 1 } })).seq).toBe(1);
    ch.postEvent(ev("Label:click"));
    expect(ch.lastEventSeq).toBe(2);
    expect(ch.readEvents(0)).toEqual([
      { type: "Label:click", widgetId: "w1", timestamp: 1, payload: { n: 1 }, seq: 1 },
      { type: "Label:click", widgetId: "w1", timestamp: 1, seq: 2 },
    ]);
    expect(ch.readEvents(1).map((e) => e.seq)).toEqual([2]);
    expect(ch.readEvents(0, 1).map((e) => e.seq)).toEqual([1]);
    expect(() => ch.postEvent(ev("x", { extra: true }))).toThrow(/unknown field "extra"/);
    expect(() => ch.postEvent({ type: 1 })).toThrow(expect.objectContaining({ code: "EINVAL" }));
    expect(() => ch.readEvents(3)).toThrow(/ahead/);
  });

  it("keeps maxEvents events; a read from before them is ELOG_TRUNCATED with earliestSeq", () => {
    const ch = new UiChannel("c", { ...limits, maxEvents: 2 });
    for (let i = 0; i < 5; i++) ch.postEvent(ev("t"));
    expect(ch.readEvents(3).map((e) => e.seq)).toEqual([4, 5]);
    expect(() => ch.readEvents(2)).toThrow(
      expect.objectContaining({ code: "ELOG_TRUNCATED", earliestSeq: 4 }),
    );
  });

  it("waitForEvents resolves on a new event, on close, on abort and on timeout", async () => {
    const ch = new UiChannel("c", limits);
    const waiting = ch.waitForEvents(0, 10_000);
    ch.postEvent(ev("t"));
    await waiting;
    const ac = new AbortController();
    const aborted = ch.waitForEvents(1, 10_000, ac.signal);
    ac.abort();
    await aborted;
    await ch.waitForEvents(1, 5); // times out
    const closing = ch.waitForEvents(1, 10_000);
    ch.close();
    await closing;
  });

  it("tells in-process listeners, and one failing listener does not stop the others", () => {
    const ch = new UiChannel("c", limits);
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    const seen: number[] = [];
    ch.onEvent(() => {
      throw new Error("boom");
    });
    const off = ch.onEvent((e) => seen.push(e.seq));
    ch.postEvent(ev("t"));
    off();
    ch.postEvent(ev("t"));
    expect(seen).toEqual([1]);
    expect(errors).toHaveBeenCalledTimes(2);
    errors.mockRestore();
  });
});

describe("UiChannel (watched)", () => {
  it("is watched while a page subscribes or has polled lately, and says when it starts being watched", () => {
    vi.useFakeTimers();
    try {
      const ch = new UiChannel("c", limits);
      const hook = vi.fn();
      ch.onWatched(hook);
      expect(ch.watched).toBe(false);
      const sub = ch.subscribe(0, () => {});
      expect([ch.watched, hook.mock.calls.length]).toEqual([true, 1]);
      ch.subscribe(0, () => {}).unsubscribe(); // already watched: no new call
      sub.unsubscribe();
      expect(ch.watched).toBe(false);
      ch.polled();
      expect([ch.watched, hook.mock.calls.length]).toEqual([true, 2]);
      ch.polled();
      expect(hook.mock.calls.length).toBe(2);
      vi.advanceTimersByTime(31_000);
      expect(ch.watched).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });
});
