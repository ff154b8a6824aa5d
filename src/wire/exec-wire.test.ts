// Tests for exec-wire (WIRE.md §1): one named test per rule, property tests
// for chunking independence and round trips, malformed-line diagnostics, and
// interop with the spec's example frames byte for byte.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  decodeExecEvents,
  decodeExecFrame,
  type ExecWireDecodeOptions,
  ExecWireDecoder,
  ExecWireError,
  encodeErrorFrame,
  encodeExecEvent,
  encodeExecEvents,
  frameToJson,
} from "./exec-wire.js";
import type { ExecEvent } from "./types.js";

const te = new TextEncoder();
const td = new TextDecoder();
const bytes = (s: string) => te.encode(s);

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function chunkAt(all: Uint8Array, cuts: number[]): Uint8Array[] {
  const points = [...new Set(cuts.map((c) => c % (all.length + 1)))].sort((a, b) => a - b);
  const out: Uint8Array[] = [];
  let prev = 0;
  for (const p of points) {
    out.push(all.slice(prev, p));
    prev = p;
  }
  out.push(all.slice(prev));
  return out;
}

function oneByteChunks(all: Uint8Array): Uint8Array[] {
  return Array.from(all, (b) => Uint8Array.of(b));
}

/** Push API: decode chunks, collecting events and errors (push/end throw on failure). */
function decodeAll(
  chunks: Uint8Array[],
  options?: ExecWireDecodeOptions,
): { events: ExecEvent[]; error?: ExecWireError } {
  const d = new ExecWireDecoder(options);
  const events: ExecEvent[] = [];
  try {
    for (const c of chunks) events.push(...d.push(c));
    events.push(...d.end());
  } catch (err) {
    return { events, error: err as ExecWireError };
  }
  return { events };
}

function streamOf(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream({
    pull(c) {
      if (i < chunks.length) c.enqueue(chunks[i++]!);
      else c.close();
    },
  });
}

async function collect<T>(
  iterable: AsyncIterable<T>,
): Promise<{ items: T[]; error?: ExecWireError }> {
  const items: T[] = [];
  try {
    for await (const x of iterable) items.push(x);
  } catch (err) {
    return { items, error: err as ExecWireError };
  }
  return { items };
}

// The three frames of WIRE.md §1, exactly as printed there.
const WIRE_EXAMPLE =
  '{"id":"r1","seq":1,"name":"stdout","enc":"utf8","value":"hello\\n"}\n' +
  '{"id":"r1","seq":2,"name":"stderr","enc":"b64","value":"AP/+"}\n' +
  '{"id":"r1","seq":3,"name":"exit","value":0}\n';
const WIRE_EVENTS: ExecEvent[] = [
  { id: "r1", seq: 1, name: "stdout", value: "hello\n" },
  { id: "r1", seq: 2, name: "stderr", value: Uint8Array.of(0x00, 0xff, 0xfe) },
  { id: "r1", seq: 3, name: "exit", value: 0 },
];

// ---------------------------------------------------------------------------

