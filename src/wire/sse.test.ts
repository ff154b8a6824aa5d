// Tests for the SSE codec (docs/protocol.md §2): one named test per WHATWG
// event-stream rule, then property tests that format → parse round-trips
// exactly for random events under random chunkings (text and bytes), and for
// every-single-byte chunking.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { hasCode } from "./errors.js";
import {
  createSseParser,
  formatSseComment,
  formatSseEvent,
  formatSseIdOnly,
  type SseEvent,
  type SseEventInit,
  SseParserStream,
  Utf8ChunkDecoder,
} from "./sse.js";

const enc = new TextEncoder();

interface Collected {
  events: SseEvent[];
  retries: number[];
  comments: string[];
}

/** Parses `chunks` as one stream (then end()) and returns everything the callbacks saw. */
function parse(chunks: Array<string | Uint8Array>): Collected {
  const out: Collected = { events: [], retries: [], comments: [] };
  const p = createSseParser({
    onEvent: (e) => out.events.push(e),
    onRetry: (ms) => out.retries.push(ms),
    onComment: (t) => out.comments.push(t),
  });
  for (const c of chunks) p.feed(c);
  p.end();
  return out;
}

const ev = (data: string, type = "message", lastEventId = ""): SseEvent => ({
  type,
  data,
  lastEventId,
});

/** Cuts `input` at the given (sorted, deduplicated) offsets. */
function cut<T extends string | Uint8Array>(input: T, points: number[]): T[] {
  // Duplicate points are kept on purpose: they make empty chunks.
  const sorted = points.map((p) => p % (input.length + 1)).sort((a, b) => a - b);
  const out: T[] = [];
  let prev = 0;
  for (const p of sorted) {
    out.push(input.slice(prev, p) as T);
    prev = p;
  }
  out.push(input.slice(prev) as T);
  return out;
}

function bytesOneByOne(text: string): Uint8Array[] {
  const b = enc.encode(text);
  const out: Uint8Array[] = [];
  for (let i = 0; i < b.length; i++) out.push(b.subarray(i, i + 1));
  return out;
}

