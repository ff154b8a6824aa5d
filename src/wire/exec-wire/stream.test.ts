// Tests for the web-stream forms (decodeExecEvents, encodeExecEvents): both
// source kinds, reader vs for await, cancellation, source errors, and a
// property round trip through the stream API.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ExecEvent } from "../types.js";
import {
  decodeExecEvents,
  type ExecWireError,
  encodeExecEvent,
  encodeExecEvents,
} from "./index.js";
import {
  bytes,
  chunkAt,
  collect,
  concat,
  eventsArb,
  norm,
  streamOf,
  td,
  WIRE_EVENTS,
  WIRE_EXAMPLE,
} from "./test-support/fixtures.js";

describe("exec-wire streams", () => {
  it("decodeExecEvents returns a ReadableStream that is async-iterable (Node 20)", () => {
    const s = decodeExecEvents(streamOf([]));
    expect(s).toBeInstanceOf(ReadableStream);
    expect(typeof (s as AsyncIterable<unknown>)[Symbol.asyncIterator]).toBe("function");
  });

  it("reading with getReader() gives the same events and errors as for await", async () => {
    const text = `${WIRE_EXAMPLE}oops\n`;
    const reader = decodeExecEvents(streamOf(chunkAt(bytes(text), [10, 100]))).getReader();
    const items: ExecEvent[] = [];
    let error: ExecWireError | undefined;
    try {
      for (;;) {
        const r = await reader.read();
        if (r.done) break;
        items.push(r.value);
      }
    } catch (e) {
      error = e as ExecWireError;
    }
    expect(items).toEqual(WIRE_EVENTS);
    expect(error?.line).toBe(4);
  });

  it("for await after a partial read through a reader continues where it stopped", async () => {
    const s = decodeExecEvents(streamOf([bytes(WIRE_EXAMPLE)]));
    const reader = s.getReader();
    const first = await reader.read();
    reader.releaseLock();
    const rest = await collect(s);
    expect([first.value, ...rest.items]).toEqual(WIRE_EVENTS);
  });

  it("for await locks the stream and leaves it closed when done", async () => {
    const s = decodeExecEvents(streamOf([bytes(WIRE_EXAMPLE)]));
    const seen: ExecEvent[] = [];
    for await (const ev of s) {
      expect(s.locked).toBe(true);
      seen.push(ev);
    }
    expect(seen).toEqual(WIRE_EVENTS);
    expect(s.locked).toBe(false);
    expect((await s.getReader().read()).done).toBe(true);
  });

  it("accepts a ReadableStream or an AsyncIterable source", async () => {
    async function* gen() {
      yield bytes(WIRE_EXAMPLE.slice(0, 30));
      yield bytes(WIRE_EXAMPLE.slice(30));
    }
    expect((await collect(decodeExecEvents(gen()))).items).toEqual(WIRE_EVENTS);
    const chunks = chunkAt(bytes(WIRE_EXAMPLE), [5, 77]);
    expect((await collect(decodeExecEvents(streamOf(chunks)))).items).toEqual(WIRE_EVENTS);
  });

  it("cancelling the event stream cancels the source", async () => {
    let cancelled = false;
    const src = new ReadableStream<Uint8Array>({
      pull(c) {
        c.enqueue(encodeExecEvent({ id: "r", seq: 1, name: "stdout", value: "x" }));
      },
      cancel() {
        cancelled = true;
      },
    });
    for await (const _ of decodeExecEvents(src)) break;
    expect(cancelled).toBe(true);
  });

  it("a source error errors the event stream", async () => {
    async function* gen() {
      yield bytes(WIRE_EXAMPLE);
      throw new Error("socket reset");
    }
    const { items, error } = await collect(decodeExecEvents(gen()));
    expect(items).toEqual(WIRE_EVENTS);
    expect((error as unknown as Error).message).toBe("socket reset");
  });

  it("encode stream piped into decode stream round-trips", async () => {
    async function* gen() {
      yield* WIRE_EVENTS;
    }
    expect((await collect(decodeExecEvents(encodeExecEvents(gen())))).items).toEqual(WIRE_EVENTS);
  });

  it("encodeExecEvents encodes a ReadableStream or an AsyncIterable, one frame per chunk", async () => {
    async function* gen() {
      yield* WIRE_EVENTS;
    }
    const fromIter = await collect(encodeExecEvents(gen()));
    expect(td.decode(concat(fromIter.items))).toBe(WIRE_EXAMPLE);
    let i = 0;
    const rs = new ReadableStream<ExecEvent>({
      pull(c) {
        if (i < WIRE_EVENTS.length) c.enqueue(WIRE_EVENTS[i++]!);
        else c.close();
      },
    });
    const fromStream = await collect(encodeExecEvents(rs));
    expect(fromStream.items).toHaveLength(3);
    expect(td.decode(concat(fromStream.items))).toBe(WIRE_EXAMPLE);
  });
});

describe("stream properties", () => {
  it("random events x random chunkings round-trip through the stream API", async () => {
    await fc.assert(
      fc.asyncProperty(eventsArb, fc.array(fc.nat(), { maxLength: 25 }), async (events, cuts) => {
        const all = concat(events.map(encodeExecEvent));
        const { items, error } = await collect(decodeExecEvents(streamOf(chunkAt(all, cuts))));
        expect(error).toBeUndefined();
        expect(norm(items)).toEqual(norm(events));
      }),
      { numRuns: 40 },
    );
  });
});
