// Tests for the push decoder (docs/protocol.md §1, "What a decoder must do"):
// framing (LF, CRLF, blank lines, BOM, final line), any chunking, the line
// limit, and property tests that every chunking decodes alike.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ExecEvent } from "../types.js";
import { ExecWireDecoder, type ExecWireError, encodeExecEvent } from "./index.js";
import {
  bytes,
  chunkAt,
  concat,
  decodeAll,
  eventsArb,
  idArb,
  norm,
  oneByteChunks,
  td,
  WIRE_EVENTS,
  WIRE_EXAMPLE,
} from "./test-support/fixtures.js";

describe("exec-wire decoding: framing obligations", () => {
  it("interop: decodes the example frames of docs/protocol.md §1 to the expected events", () => {
    expect(decodeAll([bytes(WIRE_EXAMPLE)]).events).toEqual(WIRE_EVENTS);
  });

  it("gives utf8 values as strings and b64 values as Uint8Array", () => {
    const [a, b] = decodeAll([bytes(WIRE_EXAMPLE)]).events;
    expect(typeof a!.value).toBe("string");
    expect(b!.value).toBeInstanceOf(Uint8Array);
  });

  it("option values: 'bytes' gives every output value as Uint8Array", () => {
    const { events } = decodeAll([bytes(WIRE_EXAMPLE)], { values: "bytes" });
    expect(events[0]!.value).toEqual(bytes("hello\n"));
    expect(events[1]!.value).toEqual(Uint8Array.of(0, 255, 254));
  });

  it("accepts CRLF line ends", () => {
    expect(decodeAll([bytes(WIRE_EXAMPLE.replaceAll("\n", "\r\n"))]).events).toEqual(WIRE_EVENTS);
  });

  it("skips blank lines (empty, CR only, JSON whitespace only) but counts them", () => {
    const text = `\n\r\n  \t\n${WIRE_EXAMPLE.split("\n").join("\n\n")}{bad}\n`;
    const { events, error } = decodeAll([bytes(text)]);
    expect(events).toEqual(WIRE_EVENTS);
    expect(error?.line).toBe(10);
  });

  it("skips one UTF-8 BOM at the very start, also when split across chunks", () => {
    const withBom = concat([Uint8Array.of(0xef, 0xbb, 0xbf), bytes(WIRE_EXAMPLE)]);
    expect(decodeAll([withBom]).events).toEqual(WIRE_EVENTS);
    expect(decodeAll(oneByteChunks(withBom)).events).toEqual(WIRE_EVENTS);
  });

  it("does not skip a second BOM, nor a BOM that is not at the start", () => {
    const bom = Uint8Array.of(0xef, 0xbb, 0xbf);
    const two = decodeAll([concat([bom, bom, bytes(WIRE_EXAMPLE)])]);
    expect(two.error?.code).toBe("EINVAL");
    expect(two.error?.line).toBe(1);
    const later = decodeAll([concat([bytes(WIRE_EXAMPLE), bom, bytes(WIRE_EXAMPLE)])]);
    expect(later.events).toEqual(WIRE_EVENTS);
    expect(later.error?.line).toBe(4);
  });

  it("decodes a final line without a trailing newline at end of stream", () => {
    const text = WIRE_EXAMPLE.slice(0, -1);
    expect(decodeAll([bytes(text)]).events).toEqual(WIRE_EVENTS);
    expect(decodeAll(oneByteChunks(bytes(text))).events).toEqual(WIRE_EVENTS);
  });

  it("decodes heartbeat frames as events", () => {
    const line =
      '{"id":"r1","seq":3,"name":"heartbeat","value":{"pid":42,"elapsedMs":1000,"lastOutputMs":250}}\n';
    expect(decodeAll([bytes(line)]).events).toEqual([
      {
        id: "r1",
        seq: 3,
        name: "heartbeat",
        value: { pid: 42, elapsedMs: 1000, lastOutputMs: 250 },
      },
    ]);
  });

  it("carries signal and reason through on exit", () => {
    const line =
      '{"id":"r1","seq":5,"name":"exit","value":137,"signal":"SIGKILL","reason":"killed"}\n';
    expect(decodeAll([bytes(line)]).events).toEqual([
      { id: "r1", seq: 5, name: "exit", value: 137, signal: "SIGKILL", reason: "killed" },
    ]);
  });

  it("ignores unknown fields (any position) and never errors on them", () => {
    const lines =
      '{"x":1,"id":"r1","seq":1,"name":"stdout","enc":"utf8","value":"a","extra":{"n":[1]}}\n' +
      '{"id":"r1","seq":2,"name":"exit","value":0,"enc":"utf8","future":true}\n';
    expect(decodeAll([bytes(lines)]).events).toEqual([
      { id: "r1", seq: 1, name: "stdout", value: "a" },
      { id: "r1", seq: 2, name: "exit", value: 0 },
    ]);
  });

  it("accepts the fields in any order and with whitespace (the generic path)", () => {
    const line =
      ' { "value" : "a\\u00e9" , "enc":"utf8", "name":"stderr", "seq": 7, "id": "r\\"1" } \n';
    expect(decodeAll([bytes(line)]).events).toEqual([
      { id: 'r"1', seq: 7, name: "stderr", value: "aé" },
    ]);
  });

  it("skips an unknown frame name that carries an id, and reports it to onUnknownFrame", () => {
    const seen: [unknown, number][] = [];
    const text = `{"id":"r1","seq":1,"name":"progress","value":0.5}\n${WIRE_EXAMPLE}`;
    const { events, error } = decodeAll([bytes(text)], {
      onUnknownFrame: (f, line) => seen.push([f.name, line]),
    });
    expect(error).toBeUndefined();
    expect(events).toEqual(WIRE_EVENTS);
    expect(seen).toEqual([["progress", 1]]);
  });

  it("replaces invalid UTF-8 inside a utf8 frame with U+FFFD (lenient, chunking-independent)", () => {
    const all = concat([
      bytes('{"id":"r1","seq":1,"name":"stdout","enc":"utf8","value":"a'),
      Uint8Array.of(0xe2, 0x82),
      bytes('b"}\n'),
    ]);
    const expected = [{ id: "r1", seq: 1, name: "stdout", value: "a\ufffdb" }];
    expect(decodeAll([all]).events).toEqual(expected);
    expect(decodeAll(oneByteChunks(all)).events).toEqual(expected);
  });

  it("decodes one huge line delivered one byte at a time (linear buffering)", () => {
    const value = "x".repeat(256 * 1024);
    const all = encodeExecEvent({ id: "r1", seq: 1, name: "stdout", value });
    const d = new ExecWireDecoder();
    const events: ExecEvent[] = [];
    const one = new Uint8Array(1);
    for (let i = 0; i < all.length; i++) {
      one[0] = all[i]!; // the same buffer reused for every chunk: we must copy
      events.push(...d.push(one));
    }
    events.push(...d.end());
    expect(events).toEqual([{ id: "r1", seq: 1, name: "stdout", value }]);
  });

  it("ignores empty chunks", () => {
    const all = bytes(WIRE_EXAMPLE);
    const chunks = [new Uint8Array(0), all.slice(0, 10), new Uint8Array(0), all.slice(10)];
    expect(decodeAll(chunks).events).toEqual(WIRE_EVENTS);
  });
});