describe("WHATWG event-stream rules", () => {
  test("event field sets the type; without it (or when empty) the type is message", () => {
    const r = parse(["event: add\ndata: 1\n\ndata: 2\n\nevent:\ndata: 3\n\n"]);
    expect(r.events).toEqual([ev("1", "add"), ev("2"), ev("3")]);
  });

  test("data: several data lines are joined with LF", () => {
    expect(parse(["data: a\ndata: b\ndata:\ndata: c\n\n"]).events).toEqual([ev("a\nb\n\nc")]);
  });

  test("id: lastEventId is '' at first, persists across events, empty id resets it", () => {
    const r = parse(["data: a\n\nid: 7\ndata: b\n\ndata: c\n\nid\ndata: d\n\n"]);
    expect(r.events).toEqual([ev("a"), ev("b", "message", "7"), ev("c", "message", "7"), ev("d")]);
  });

  test("id: a value containing NUL is ignored", () => {
    const r = parse(["id: 1\ndata: a\n\nid: 2\u00003\ndata: b\n\n"]);
    expect(r.events).toEqual([ev("a", "message", "1"), ev("b", "message", "1")]);
  });

  test("formatSseIdOnly moves Last-Event-ID and dispatches nothing", () => {
    const seen: SseEvent[] = [];
    const p = createSseParser({ onEvent: (e) => seen.push(e) });
    p.feed(formatSseIdOnly(41));
    expect(formatSseIdOnly(41)).toBe("id: 41\n\n");
    expect(seen).toEqual([]);
    expect(p.lastEventId).toBe("41");
  });

  test("id: takes effect even when the event has no data", () => {
    const p = createSseParser({ onEvent: () => {} });
    p.feed("id: 9\n\n");
    expect(p.lastEventId).toBe("9");
    expect(parse(["id: 9\n\ndata: x\n\n"]).events).toEqual([ev("x", "message", "9")]);
  });

  test("retry: only ASCII digits are accepted", () => {
    const r = parse([
      "retry: 1500\nretry: 10a\nretry: -1\nretry:  5\nretry\nretry: 1.5\nretry:0\n\n",
    ]);
    expect(r.retries).toEqual([1500, 0]);
    expect(r.events).toEqual([]);
  });

  test("comments go to onComment (one leading space stripped) and dispatch nothing", () => {
    const r = parse([": hb {}\n:raw\n:\n:  two\ndata: x\n\n"]);
    expect(r.comments).toEqual(["hb {}", "raw", "", " two"]);
    expect(r.events).toEqual([ev("x")]);
  });

  test("line ends: LF, CR and CRLF, mixed", () => {
    const r = parse(["data: a\r\rdata: b\n\ndata: c\r\n\r\ndata: d\r\ndata: e\n\r"]);
    expect(r.events).toEqual([ev("a"), ev("b"), ev("c"), ev("d\ne")]);
  });

  test("CRLF split across chunks is one line end", () => {
    const r = parse(["data: a\r", "\ndata: b\r", "\n\r", "\n"]);
    expect(r.events).toEqual([ev("a\nb")]);
  });

  test("CR at the end of a chunk followed by a non-LF is a lone CR line end", () => {
    expect(parse(["data: a\r", "data: b\r", "\r"]).events).toEqual([ev("a\nb")]);
    expect(parse(["data: a\r", "", "\rdata: b\n\n"]).events).toEqual([ev("a"), ev("b")]);
  });

  test("CR at the very end of the stream ends the line (and a blank CR line dispatches)", () => {
    expect(parse(["data: a\r\r"]).events).toEqual([ev("a")]);
    expect(parse(["data: a\r", "\r"]).events).toEqual([ev("a")]);
    // The CR ends the data line, but no blank line follows: incomplete, discarded.
    expect(parse(["data: a\r"]).events).toEqual([]);
  });

  test("CR handling survives empty chunks between CR and LF", () => {
    const r = parse(["data: a\r", "", new Uint8Array(0), "\n", "data: b\n\n"]);
    expect(r.events).toEqual([ev("a\nb")]);
  });

  test("one leading BOM is skipped; a second one is part of the first field name", () => {
    expect(parse(["\uFEFFdata: a\n\n"]).events).toEqual([ev("a")]);
    // "\uFEFFdata" is an unknown field, ignored, so nothing dispatches.
    expect(parse(["\uFEFF\uFEFFdata: a\n\n"]).events).toEqual([]);
    // A BOM that is not at the stream start is not skipped.
    expect(parse(["data: a\n\n\uFEFFdata: b\n\n"]).events).toEqual([ev("a")]);
  });

  test("BOM as bytes, split across chunks", () => {
    const b = enc.encode("\uFEFFdata: a\n\n");
    expect(parse([b.subarray(0, 1), b.subarray(1, 2), b.subarray(2)]).events).toEqual([ev("a")]);
  });

  test("a BOM is expected only at the start: an empty first chunk does not use it up", () => {
    expect(parse(["", "\uFEFFdata: a\n\n"]).events).toEqual([ev("a")]);
  });

  test("a field with no colon: the whole line is the name, the value is empty", () => {
    expect(parse(["data\n\n"]).events).toEqual([ev("")]);
    expect(parse(["data\ndata\n\n"]).events).toEqual([ev("\n")]);
    expect(parse(["event\ndata: x\n\n"]).events).toEqual([ev("x")]);
  });

  test("exactly one space after the colon is stripped", () => {
    expect(parse(["data:x\n\ndata: x\n\ndata:  x\n\ndata:\tx\n\n"]).events).toEqual([
      ev("x"),
      ev("x"),
      ev(" x"),
      ev("\tx"),
    ]);
    expect(parse(["event:  sp\ndata: 1\n\n"]).events).toEqual([ev("1", " sp")]);
  });

  test("the value keeps any further colons", () => {
    expect(parse(["data: a:b: c\n\n"]).events).toEqual([ev("a:b: c")]);
  });

  test("an event with an empty data buffer is not dispatched, and its type is reset", () => {
    const r = parse(["event: foo\n\nid: 1\n\n: c\n\ndata: x\n\n"]);
    expect(r.events).toEqual([ev("x", "message", "1")]);
  });

  test("data: present but empty dispatches an event with empty data", () => {
    expect(parse(["data:\n\n"]).events).toEqual([ev("")]);
  });

  test("unknown fields are ignored", () => {
    expect(parse(["foo: bar\nDATA: no\ndata: yes\n\n"]).events).toEqual([ev("yes")]);
  });

  test("an incomplete event at the end of the stream is discarded (WHATWG)", () => {
    expect(parse(["data: a\n"]).events).toEqual([]);
    expect(parse(["data: a"]).events).toEqual([]);
    expect(parse(["data: a\n\ndata: b\ndata: c"]).events).toEqual([ev("a")]);
  });

  test("UTF-8 bytes split inside multi-byte characters decode exactly", () => {
    const text = "data: h\u00e9llo \u20ac \u{1F600}\u{10FFFF}\n\n";
    expect(parse(bytesOneByOne(text)).events).toEqual([
      ev("h\u00e9llo \u20ac \u{1F600}\u{10FFFF}"),
    ]);
  });

  test("invalid UTF-8 becomes U+FFFD exactly as a whole-stream decode does", () => {
    const bytes = new Uint8Array([
      ...enc.encode("data: "),
      0xe2,
      0x82,
      0x41,
      0xff,
      0xf0,
      0x9f,
      0x98,
      ...enc.encode("\n\n"),
    ]);
    const whole = parse([bytes]).events;
    expect(whole[0]!.data).toBe("\uFFFDA\uFFFD\uFFFD");
    const single: Uint8Array[] = [];
    for (let i = 0; i < bytes.length; i++) single.push(bytes.subarray(i, i + 1));
    expect(parse(single).events).toEqual(whole);
  });

  test("text after an incomplete byte sequence: the held bytes become U+FFFD, in order", () => {
    expect(
      parse([new Uint8Array([0x64, 0x61, 0x74, 0x61, 0x3a, 0xe2, 0x82]), "x\n\n"]).events,
    ).toEqual([ev("\uFFFDx")]);
  });

  test("a long line in 1-byte chunks is parsed (buffered as pieces, joined once)", () => {
    const payload = "x".repeat(256 * 1024);
    const r = parse(bytesOneByOne(`data: ${payload}\n\n`));
    expect(r.events).toHaveLength(1);
    expect(r.events[0]!.data.length).toBe(payload.length);
  });

  test("end() discards the partial state and the parser accepts a new stream", () => {
    const out: SseEvent[] = [];
    const p = createSseParser({ onEvent: (e) => out.push(e) });
    p.feed("id: 3\ndata: lost");
    p.end();
    p.feed("\uFEFFdata: new\n\n");
    expect(out).toEqual([ev("new", "message", "3")]);
  });

  test("reset() drops partial input, keeps lastEventId unless given a new one", () => {
    const out: SseEvent[] = [];
    const p = createSseParser({ onEvent: (e) => out.push(e) });
    p.feed("id: 5\n\ndata: half\r");
    p.reset();
    p.feed("\ndata: a\n\n");
    p.reset({ lastEventId: "42" });
    p.feed("data: b\n\n");
    expect(out).toEqual([ev("a", "message", "5"), ev("b", "message", "42")]);
  });

  test("SseParserStream: the TransformStream form", async () => {
    const retries: number[] = [];
    const src = new ReadableStream<string | Uint8Array>({
      start(c) {
        c.enqueue("retry: 10\nid: 1\nevent: e\nda");
        c.enqueue(enc.encode("ta: \u00e9\r"));
        c.enqueue("\n\ndata: incomplete");
        c.close();
      },
    });
    const got: SseEvent[] = [];
    const reader = src
      .pipeThrough(new SseParserStream({ onRetry: (ms) => retries.push(ms) }))
      .getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) got.push(r.value);
    expect(got).toEqual([ev("\u00e9", "e", "1")]);
    expect(retries).toEqual([10]);
  });
});

