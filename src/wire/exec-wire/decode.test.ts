// Tests for decoding one line (docs/protocol.md §1, "What a decoder must
// do", 4-6): malformed-line diagnostics, producer error frames, and the
// properties that the canonical-shape scanner answers exactly as the
// JSON.parse path and that decodeExecFrame decodes a frame as the stream does.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ExecEvent } from "../types.js";
import {
  decodeExecEvents,
  decodeExecFrame,
  ExecWireDecoder,
  ExecWireError,
  encodeErrorFrame,
  encodeExecEvent,
} from "./index.js";
import {
  bytes,
  collect,
  concat,
  decodeAll,
  norm,
  oneByteChunks,
  smallEventArb,
  streamOf,
  td,
  WIRE_EXAMPLE,
} from "./test-support/fixtures.js";

describe("exec-wire decoding: malformed lines", () => {
  const good = '{"id":"r1","seq":1,"name":"stdout","enc":"utf8","value":"ok"}\n';

  it.each([
    ["invalid JSON", '{"id":"r1","seq":2,"name":"stdout"', "invalid JSON"],
    ["a JSON array", "[1,2]", "object"],
    ["unknown name with no id", '{"seq":2,"name":"progress","value":1}', "unknown name"],
    ["missing name", '{"id":"r1","seq":2,"value":1}', "name"],
    ["missing id", '{"seq":2,"name":"stdout","enc":"utf8","value":"x"}', "id"],
    ["missing enc", '{"id":"r1","seq":2,"name":"stdout","value":"x"}', "missing `enc`"],
    ["unknown enc", '{"id":"r1","seq":2,"name":"stdout","enc":"hex","value":"00"}', "enc"],
    [
      "bad base64 (invalid char)",
      '{"id":"r1","seq":2,"name":"stdout","enc":"b64","value":"AP*+"}',
      "base64",
    ],
    [
      "bad base64 (missing padding)",
      '{"id":"r1","seq":2,"name":"stdout","enc":"b64","value":"Zg"}',
      "base64",
    ],
    [
      "bad base64 (pad bits)",
      '{"id":"r1","seq":2,"name":"stdout","enc":"b64","value":"Zh=="}',
      "base64",
    ],
    [
      "bad base64 (URL-safe)",
      '{"id":"r1","seq":2,"name":"stdout","enc":"b64","value":"AB-_"}',
      "base64",
    ],
    [
      "bad base64 (whitespace)",
      '{"id":"r1","seq":2,"name":"stdout","enc":"b64","value":"Zm9v Zm8="}',
      "base64",
    ],
    ["non-integer seq", '{"id":"r1","seq":2.5,"name":"stdout","enc":"utf8","value":"x"}', "seq"],
    ["string seq", '{"id":"r1","seq":"2","name":"stdout","enc":"utf8","value":"x"}', "seq"],
    ["negative seq", '{"id":"r1","seq":-2,"name":"stdout","enc":"utf8","value":"x"}', "seq"],
    [
      "non-string output value",
      '{"id":"r1","seq":2,"name":"stdout","enc":"utf8","value":5}',
      "value",
    ],
    ["non-integer exit code", '{"id":"r1","seq":2,"name":"exit","value":"0"}', "exit"],
    ["non-string signal", '{"id":"r1","seq":2,"name":"exit","value":1,"signal":9}', "signal"],
    [
      "heartbeat without value object",
      '{"id":"r1","seq":2,"name":"heartbeat","value":1}',
      "heartbeat",
    ],
  ])("%s: EINVAL naming the line number and quoting the line", (_why, bad, inMessage) => {
    const text = `${good}\n${bad}\n${good}`;
    for (const chunks of [[bytes(text)], oneByteChunks(bytes(text))]) {
      const { events, error } = decodeAll(chunks);
      expect(events).toEqual([{ id: "r1", seq: 1, name: "stdout", value: "ok" }]);
      expect(error).toBeInstanceOf(ExecWireError);
      expect(error!.code).toBe("EINVAL");
      expect(error!.line).toBe(3); // the blank line 2 is counted
      expect(error!.excerpt).toBe(bad);
      expect(error!.message).toContain(inMessage);
      expect(error!.message).toContain("line 3");
    }
  });

  it("rejects a raw invalid byte inside a b64 value (U+FFFD is not base64), in any chunking", () => {
    const all = concat([
      bytes('{"id":"r1","seq":1,"name":"stdout","enc":"b64","value":"AP'),
      Uint8Array.of(0x80),
      bytes('+"}\n'),
    ]);
    for (const chunks of [[all], oneByteChunks(all)]) {
      const { error } = decodeAll(chunks);
      expect(error?.code).toBe("EINVAL");
      expect(error?.message).toContain("base64");
    }
  });

  it("quotes at most 120 characters of a long malformed line", () => {
    const bad = `{"id":"${"é".repeat(300)}`;
    const { error } = decodeAll([bytes(`${bad}\n`)]);
    expect(error!.line).toBe(1);
    expect(error!.excerpt).toBe(bad.slice(0, 120));
  });

  it("never splits a surrogate pair in the excerpt", () => {
    const bad = `${"x".repeat(119)}😀 and more`;
    const { error } = decodeAll([bytes(bad)]);
    expect(error!.excerpt).toBe("x".repeat(119));
  });

  it("onError reports each malformed line and decoding continues with the next", () => {
    const errors: ExecWireError[] = [];
    const text = `${good}nope\n${good}{"id":"r1","seq":1.5,"name":"exit","value":0}\n${good}`;
    const { events, error } = decodeAll([bytes(text)], { onError: (e) => errors.push(e) });
    expect(error).toBeUndefined();
    expect(events).toHaveLength(3);
    expect(errors.map((e) => [e.code, e.line, e.excerpt])).toEqual([
      ["EINVAL", 2, "nope"],
      ["EINVAL", 4, '{"id":"r1","seq":1.5,"name":"exit","value":0}'],
    ]);
  });

  it("push throws the failure at once, with the events before it; later calls keep throwing", () => {
    const d = new ExecWireDecoder();
    let caught: ExecWireError | undefined;
    try {
      d.push(bytes(`${good}oops\n${good}`));
    } catch (err) {
      caught = err as ExecWireError;
    }
    expect(caught).toMatchObject({ code: "EINVAL", line: 2 });
    expect(caught!.events).toHaveLength(1);
    expect(() => d.push(bytes(good))).toThrow(ExecWireError);
    expect(() => d.end()).toThrow(expect.objectContaining({ code: "EINVAL", line: 2 }));
  });

  it("push throws at once when the failing chunk completed no events", () => {
    const d = new ExecWireDecoder();
    expect(() => d.push(bytes("oops\n"))).toThrow(expect.objectContaining({ line: 1 }));
  });

  it("the stream errors after delivering every event before the bad line", async () => {
    const { items, error } = await collect(
      decodeExecEvents(streamOf([bytes(`${good}${good}x\n${good}`)])),
    );
    expect(items).toHaveLength(2);
    expect(error).toBeInstanceOf(ExecWireError);
    expect(error!.line).toBe(3);
  });
});