describe("exec-wire encoding", () => {
  it("interop: our bytes equal WIRE.md's example frames exactly", () => {
    const ours = concat(WIRE_EVENTS.map(encodeExecEvent));
    expect(td.decode(ours)).toBe(WIRE_EXAMPLE);
    expect(ours).toEqual(bytes(WIRE_EXAMPLE));
  });

  it("writes keys in the order id, seq, name, enc, value, then signal, reason; compact", () => {
    const line = td.decode(
      encodeExecEvent({
        id: "x",
        seq: 9,
        name: "exit",
        value: 137,
        reason: "killed",
        signal: "SIGKILL",
      }),
    );
    expect(line).toBe(
      '{"id":"x","seq":9,"name":"exit","value":137,"signal":"SIGKILL","reason":"killed"}\n',
    );
  });

  it("gives a string value enc utf8 and a Uint8Array value enc b64 (standard, padded)", () => {
    expect(frameToJson({ id: "a", seq: 1, name: "stdout", value: "hi" })).toBe(
      '{"id":"a","seq":1,"name":"stdout","enc":"utf8","value":"hi"}',
    );
    expect(frameToJson({ id: "a", seq: 2, name: "stderr", value: bytes("f") })).toBe(
      '{"id":"a","seq":2,"name":"stderr","enc":"b64","value":"Zg=="}',
    );
    expect(frameToJson({ id: "a", seq: 3, name: "stdout", value: new Uint8Array(0) })).toBe(
      '{"id":"a","seq":3,"name":"stdout","enc":"b64","value":""}',
    );
  });

  it("frameToJson is the line without its newline", () => {
    for (const ev of WIRE_EVENTS)
      expect(`${frameToJson(ev)}\n`).toBe(td.decode(encodeExecEvent(ev)));
  });

  it("encodes a heartbeat with value keys pid, elapsedMs, lastOutputMs", () => {
    const hb: ExecEvent = {
      id: "r1",
      seq: 4,
      name: "heartbeat",
      value: { lastOutputMs: 3, elapsedMs: 2, pid: 1 },
    };
    expect(frameToJson(hb)).toBe(
      '{"id":"r1","seq":4,"name":"heartbeat","value":{"pid":1,"elapsedMs":2,"lastOutputMs":3}}',
    );
  });

  it("encodes an error frame: id first when present, then name, code, message, earliestSeq", () => {
    expect(
      td.decode(
        encodeErrorFrame({
          name: "error",
          code: "ELOG_TRUNCATED",
          message: "gone",
          earliestSeq: 7,
        }),
      ),
    ).toBe('{"name":"error","code":"ELOG_TRUNCATED","message":"gone","earliestSeq":7}\n');
    expect(
      td.decode(encodeErrorFrame({ id: "r1", name: "error", code: "ENOENT", message: "no" })),
    ).toBe('{"id":"r1","name":"error","code":"ENOENT","message":"no"}\n');
  });

  it("writes astral characters as UTF-8 and lone surrogates as \\u escapes (always valid UTF-8)", () => {
    const line = encodeExecEvent({ id: "🌍", seq: 1, name: "stdout", value: "a\ud800b😀" });
    expect(td.decode(line)).toBe(
      '{"id":"🌍","seq":1,"name":"stdout","enc":"utf8","value":"a\\ud800b😀"}\n',
    );
    expect(new TextDecoder("utf-8", { fatal: true }).decode(line)).toBeTypeOf("string");
  });

  it.each([
    ["non-string id", { id: 1, seq: 1, name: "stdout", value: "x" }],
    ["fractional seq", { id: "a", seq: 1.5, name: "stdout", value: "x" }],
    ["negative seq", { id: "a", seq: -1, name: "stdout", value: "x" }],
    ["unknown name", { id: "a", seq: 1, name: "nope", value: "x" }],
    ["non-integer exit", { id: "a", seq: 1, name: "exit", value: 1.5 }],
    ["number as output", { id: "a", seq: 1, name: "stdout", value: 5 }],
  ])("refuses to encode an invalid event (%s) with EINVAL", (_why, ev) => {
    expect(() => encodeExecEvent(ev as unknown as ExecEvent)).toThrow(
      expect.objectContaining({ code: "EINVAL" }),
    );
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

// ---------------------------------------------------------------------------

describe("exec-wire decoding: framing obligations", () => {
  it("interop: decodes WIRE.md's example frames to the expected events", () => {
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

  it("push returns the events before a failure; the next call throws it, and keeps throwing", () => {
    const d = new ExecWireDecoder();
    const evs = d.push(bytes(`${good}oops\n${good}`));
    expect(evs).toHaveLength(1);
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
});

// ---------------------------------------------------------------------------
// Property tests

// Text with astral characters and lone surrogates (JSON escapes those).
const smallTextArb = fc.oneof(
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 20 }),
  fc.constantFrom("", "\n", "a\ud800b", "\udc00", "😀\r\n", '"\\/\t\u0000\u001f', "\u2028\u2029"),
);
const smallBytesArb = fc.oneof(fc.uint8Array({ maxLength: 200 }), fc.constant(new Uint8Array(0)));
// Huge chunks (bigger than typical chunkings) are rarer to keep runs quick.
const textArb = fc.oneof(
  { weight: 6, arbitrary: smallTextArb },
  { weight: 1, arbitrary: fc.string({ unit: "binary", minLength: 3000, maxLength: 12000 }) },
);
const bytesArb = fc.oneof(
  { weight: 6, arbitrary: smallBytesArb },
  { weight: 1, arbitrary: fc.uint8Array({ minLength: 20000, maxLength: 70000 }) },
);
const idArb = fc.oneof(fc.constant("exec_1"), fc.string({ unit: "binary", maxLength: 12 }));

type Draft = Omit<ExecEvent, "seq">;
const eventArbOf = (text: fc.Arbitrary<string>, bin: fc.Arbitrary<Uint8Array>) =>
  fc.oneof(
    {
      weight: 4,
      arbitrary: fc.record({ id: idArb, name: fc.constantFrom("stdout", "stderr"), value: text }),
    },
    {
      weight: 4,
      arbitrary: fc.record({ id: idArb, name: fc.constantFrom("stdout", "stderr"), value: bin }),
    },
    {
      weight: 1,
      arbitrary: fc.record(
        {
          id: idArb,
          name: fc.constant("exit"),
          value: fc.integer({ min: -1, max: 255 }),
          signal: fc.constantFrom("SIGKILL", "SIGTERM"),
          reason: fc.constantFrom("exited", "killed", "timeout", "lost"),
        },
        { requiredKeys: ["id", "name", "value"] },
      ),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        id: idArb,
        name: fc.constant("heartbeat"),
        value: fc.record({ pid: fc.nat(), elapsedMs: fc.nat(), lastOutputMs: fc.nat() }),
      }),
    },
  ) as fc.Arbitrary<Draft>;
const eventArb = eventArbOf(textArb, bytesArb);
const smallEventArb = eventArbOf(smallTextArb, smallBytesArb);

const eventsArb = fc
  .array(eventArb, { maxLength: 10 })
  .map((drafts) => drafts.map((d, i) => ({ ...d, seq: i + 1 }) as ExecEvent));

/** Deep-equality on big byte arrays is slow in the matcher: compare base64 text instead. */
const norm = (events: ExecEvent[]) =>
  events.map((e) =>
    e.value instanceof Uint8Array
      ? { ...e, value: `bytes:${Buffer.from(e.value).toString("base64")}` }
      : e,
  );

describe("exec-wire properties", () => {
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

  it("the byte-level frame writer equals UTF-8 of JSON.stringify-based frameToJson (any text)", () => {
    const anyText = fc.oneof(
      fc.string({ unit: "binary", maxLength: 60 }),
      fc.string({
        unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
        maxLength: 40,
      }),
      fc.string({
        unit: fc.constantFrom(
          "\u0000",
          "\u001f",
          "\u007f",
          '"',
          "\\",
          "\ud800",
          "\udfff",
          "é",
          "€",
          "😀",
        ),
        maxLength: 30,
      }),
      fc.string({ unit: "binary", minLength: 2000, maxLength: 5000 }),
    );
    fc.assert(
      fc.property(
        idArb,
        fc.nat({ max: Number.MAX_SAFE_INTEGER }),
        fc.constantFrom("stdout" as const, "stderr" as const),
        fc.oneof(
          anyText,
          fc.uint8Array({ maxLength: 3000 }),
          fc.uint8Array({ minLength: 13000, maxLength: 30000 }),
        ),
        (id, seq, name, value) => {
          const ev = { id, seq, name, value } as ExecEvent;
          expect(td.decode(encodeExecEvent(ev))).toBe(`${frameToJson(ev)}\n`);
          expect(Array.from(encodeExecEvent(ev))).toEqual(
            Array.from(te.encode(`${frameToJson(ev)}\n`)),
          );
        },
      ),
      { numRuns: 400 },
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