describe("formatSseEvent / formatSseComment", () => {
  test("writes id, event, retry, then one data line per line of data", () => {
    expect(formatSseEvent({ id: 7, event: "stdout", data: '{"a":1}' })).toBe(
      'id: 7\nevent: stdout\ndata: {"a":1}\n\n',
    );
    expect(formatSseEvent({ data: "a\nb\r\nc\rd", retry: 3000 })).toBe(
      "retry: 3000\ndata: a\ndata: b\ndata: c\ndata: d\n\n",
    );
    expect(formatSseEvent({ data: "" })).toBe("data:\n\n");
    expect(formatSseEvent({ event: "end", data: "[DONE]" })).toBe("event: end\ndata: [DONE]\n\n");
  });

  test("the docs/protocol.md §2 example, byte for byte", () => {
    const frame = '{"id":"r1","seq":7,"name":"stdout","enc":"utf8","value":"hello\\n"}';
    expect(formatSseEvent({ id: 7, event: "stdout", data: frame })).toBe(
      `id: 7\nevent: stdout\ndata: ${frame}\n\n`,
    );
  });

  test("CR or LF in event or id is rejected with EINVAL (and NUL in id)", () => {
    for (const bad of [
      { event: "a\nb", data: "" },
      { event: "a\rb", data: "" },
      { id: "1\n", data: "" },
      { id: "1\r2", data: "" },
      { id: "1\u00002", data: "" },
    ] as SseEventInit[]) {
      let err: unknown;
      try {
        formatSseEvent(bad);
      } catch (e) {
        err = e;
      }
      expect(hasCode(err, "EINVAL")).toBe(true);
    }
  });

  test("retry must be a non-negative integer", () => {
    for (const retry of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => formatSseEvent({ data: "", retry })).toThrow(/retry/);
    }
  });

  test("formatSseComment writes one comment line per line of text", () => {
    expect(formatSseComment("hb {}")).toBe(": hb {}\n");
    expect(formatSseComment("a\nb")).toBe(": a\n: b\n");
    expect(formatSseComment("")).toBe(":\n");
    expect(parse([formatSseComment("x\r\ny"), "data: 1\n\n"]).comments).toEqual(["x", "y"]);
  });
});