// ---------------------------------------------------------------------------

describe("exec-wire: producer error frames", () => {
  const frame = encodeErrorFrame({
    name: "error",
    code: "ELOG_TRUNCATED",
    message: "events before 5 were dropped",
    earliestSeq: 5,
  });

  it("surfaces as an ExecWireError with the frame's code and earliestSeq, not as an event", async () => {
    const src = concat([bytes(WIRE_EXAMPLE.split("\n")[0]!), bytes("\n"), frame]);
    const { items, error } = await collect(decodeExecEvents(streamOf([src])));
    expect(items).toHaveLength(1);
    expect(error).toBeInstanceOf(ExecWireError);
    expect(error!.code).toBe("ELOG_TRUNCATED");
    expect(error!.earliestSeq).toBe(5);
    expect(error!.message).toBe("events before 5 were dropped");
    expect(error!.line).toBe(2);
    expect(error!.frame).toMatchObject({ name: "error", code: "ELOG_TRUNCATED" });
  });

  it("ends the stream even with onError, ignoring anything after it", async () => {
    const errors: unknown[] = [];
    const src = concat([frame, bytes(WIRE_EXAMPLE)]);
    const { items, error } = await collect(
      decodeExecEvents(streamOf([src]), { onError: (e) => errors.push(e) }),
    );
    expect(items).toEqual([]);
    expect(error!.code).toBe("ELOG_TRUNCATED");
    expect(errors).toEqual([]);
  });

  it("cancels the source when it ends the stream", async () => {
    let cancelled: unknown = "no";
    const src = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(frame);
      },
      cancel(reason) {
        cancelled = reason;
      },
    });
    const { error } = await collect(decodeExecEvents(src));
    expect(error!.code).toBe("ELOG_TRUNCATED");
    expect(cancelled).toBe(error);
  });
});

// ---------------------------------------------------------------------------