// ---------------------------------------------------------------------------

describe("exec-wire decoding: line limit", () => {
  const long = `{"id":"r1","seq":1,"name":"stdout","enc":"utf8","value":"${"y".repeat(200)}"}`;

  it("a line over maxLineBytes is ELIMIT with its line number, in any chunking", () => {
    const text = `${WIRE_EXAMPLE}${long}\n`;
    for (const chunks of [
      [bytes(text)],
      oneByteChunks(bytes(text)),
      chunkAt(bytes(text), [150, 170]),
    ]) {
      const { events, error } = decodeAll(chunks, { maxLineBytes: 100 });
      expect(events).toEqual(WIRE_EVENTS);
      expect(error!.code).toBe("ELIMIT");
      expect(error!.line).toBe(4);
      expect(error!.excerpt).toBe(long.slice(0, 101));
    }
  });

  it("ELIMIT is raised by the push that makes the line too long, with that chunk's earlier events", () => {
    const d = new ExecWireDecoder({ maxLineBytes: 100 });
    // One chunk: three complete lines, then 150 bytes of a line with no LF yet.
    const chunk = bytes(`${WIRE_EXAMPLE}${long.slice(0, 150)}`);
    let caught: ExecWireError | undefined;
    try {
      d.push(chunk);
    } catch (err) {
      caught = err as ExecWireError;
    }
    expect(caught?.code).toBe("ELIMIT");
    expect(caught?.events).toEqual(WIRE_EVENTS);
    // Later calls throw it again, without delivering the events twice.
    expect(() => d.push(bytes("x\n"))).toThrow(/maxLineBytes/);
    try {
      d.end();
    } catch (err) {
      expect((err as ExecWireError).events).toBeUndefined();
    }
  });

  it("a line of exactly maxLineBytes passes, with LF or CRLF", () => {
    const line = WIRE_EXAMPLE.split("\n")[0]!;
    const max = bytes(line).length;
    expect(decodeAll([bytes(`${line}\r\n`)], { maxLineBytes: max }).events).toHaveLength(1);
    expect(
      decodeAll(oneByteChunks(bytes(`${line}\r\n`)), { maxLineBytes: max }).events,
    ).toHaveLength(1);
  });

  it("with onError, an over-long line is skipped and decoding continues", () => {
    const errors: ExecWireError[] = [];
    const text = `${long}\n${WIRE_EXAMPLE}`;
    const { events } = decodeAll(oneByteChunks(bytes(text)), {
      maxLineBytes: 100,
      onError: (e) => errors.push(e),
    });
    expect(events).toEqual(WIRE_EVENTS);
    expect(errors.map((e) => [e.code, e.line])).toEqual([["ELIMIT", 1]]);
  });
});

