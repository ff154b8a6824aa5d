// Reading an execution's events for a tool call, over a fake handle: from a
// seq until the exit, a seq bound, the caller's stop, or the deadline; the
// result's lastSeq is the last event handed out; heartbeats are skipped; a
// start the log no longer has resumes at the earliest retained seq; other
// errors pass through; the subscription is always released.
import { describe, expect, it } from "vitest";
import type { EventsOptions, ExecHandle } from "../runtime/types.js";
import { ComputerError } from "../wire/errors.js";
import type { ExecEvent, LoggedEvent } from "../wire/types.js";
import { drain } from "./drain.js";

const out = (seq: number): LoggedEvent => ({ id: "e", seq, name: "stdout", value: `${seq}` });
const exit = (seq: number): LoggedEvent => ({ id: "e", seq, name: "exit", value: 0 });
const hb = (seq: number): ExecEvent => ({
  id: "e",
  seq,
  name: "heartbeat",
  value: { pid: 1, elapsedMs: 0, lastOutputMs: 0 },
});

/**
 * A handle whose streams replay `events` after the requested seq and then stay
 * open (a running command) unless `ends`. Starts before `earliest` are
 * ELOG_TRUNCATED. Records every subscribe and whether its stream was cancelled.
 */
function fakeHandle(
  events: ExecEvent[],
  opts: { earliest?: number; ends?: boolean; fail?: unknown } = {},
) {
  const calls: { options: EventsOptions; cancelled: boolean }[] = [];
  const handle = {
    id: "e",
    async subscribe(options: EventsOptions = {}) {
      if (opts.fail) throw opts.fail;
      const after = options.after as number;
      if (opts.earliest !== undefined && after + 1 < opts.earliest) {
        throw new ComputerError("ELOG_TRUNCATED", "dropped", { earliestSeq: opts.earliest });
      }
      const call = { options, cancelled: false };
      calls.push(call);
      const queue = events.filter((e) => e.seq > after || e.name === "heartbeat");
      return new ReadableStream<ExecEvent>({
        start(c) {
          // Like the real stream: an aborted subscription ends.
          options.signal?.addEventListener("abort", () => {
            try {
              c.close();
            } catch {
              // already closed or cancelled
            }
          });
        },
        pull(c) {
          const ev = queue.shift();
          if (ev) c.enqueue(ev);
          else if (opts.ends) c.close();
          else return new Promise(() => {}); // nothing more yet
        },
        cancel() {
          call.cancelled = true;
        },
      });
    },
  } as unknown as ExecHandle;
  return { handle, calls };
}

const soon = () => Date.now() + 10_000;

describe("drain", () => {
  it("reads after the given seq up to and including the exit", async () => {
    const { handle, calls } = fakeHandle([out(1), out(2), out(3), exit(4)]);
    const seen: number[] = [];
    const r = await drain(handle, {
      after: 1,
      deadline: soon(),
      onEvent: (ev) => void seen.push(ev.seq),
    });
    expect(seen).toEqual([2, 3, 4]);
    expect(r).toEqual({ lastSeq: 4, exit: exit(4) });
    expect(calls[0]!.options).toMatchObject({ after: 1, heartbeats: false });
    expect(calls[0]!.cancelled).toBe(true);
    expect(calls[0]!.options.signal!.aborted).toBe(true);
  });

  it("skips heartbeats", async () => {
    const { handle } = fakeHandle([out(1), hb(1), exit(2)]);
    const seen: string[] = [];
    await drain(handle, { after: 0, deadline: soon(), onEvent: (ev) => void seen.push(ev.name) });
    expect(seen).toEqual(["stdout", "exit"]);
  });

  it("stops at untilSeq, and does not subscribe when untilSeq is not past after", async () => {
    const { handle, calls } = fakeHandle([out(1), out(2), out(3)]);
    expect(
      await drain(handle, { after: 0, untilSeq: 2, deadline: soon(), onEvent: () => false }),
    ).toEqual({
      lastSeq: 2,
    });
    expect(
      await drain(handle, { after: 3, untilSeq: 3, deadline: soon(), onEvent: () => false }),
    ).toEqual({
      lastSeq: 3,
    });
    expect(calls).toHaveLength(1);
  });

  it("stops once onEvent returns true, that event being the last handed out", async () => {
    const { handle } = fakeHandle([out(1), out(2), out(3)]);
    const r = await drain(handle, { after: 0, deadline: soon(), onEvent: (ev) => ev.seq === 2 });
    expect(r).toEqual({ lastSeq: 2 });
  });

  it("returns at the deadline with the position reached, and releases the stream", async () => {
    const { handle, calls } = fakeHandle([out(1), out(2)]);
    const t0 = Date.now();
    const r = await drain(handle, { after: 0, deadline: t0 + 50, onEvent: () => false });
    expect(r).toEqual({ lastSeq: 2 });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(40);
    expect(calls[0]!.cancelled).toBe(true);
  });

  it("returns when the stream ends without an exit", async () => {
    const { handle } = fakeHandle([out(1)], { ends: true });
    expect(await drain(handle, { after: 0, deadline: soon(), onEvent: () => false })).toEqual({
      lastSeq: 1,
    });
  });

  it("resumes at the earliest retained seq when the start was dropped, and says so", async () => {
    const { handle, calls } = fakeHandle([out(5), out(6), exit(7)], { earliest: 5 });
    const seen: number[] = [];
    const r = await drain(handle, {
      after: 1,
      deadline: soon(),
      onEvent: (ev) => void seen.push(ev.seq),
    });
    expect(seen).toEqual([5, 6, 7]);
    expect(r).toMatchObject({ lastSeq: 7, resumedAt: 5 });
    expect(calls.map((c) => c.options.after)).toEqual([4]);
  });

  it("reports lastSeq just before the earliest seq when a resumed read finds nothing in time", async () => {
    const { handle } = fakeHandle([], { earliest: 5 });
    const r = await drain(handle, { after: 1, deadline: Date.now() + 20, onEvent: () => false });
    expect(r).toEqual({ lastSeq: 4, resumedAt: 5 });
  });

  it("passes other subscribe errors through", async () => {
    const { handle } = fakeHandle([], {
      fail: new ComputerError("ENOENT", "no such execution: e"),
    });
    await expect(
      drain(handle, { after: 0, deadline: soon(), onEvent: () => false }),
    ).rejects.toMatchObject({
      code: "ENOENT",
    });
  });

  it("aborts the subscription when the caller's signal aborts", async () => {
    const { handle, calls } = fakeHandle([out(1)]);
    const ac = new AbortController();
    const done = drain(handle, {
      after: 0,
      deadline: soon(),
      onEvent: () => false,
      signal: ac.signal,
    });
    await new Promise((r) => setTimeout(r, 10));
    expect(calls[0]!.options.signal!.aborted).toBe(false);
    ac.abort();
    expect(calls[0]!.options.signal!.aborted).toBe(true);
    expect(await done).toEqual({ lastSeq: 1 });
  });
});
