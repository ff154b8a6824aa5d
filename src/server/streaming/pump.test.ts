// The pump between an event stream and a byte sink, with an in-memory sink:
// every encoded frame arrives once and in order, batched (queued events go
// out in one write, no write passes batchBytes by more than one frame), it
// stops at the exit event, at the end of the stream, when the sink closes or
// when the stream fails (after flushing what was read), and it reads nothing
// more while the sink is full.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ExecEvent } from "../../wire/types.js";
import { type ByteSink, type Frame, pumpEvents } from "./pump.js";

class MemorySink implements ByteSink {
  writes: Frame[][] = [];
  sizes: number[] = [];
  closed = false;
  full = false;
  drains = 0;
  private release: (() => void) | undefined;
  write(parts: Frame[], totalBytes: number): boolean {
    this.writes.push(parts);
    this.sizes.push(totalBytes);
    return !this.full;
  }
  drained(): Promise<void> {
    this.drains++;
    if (!this.full) return Promise.resolve();
    return new Promise((resolve) => {
      this.release = resolve;
    });
  }
  drain(): void {
    this.full = false;
    this.release?.();
  }
  text(): string {
    return this.writes.flat().join("");
  }
}

const out = (seq: number, value = `${seq};`): ExecEvent => ({
  id: "e",
  seq,
  name: "stdout",
  value,
});
const exit = (seq: number): ExecEvent => ({ id: "e", seq, name: "exit", value: 0 });
const encode = (ev: ExecEvent): Frame =>
  ev.name === "exit" ? "X;" : ev.name === "heartbeat" ? "H;" : (ev.value as string);

/** A stream of `events`, then closed (or failed with `error`); counts reads and cancels. */
function streamOf(events: ExecEvent[], end: { error?: unknown } = {}) {
  const stats = { pulls: 0, cancelled: false };
  let i = 0;
  const stream = new ReadableStream<ExecEvent>(
    {
      pull(c) {
        stats.pulls++;
        if (i < events.length) c.enqueue(events[i++]!);
        else if (end.error) c.error(end.error);
        else c.close();
      },
      cancel() {
        stats.cancelled = true;
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, stats };
}

describe("pumpEvents", () => {
  it("writes every frame in order, ends at the exit event and cancels the stream", async () => {
    const sink = new MemorySink();
    const { stream, stats } = streamOf([out(1), out(2), exit(3), out(4)]);
    const end = await pumpEvents(stream, sink, { encode });
    expect(end).toEqual({ kind: "exit" });
    expect(sink.text()).toBe("1;2;X;");
    expect(stats.cancelled).toBe(true);
  });

  it("ends with eof when the stream closes without an exit, after flushing the batch", async () => {
    const sink = new MemorySink();
    const end = await pumpEvents(streamOf([out(1), out(2)]).stream, sink, { encode });
    expect(end).toEqual({ kind: "eof" });
    expect(sink.text()).toBe("1;2;");
  });

  it("writes queued events in one write", async () => {
    const events = [...Array.from({ length: 50 }, (_, i) => out(i + 1)), exit(51)];
    const stream = new ReadableStream<ExecEvent>({
      start(c) {
        for (const ev of events) c.enqueue(ev);
        c.close();
      },
    });
    const sink = new MemorySink();
    await pumpEvents(stream, sink, { encode });
    expect(sink.writes).toHaveLength(1);
    expect(sink.writes[0]).toHaveLength(51);
  });

  it("skips events the encoder maps to null", async () => {
    const sink = new MemorySink();
    const hb: ExecEvent = {
      id: "e",
      seq: 1,
      name: "heartbeat",
      value: { pid: 1, elapsedMs: 0, lastOutputMs: 0 },
    };
    await pumpEvents(streamOf([out(1), hb, exit(2)]).stream, sink, {
      encode: (ev) => (ev.name === "heartbeat" ? null : encode(ev)),
    });
    expect(sink.text()).toBe("1;X;");
  });

  it("delivers every frame once, in order, in writes of under batchBytes plus one frame, counted by onBytes (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.string({ minLength: 1, maxLength: 30 }), { maxLength: 40 }),
        fc.integer({ min: 1, max: 100 }),
        fc.boolean(),
        async (values, batchBytes, withExit) => {
          const events = values.map((v, i) => out(i + 1, v));
          if (withExit) events.push(exit(values.length + 1));
          const stream = new ReadableStream<ExecEvent>({
            start(c) {
              for (const ev of events) c.enqueue(ev);
              c.close();
            },
          });
          const sink = new MemorySink();
          let counted = 0;
          const end = await pumpEvents(stream, sink, {
            encode,
            batchBytes,
            onBytes: (n) => (counted += n),
          });
          expect(end.kind).toBe(withExit ? "exit" : "eof");
          const expected = events.map(encode).join("");
          expect(sink.text()).toBe(expected);
          expect(counted).toBe(expected.length);
          for (let w = 0; w < sink.writes.length; w++) {
            const parts = sink.writes[w]!;
            const size = parts.reduce((n, p) => n + p.length, 0);
            expect(sink.sizes[w]).toBe(size);
            expect(size - parts[parts.length - 1]!.length).toBeLessThan(batchBytes);
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  it("reads nothing more while the sink is full and carries on once it drains", async () => {
    const sink = new MemorySink();
    sink.full = true;
    const { stream, stats } = streamOf([out(1), out(2), out(3), exit(4)]);
    const done = pumpEvents(stream, sink, { encode, batchBytes: 1 });
    await new Promise((r) => setTimeout(r, 20));
    expect(sink.writes).toHaveLength(1);
    expect(sink.drains).toBe(1);
    const pullsWhileFull = stats.pulls;
    await new Promise((r) => setTimeout(r, 20));
    expect(stats.pulls).toBe(pullsWhileFull);
    sink.drain();
    expect(await done).toEqual({ kind: "exit" });
    expect(sink.text()).toBe("1;2;3;X;");
  });

  it("stops with closed when the sink went away, writing nothing more", async () => {
    const sink = new MemorySink();
    sink.closed = true;
    const { stream, stats } = streamOf([out(1), out(2)]);
    expect(await pumpEvents(stream, sink, { encode })).toEqual({ kind: "closed" });
    expect(sink.writes).toHaveLength(0);
    expect(stats.cancelled).toBe(true);
  });

  it("stops with closed when the sink closes while it waits for a drain", async () => {
    const sink = new MemorySink();
    sink.full = true;
    const done = pumpEvents(streamOf([out(1), out(2), exit(3)]).stream, sink, {
      encode,
      batchBytes: 1,
    });
    await new Promise((r) => setTimeout(r, 10));
    sink.closed = true;
    sink.drain();
    expect(await done).toEqual({ kind: "closed" });
    expect(sink.text()).toBe("1;");
  });

  it("flushes what was read, then reports a stream failure without throwing", async () => {
    const sink = new MemorySink();
    const failure = new Error("log gone");
    const end = await pumpEvents(streamOf([out(1), out(2)], { error: failure }).stream, sink, {
      encode,
    });
    expect(end).toEqual({ kind: "error", error: failure });
    expect(sink.text()).toBe("1;2;");
  });

  it("reports a failure even when the sink throws while flushing", async () => {
    const sink = new MemorySink();
    sink.write = () => {
      throw new Error("socket gone");
    };
    const failure = new Error("log gone");
    const end = await pumpEvents(streamOf([out(1)], { error: failure }).stream, sink, { encode });
    expect(end).toEqual({ kind: "error", error: failure });
  });
});