// ---------------------------------------------------------------------------

describe("push decoder properties", () => {
  it("random events x random chunkings round-trip exactly (push API, CRLF and BOM variants)", () => {
    fc.assert(
      fc.property(
        eventsArb,
        fc.array(fc.nat(), { maxLength: 25 }),
        fc.boolean(),
        fc.boolean(),
        (events, cuts, crlf, bom) => {
          let all = concat(events.map(encodeExecEvent));
          if (crlf) all = bytes(td.decode(all).replaceAll("\n", "\r\n"));
          if (bom) all = concat([Uint8Array.of(0xef, 0xbb, 0xbf), all]);
          const { events: out, error } = decodeAll(chunkAt(all, cuts));
          expect(error).toBeUndefined();
          expect(norm(out)).toEqual(norm(events));
        },
      ),
      { numRuns: 100 },
    );
  });

  it("every-single-byte chunking gives the same events as one chunk", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({
              id: idArb,
              name: fc.constant("stdout"),
              value: fc.string({ unit: "binary", maxLength: 30 }),
            }),
            fc.record({
              id: idArb,
              name: fc.constant("stderr"),
              value: fc.uint8Array({ maxLength: 30 }),
            }),
          ),
          { maxLength: 6 },
        ),
        (drafts) => {
          const events = drafts.map((d, i) => ({ ...d, seq: i + 1 }) as ExecEvent);
          const all = concat(events.map(encodeExecEvent));
          expect(decodeAll(oneByteChunks(all)).events).toEqual(events);
        },
      ),
      { numRuns: 60 },
    );
  });

  it("the byte fast path for long b64 frames gives the JSON.parse path's results on any line, in any chunking", () => {
    // Long raw-byte frames (>= 1 KiB, the byte path's threshold), then random
    // byte edits of them (including bytes 0x80-0xFF and parts of UTF-8
    // sequences), fed whole and split so that both the line-by-line region
    // path and the pending-line path are exercised.
    const longFrame = fc
      .record({
        id: fc.oneof(fc.constantFrom("r1", "exec-7", "é", "a\\b"), fc.string({ maxLength: 12 })),
        seq: fc.integer({ min: 1, max: 2 ** 40 }),
        name: fc.constantFrom("stdout" as const, "stderr" as const),
        value: fc.uint8Array({ minLength: 770, maxLength: 3000 }),
      })
      .map((ev) => encodeExecEvent(ev as ExecEvent).subarray(0, -1));
    const mutated = fc
      .tuple(longFrame, fc.nat(), fc.integer({ min: 0, max: 255 }), fc.boolean())
      .map(([line, pos, byte, insert]) => {
        const p = pos % (line.length + 1);
        const head = line.subarray(0, p);
        const tail = line.subarray(insert ? p : p + 1);
        return concat([head, Uint8Array.of(byte), tail]);
      });
    const lineArb = fc.oneof(longFrame, mutated, mutated, mutated);
    fc.assert(
      fc.property(
        fc.array(lineArb, { minLength: 1, maxLength: 5 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.boolean(),
        (lines, cut, crlf) => {
          const eol = bytes(crlf ? "\r\n" : "\n");
          const all = concat(lines.flatMap((l) => [l, eol]));
          const chunkings = [[all], [all.subarray(0, cut), all.subarray(cut)]];
          for (const chunks of chunkings) {
            const outcome = (fastPath: boolean) => {
              const errors: [string, number, string][] = [];
              const r = decodeAll(chunks, {
                fastPath,
                onError: (e) => errors.push([e.code, e.line, e.excerpt]),
              });
              return { events: r.events, errors, fatal: r.error && [r.error.code, r.error.line] };
            };
            expect(outcome(true)).toEqual(outcome(false));
          }
        },
      ),
      // Shrinking kilobyte-long lines takes minutes: report the first failure as is.
      { numRuns: 300, endOnFailure: true },
    );
  });
});