describe("Utf8ChunkDecoder", () => {
  test("property: any bytes under any chunking decode exactly like one whole decode", () => {
    const whole = new TextDecoder("utf-8", { ignoreBOM: true });
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 64 }),
          fc.string({ unit: "binary", maxLength: 32 }).map((s) => enc.encode(s)),
        ),
        fc.array(fc.nat(), { maxLength: 10 }),
        (bytes, points) => {
          const d = new Utf8ChunkDecoder();
          let out = "";
          for (const c of cut(bytes, points)) out += d.decode(c);
          out += d.flush();
          expect(out).toBe(whole.decode(bytes));
        },
      ),
      { numRuns: 2000 },
    );
  });
});

// ---- property tests: format → parse round trip ----

type Item =
  | { kind: "event"; init: SseEventInit }
  | { kind: "comment"; text: string }
  | { kind: "retry"; ms: number };

/** Replaces lone surrogates (which UTF-8 cannot carry) with U+FFFD. */
function wellFormed(s: string): string {
  return s.replace(
    /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g,
    "\uFFFD",
  );
}

// Strings with astral characters; well-formed so they survive UTF-8.
const text = (maxLength: number) =>
  fc
    .string({
      unit: fc.oneof(
        fc.constantFrom("\n", "\r", ":", " ", "\u00e9", "\u20ac"),
        fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
      ),
      maxLength,
    })
    .map(wellFormed);
