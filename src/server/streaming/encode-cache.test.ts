// The server's frame encoders (encode-cache.ts) must give
// byte-for-byte the codec's canonical text (frameToJson / formatSseEvent),
// whatever the id, seq, stream name or value, hand over text only when it is
// ASCII (sinks write text as latin1), and share one frame per event between
// streams of the same execution, but only while there are two or more, and
// only between streams of the same server.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { frameToJson } from "../../wire/exec-wire/index.js";
import { formatSseEvent } from "../../wire/sse.js";
import type { ExecEvent } from "../../wire/types.js";
import { FrameEncoders, type StreamFormat } from "./encode-cache.js";
import type { Frame } from "./pump.js";

const encoders = new FrameEncoders();
const openFrameEncoder = (format: StreamFormat, id: string) => encoders.open(format, id);

/** The bytes a sink puts on the wire for `f`: text as latin1 (after checking it is ASCII). */
const wireBytes = (f: Frame): Buffer => {
  if (typeof f !== "string") return Buffer.from(f.buffer, f.byteOffset, f.length);
  expect(/^[\x00-\x7f]*$/.test(f)).toBe(true);
  return Buffer.from(f, "latin1");
};

const canonical = (format: StreamFormat, ev: ExecEvent): Buffer =>
  Buffer.from(
    format === "ndjson"
      ? `${frameToJson(ev)}\n`
      : ev.name === "heartbeat"
        ? formatSseEvent({ event: "heartbeat", data: frameToJson(ev) })
        : formatSseEvent({ id: ev.seq, event: ev.name, data: frameToJson(ev) }),
    "utf8",
  );

const outputEvent = fc.record({
  id: fc.string({ minLength: 1, maxLength: 40, unit: "binary" }),
  seq: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
  name: fc.constantFrom("stdout" as const, "stderr" as const),
  value: fc.oneof(
    fc.uint8Array({ minLength: 0, maxLength: 5000 }),
    fc.string({ maxLength: 300, unit: "binary" }),
  ),
}) as fc.Arbitrary<ExecEvent>;

const exitEvent = fc.record({
  id: fc.constantFrom("r1", "é-not-ascii"),
  seq: fc.nat({ max: 1e9 }),
  name: fc.constant("exit" as const),
  value: fc.integer({ min: 0, max: 255 }),
  reason: fc.constantFrom("exited", "killed", "timeout", "ünusual"),
}) as fc.Arbitrary<ExecEvent>;

describe("server frame encoders", () => {
  it("frames equal the canonical text, exec-wire and SSE, alone and shared, any id or value", () => {
    fc.assert(
      fc.property(
        fc.oneof(outputEvent, exitEvent),
        fc.constantFrom("ndjson" as const, "sse" as const),
        fc.boolean(),
        (ev, format, shared) => {
          const a = openFrameEncoder(format, ev.id);
          const b = shared ? openFrameEncoder(format, ev.id) : null;
          try {
            expect(wireBytes(a.encode(ev))).toEqual(canonical(format, ev));
            if (b) expect(wireBytes(b.encode(ev))).toEqual(canonical(format, ev));
          } finally {
            a.close();
            b?.close();
          }
        },
      ),
      { numRuns: 400 },
    );
  });

  it("heartbeats carry no SSE id and are never shared", () => {
    const ev: ExecEvent = {
      id: "r1",
      seq: 3,
      name: "heartbeat",
      value: { pid: 1, elapsedMs: 2, lastOutputMs: 3 },
    };
    const a = openFrameEncoder("sse", "r1");
    const b = openFrameEncoder("sse", "r1");
    expect(wireBytes(a.encode(ev))).toEqual(canonical("sse", ev));
    a.close();
    b.close();
  });

  it("shares one frame between two streams of the same execution, and only then", () => {
    // Non-ASCII text makes the frame a Buffer, so sharing is visible as identity.
    const ev: ExecEvent = { id: "x", seq: 1, name: "stdout", value: "é".repeat(40_000) };
    for (const format of ["ndjson", "sse"] as const) {
      const a = openFrameEncoder(format, "x");
      const other = openFrameEncoder(format, "y");
      // Alone (another execution's stream does not count): encoded afresh each time.
      expect(a.encode(ev)).not.toBe(a.encode(ev));
      expect(a.encode(ev)).toEqual(a.encode(ev));
      const b = openFrameEncoder(format, "x");
      const shared = a.encode(ev);
      expect(b.encode(ev)).toBe(shared);
      b.close();
      b.close(); // idempotent: must not drop a's count
      expect(a.encode(ev)).not.toBe(shared); // alone again
      const c = openFrameEncoder(format, "x");
      expect(c.encode(ev)).toBe(shared); // two open (a and c): served from the cache
      c.close();
      a.close();
      other.close();
    }
  });

  it("keeps each server's cache to itself: streams of two servers never share frames", () => {
    const ev: ExecEvent = { id: "x", seq: 1, name: "stdout", value: "é".repeat(1000) };
    const serverA = new FrameEncoders();
    const serverB = new FrameEncoders();
    for (const format of ["ndjson", "sse"] as const) {
      const a = serverA.open(format, "x");
      const b = serverB.open(format, "x");
      // One stream of "x" on each server: neither counts the other, so no caching.
      expect(a.encode(ev)).not.toBe(b.encode(ev));
      expect(a.encode(ev)).toEqual(b.encode(ev));
      const a2 = serverA.open(format, "x");
      const shared = a.encode(ev);
      expect(a2.encode(ev)).toBe(shared); // two on server A: shared there
      expect(b.encode(ev)).not.toBe(shared); // server B never sees A's frame
      a.close();
      a2.close();
      b.close();
    }
  });
});