describe("line decoding properties", () => {
  it("the fast path and the JSON.parse path give identical results on any line", () => {
    // Canonical lines, then random single-character edits of them (which
    // probe every early exit of the fast path), plus arbitrary strings.
    const canonical = smallEventArb.map((d) =>
      td.decode(encodeExecEvent({ ...d, seq: 3 } as ExecEvent)).slice(0, -1),
    );
    const mutated = fc
      .tuple(
        canonical,
        fc.nat(),
        fc.constantFrom('"', "\\", "}", "0", "a", " ", "\u0001", "é", "-", "=", "1"),
        fc.boolean(),
      )
      .map(([line, pos, ch, insert]) => {
        const p = pos % (line.length + 1);
        return line.slice(0, p) + ch + line.slice(insert ? p : p + 1);
      });
    const lineArb = fc.oneof(canonical, mutated, mutated, fc.string({ maxLength: 80 }));
    fc.assert(
      fc.property(fc.array(lineArb, { minLength: 1, maxLength: 8 }), (lines) => {
        const all = bytes(`${lines.join("\n")}\n`);
        const outcome = (fastPath: boolean) => {
          const errors: [string, number, string][] = [];
          const r = decodeAll([all], {
            fastPath,
            onError: (e) => errors.push([e.code, e.line, e.excerpt]),
          });
          return { events: r.events, errors, fatal: r.error && [r.error.code, r.error.line] };
        };
        expect(outcome(true)).toEqual(outcome(false));
      }),
      { numRuns: 300 },
    );
  });

  it("decodeExecFrame decodes one frame's text exactly as the stream decoder decodes that line", () => {
    const canonical = smallEventArb.map((d) =>
      td.decode(encodeExecEvent({ ...d, seq: 5 } as ExecEvent)).slice(0, -1),
    );
    const mutated = fc
      .tuple(
        canonical,
        fc.nat(),
        fc.constantFrom('"', "\\", "}", "0", "a", " ", "é", "="),
        fc.boolean(),
      )
      .map(([line, pos, ch, insert]) => {
        const p = pos % (line.length + 1);
        return line.slice(0, p) + ch + line.slice(insert ? p : p + 1);
      });
    const special = fc.constantFrom(
      '{"id":"r1","name":"error","code":"ELOG_TRUNCATED","message":"gone","earliestSeq":7}',
      '{"id":"r1","seq":2,"name":"future-thing","value":1}',
      '{"id":"r1","seq":3,"name":"exit","value":0,"reason":"exited"}',
      "",
    );
    fc.assert(
      fc.property(fc.oneof(canonical, mutated, special), (raw) => {
        // What the wire can carry: lone surrogates become U+FFFD on the way to bytes.
        const line = td.decode(bytes(raw));
        const streamed = (() => {
          try {
            const events = new ExecWireDecoder().push(bytes(`${line}\n`));
            return { events };
          } catch (e) {
            const err = e as ExecWireError;
            return { code: err.code, line: err.line, earliestSeq: err.earliestSeq };
          }
        })();
        const single = (() => {
          try {
            const ev = decodeExecFrame(line);
            return { events: ev === null ? [] : [ev] };
          } catch (e) {
            const err = e as ExecWireError;
            return { code: err.code, line: err.line, earliestSeq: err.earliestSeq };
          }
        })();
        expect(single).toEqual(streamed);
      }),
      { numRuns: 400 },
    );
  });

  it("decodeExecFrame decodes a long frame (scanned from a head of its bytes) exactly as the stream decoder", () => {
    // Frames over 21,845 characters are not encoded whole for the scanner:
    // long text and b64 values, then random single-character edits anywhere.
    const longLine = fc
      .record({
        id: fc.oneof(fc.constantFrom("r1", "é", 'a"b'), fc.string({ maxLength: 12 })),
        name: fc.constantFrom("stdout" as const, "stderr" as const),
        value: fc.oneof(
          fc.string({ unit: "binary", minLength: 22_000, maxLength: 26_000 }),
          fc.string({ minLength: 22_000, maxLength: 26_000 }),
          fc.uint8Array({ minLength: 16_500, maxLength: 20_000 }),
        ),
      })
      .map((d) => td.decode(encodeExecEvent({ ...d, seq: 9 } as ExecEvent)).slice(0, -1));
    const mutated = fc
      .tuple(
        longLine,
        fc.nat(),
        fc.constantFrom('"', "\\", "}", "0", "a", " ", "é", "="),
        fc.boolean(),
      )
      .map(([line, pos, ch, insert]) => {
        // Edits land in the head (the structure) as often as in the value.
        const p = pos % 2 === 0 ? (pos >> 1) % 80 : pos % (line.length + 1);
        return line.slice(0, p) + ch + line.slice(insert ? p : p + 1);
      });
    const outcome = (f: () => ExecEvent[]) => {
      try {
        return { events: norm(f()) };
      } catch (e) {
        const err = e as ExecWireError;
        return { code: err.code, line: err.line };
      }
    };
    fc.assert(
      fc.property(fc.oneof(longLine, mutated, mutated), (raw) => {
        // What the wire can carry: lone surrogates become U+FFFD on the way to bytes.
        const line = td.decode(bytes(raw));
        const streamed = outcome(() => new ExecWireDecoder().push(bytes(`${line}\n`)));
        const single = outcome(() => {
          const ev = decodeExecFrame(line);
          return ev === null ? [] : [ev];
        });
        expect(single).toEqual(streamed);
      }),
      { numRuns: 60, endOnFailure: true },
    );
  });
});