const oneLine = (s: string) => s.replace(/[\r\n]/g, "");

const itemArb: fc.Arbitrary<Item> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .record(
        {
          event: text(8).map(oneLine),
          data: text(40),
          id: text(6).map((s) => oneLine(s).replace(/\0/g, "")),
        },
        { requiredKeys: ["data"] },
      )
      .map((init) => ({ kind: "event" as const, init })),
  },
  { weight: 1, arbitrary: text(10).map((t) => ({ kind: "comment" as const, text: t })) },
  { weight: 1, arbitrary: fc.nat(100000).map((ms) => ({ kind: "retry" as const, ms })) },
);

/** Cut points; small values repeat often, which makes empty chunks. */
const pointArb = fc.oneof(fc.nat(), fc.nat({ max: 6 }));

/** The line end a producer uses: the formatter writes LF; CR and CRLF are equally valid SSE. */
const eolArb = fc.constantFrom("\n", "\r", "\r\n");

/** Renders items with the formatter (whose output has no CR/LF except line ends), then applies `eol`. */
function render(items: Item[], eol = "\n"): string {
  let s = "";
  for (const it of items) {
    if (it.kind === "event") s += formatSseEvent(it.init);
    else if (it.kind === "comment") s += formatSseComment(it.text);
    else s += `retry: ${it.ms}\n`;
  }
  return eol === "\n" ? s : s.replace(/\n/g, eol);
}

function expected(items: Item[]): Collected {
  const out: Collected = { events: [], retries: [], comments: [] };
  let last = "";
  for (const it of items) {
    if (it.kind === "event") {
      if (it.init.id !== undefined) last = String(it.init.id);
      out.events.push({
        type: it.init.event ? it.init.event : "message",
        data: it.init.data.replace(/\r\n|\r/g, "\n"),
        lastEventId: last,
      });
    } else if (it.kind === "comment") {
      out.comments.push(...it.text.split(/\r\n|\r|\n/));
    } else {
      out.retries.push(it.ms);
    }
  }
  return out;
}

describe("property: format → parse round-trips exactly", () => {
  test("random events × random text chunkings (empty chunks included)", () => {
    fc.assert(
      fc.property(
        fc.array(itemArb, { maxLength: 12 }),
        fc.array(pointArb, { maxLength: 20 }),
        eolArb,
        (items, points, eol) => {
          const s = render(items, eol);
          expect(parse(cut(s, points))).toEqual(expected(items));
        },
      ),
      { numRuns: 1500 },
    );
  });

  test("random events × random byte chunkings (splits inside characters, BOM)", () => {
    fc.assert(
      fc.property(
        fc.array(itemArb, { maxLength: 12 }),
        fc.array(pointArb, { maxLength: 20 }),
        fc.boolean(),
        eolArb,
        (items, points, bom, eol) => {
          const bytes = enc.encode((bom ? "\uFEFF" : "") + render(items, eol));
          expect(parse(cut(bytes, points))).toEqual(expected(items));
        },
      ),
      { numRuns: 1500 },
    );
  });

  test("random events, every-single-byte chunking", () => {
    fc.assert(
      fc.property(fc.array(itemArb, { maxLength: 8 }), eolArb, (items, eol) => {
        expect(parse(bytesOneByOne(render(items, eol)))).toEqual(expected(items));
      }),
      { numRuns: 300 },
    );
  });

  test("huge chunk: many events in one chunk equal the same events one by one", () => {
    const items: Item[] = [];
    for (let i = 0; i < 2000; i++) {
      items.push({ kind: "event", init: { id: i, data: `{"n":${i}}\n\u{1F600}` } });
    }
    const s = render(items);
    expect(parse([s])).toEqual(expected(items));
    expect(parse([enc.encode(s)])).toEqual(expected(items));
  });
});
