// Tests for consumeAAtUIStream (docs/protocol.md §3 rules 1–6): one named test per
// rule, chunk splits inside multi-byte characters and between \r and \n, the
// resume-position extension, adapter semantics, and a property test that any
// byte chunking of a random stream gives exactly what a naive reading of the
// rules over the whole text gives.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import type { ComputerError } from "../wire/errors.js";
import {
  type AAtUIStreamAdapter,
  type ConsumeResult,
  consumeAAtUIStream,
  type StreamErrorContext,
} from "./consume.js";
import type { Command } from "./types.js";
import { validateCommand } from "./validate.js";

const enc = new TextEncoder();

type Seen =
  | ["dispatch", Command, string | undefined]
  | ["error", string, StreamErrorContext]
  | ["position", string];

function recorder(): { seen: Seen[]; adapter: AAtUIStreamAdapter } {
  const seen: Seen[] = [];
  return {
    seen,
    adapter: {
      dispatch: (command, meta) => {
        seen.push(["dispatch", command, meta.position]);
      },
      handleError: (error: ComputerError, context) => {
        seen.push(["error", error.code, context]);
      },
      onPosition: (id) => {
        seen.push(["position", id]);
      },
    },
  };
}

function streamOf(chunks: Array<string | Uint8Array>) {
  let pulls = 0;
  let cancelled = false;
  let i = 0;
  const stream = new ReadableStream<string | Uint8Array>(
    {
      pull(c) {
        pulls++;
        if (i < chunks.length) c.enqueue(chunks[i++]!);
        else c.close();
      },
      cancel() {
        cancelled = true;
      },
    },
    { highWaterMark: 0 },
  );
  return {
    stream,
    get pulls() {
      return pulls;
    },
    get cancelled() {
      return cancelled;
    },
    get consumed() {
      return i;
    },
  };
}

async function run(
  chunks: Array<string | Uint8Array>,
): Promise<{ seen: Seen[]; result: ConsumeResult }> {
  const { seen, adapter } = recorder();
  const result = await consumeAAtUIStream(streamOf(chunks).stream, adapter);
  return { seen, result };
}

const U1 = '{"type":"update","widgetId":"w1","params":{"q":"\u00e9\u{1F600}"}}';
const cmd = (json: string) => JSON.parse(json) as Command;

describe("A@UI SSE consumer rules (docs/protocol.md §3)", () => {
  test("rule 1: reads lines split on \\n or \\r\\n and skips empty lines", async () => {
    const { seen } = await run([`\n\r\n  \ndata: ${U1}\r\n\r\ndata: ${U1}\n\n`]);
    expect(seen).toEqual([
      ["dispatch", cmd(U1), undefined],
      ["dispatch", cmd(U1), undefined],
    ]);
  });

  test("rule 1: a lone \\r is not a line end (A@UI differs from WHATWG here)", async () => {
    const { seen } = await run([`data: ${U1}\rdata: ${U1}\n`]);
    expect(seen.map((s) => s[0] === "error" && s[1])).toEqual(["EJSON"]);
  });

  test("rule 2: only lines starting with data: (after trimming) are handled; others are skipped", async () => {
    const { seen } = await run([
      `: comment\nevent: x\nretry: 5\nfoo\nDATA: ${U1}\n  data: ${U1}  \n\tdata:${U1}\n`,
    ]);
    expect(seen).toEqual([
      ["dispatch", cmd(U1), undefined],
      ["dispatch", cmd(U1), undefined],
    ]);
  });

  test("rule 3: whitespace after data: is trimmed", async () => {
    const { seen } = await run([`data:${U1}\ndata:    ${U1}\t \ndata: \t ${U1}\n`]);
    expect(seen.filter((s) => s[0] === "dispatch")).toHaveLength(3);
  });

  test("rule 3: trimming removes exactly what String.prototype.trim removes", async () => {
    // Every code unit up to U+30FF (all of JS's whitespace but U+FEFF lives
    // there) plus the top of the BMP and lone surrogates.
    const units: number[] = [];
    for (let c = 0; c < 0x3100; c++) units.push(c);
    units.push(0xd800, 0xdc00, 0xfeff, 0xfffd, 0xfffe, 0xffff);
    let text = "";
    const expected: boolean[] = [];
    for (const c of units) {
      if (c === 10) continue; // LF ends the line (rule 1)
      const ch = String.fromCharCode(c);
      text += `data:${ch}{"type":"destroy","widgetId":"w"}${ch}\n`;
      expected.push(ch.trim() === "");
    }
    const { seen } = await run([text]);
    expect(seen.map((s) => s[0] === "dispatch")).toEqual(expected);
  });

  test("rule 4: on [DONE] it returns at once, cancels the stream and reads nothing further", async () => {
    const { seen, adapter } = recorder();
    const src = streamOf([
      `data: ${U1}\ndata: [DONE]\ndata: ${U1}\n`,
      `data: ${U1}\n`,
      `data: ${U1}\n`,
    ]);
    const result = await consumeAAtUIStream(src.stream, adapter);
    expect(result).toEqual({ reason: "done", dispatched: 1, errors: 0, lastEventId: "" });
    expect(seen).toHaveLength(1);
    expect(src.consumed).toBe(1);
    expect(src.cancelled).toBe(true);
  });

  test("rule 4: [DONE] with surrounding whitespace still ends; a trailing partial after it is not reported", async () => {
    const { seen, result } = await run(["data:   [DONE]  \r\n", "data: {"]);
    expect(result.reason).toBe("done");
    expect(seen).toEqual([]);
  });

  test("rule 5: a valid command is dispatched", async () => {
    const { seen, result } = await run([
      'data: {"type":"render","component":"SearchBox","params":{"q":"x"}}\n\n',
      'data: {"type":"destroy","widgetId":"w1"}\n\ndata: [DONE]\n\n',
    ]);
    expect(seen).toEqual([
      ["dispatch", { type: "render", component: "SearchBox", params: { q: "x" } }, undefined],
      ["dispatch", { type: "destroy", widgetId: "w1" }, undefined],
    ]);
    expect(result).toMatchObject({ reason: "done", dispatched: 2, errors: 0 });
  });

  test("rule 5: a payload that is not JSON is reported as EJSON with the raw payload", async () => {
    const { seen } = await run(["data: {not json\n", "data:\n"]);
    expect(seen).toEqual([
      ["error", "EJSON", { source: "stream", raw: "{not json" }],
      ["error", "EJSON", { source: "stream", raw: "" }],
    ]);
  });

  test("rule 5: JSON that is not a valid command is reported as EINVAL with raw payload, parsed value and reason", async () => {
    const errors: Array<[ComputerError, StreamErrorContext]> = [];
    await consumeAAtUIStream(
      streamOf(['data: {"type":"update","widgetId":"w1","params":[]}\n']).stream,
      {
        dispatch: () => {},
        handleError: (e, c) => {
          errors.push([e, c]);
        },
      },
    );
    expect(errors).toHaveLength(1);
    const [err, ctx] = errors[0]!;
    expect(err.code).toBe("EINVAL");
    expect(err.message).toMatch(/"params" must be a plain object/);
    expect(ctx).toEqual({
      source: "stream",
      raw: '{"type":"update","widgetId":"w1","params":[]}',
      command: { type: "update", widgetId: "w1", params: [] },
    });
  });

  test("rule 5: nothing is dropped silently; order of dispatches and errors is stream order", async () => {
    const { seen, result } = await run([`data: ${U1}\ndata: 1\ndata: x\ndata: ${U1}\n`]);
    expect(seen.map((s) => s[1] && (s[0] === "error" ? s[1] : "ok"))).toEqual([
      "ok",
      "EINVAL",
      "EJSON",
      "ok",
    ]);
    expect(result).toMatchObject({ reason: "end", dispatched: 2, errors: 2 });
  });

  test("rule 6: a non-empty partial line at the end is reported as ETRAILING", async () => {
    const { seen, result } = await run([`data: ${U1}\n`, `data: ${U1}`]);
    expect(seen).toEqual([
      ["dispatch", cmd(U1), undefined],
      ["error", "ETRAILING", { source: "stream", raw: `data: ${U1}` }],
    ]);
    expect(result.reason).toBe("end");
  });

  test("rule 6: a whitespace-only partial line (or a lone \\r) is not reported", async () => {
    expect((await run([`data: ${U1}\n`, "  \r"])).seen).toHaveLength(1);
  });

  test("rule 6: the error says 'trailing partial SSE frame'", async () => {
    let message = "";
    await consumeAAtUIStream(streamOf(["data"]).stream, {
      dispatch: () => {},
      handleError: (e) => {
        message = e.message;
      },
    });
    expect(message).toBe("trailing partial SSE frame");
  });
});

describe("chunking", () => {
  test("chunks split inside multi-byte characters, every single byte", async () => {
    const bytes = enc.encode(`data: ${U1}\r\ndata: ${U1}\n`);
    const chunks: Uint8Array[] = [];
    for (let i = 0; i < bytes.length; i++) chunks.push(bytes.subarray(i, i + 1));
    const { seen } = await run(chunks);
    expect(seen).toEqual([
      ["dispatch", cmd(U1), undefined],
      ["dispatch", cmd(U1), undefined],
    ]);
  });

  test("a chunk split between \\r and \\n", async () => {
    const { seen } = await run([`data: ${U1}\r`, `\ndata: [DONE]\r`, "\n"]);
    expect(seen).toEqual([["dispatch", cmd(U1), undefined]]);
  });

  test("text chunks and byte chunks can be mixed", async () => {
    const b = enc.encode(`data: ${U1}\n`);
    const { seen } = await run(["da", b.subarray(2, 20), b.subarray(20), ""]);
    expect(seen).toEqual([["dispatch", cmd(U1), undefined]]);
  });

  test("a long line in 1-byte chunks is handled (pieces joined once)", async () => {
    const params = { text: "x".repeat(64 * 1024) };
    const bytes = enc.encode(
      `data: ${JSON.stringify({ type: "update", widgetId: "w", params })}\n`,
    );
    const chunks: Uint8Array[] = [];
    for (let i = 0; i < bytes.length; i++) chunks.push(bytes.subarray(i, i + 1));
    const { seen } = await run(chunks);
    expect(seen).toEqual([["dispatch", { type: "update", widgetId: "w", params }, undefined]]);
  });
});

describe("resume positions (id: lines)", () => {
  test("id lines never dispatch; the block's id is passed as position and reported when the block ends", async () => {
    const { seen, result } = await run([
      `id: 1\ndata: ${U1}\n\n`,
      `data: ${U1}\nid: 2\n\n`,
      `data: ${U1}\n\n`,
      `id: 3\ndata: [DONE]\n\n`,
    ]);
    expect(seen).toEqual([
      ["dispatch", cmd(U1), "1"],
      ["position", "1"],
      ["dispatch", cmd(U1), undefined],
      ["position", "2"],
      ["dispatch", cmd(U1), undefined],
    ]);
    expect(result.lastEventId).toBe("2");
  });
});

describe("adapter semantics and sources", () => {
  test("an async dispatch is awaited before the next chunk is read", async () => {
    const order: string[] = [];
    const src = streamOf([`data: ${U1}\n`, `data: ${U1}\n`]);
    await consumeAAtUIStream(src.stream, {
      dispatch: async () => {
        order.push(`start@${src.consumed}`);
        await new Promise((r) => setTimeout(r, 5));
        order.push("end");
      },
      handleError: () => {},
    });
    expect(order).toEqual(["start@1", "end", "start@2", "end"]);
  });

  test("an adapter that throws rejects the consumer and cancels the stream", async () => {
    const src = streamOf([`data: ${U1}\n`, `data: ${U1}\n`]);
    await expect(
      consumeAAtUIStream(src.stream, {
        dispatch: () => {
          throw new Error("boom");
        },
        handleError: () => {},
      }),
    ).rejects.toThrow("boom");
    expect(src.cancelled).toBe(true);
  });

  test("a stream error rejects the consumer", async () => {
    const stream = new ReadableStream<string>({
      start(c) {
        c.enqueue(`data: ${U1}\n`);
        c.error(new Error("network down"));
      },
    });
    await expect(
      consumeAAtUIStream(stream, { dispatch: () => {}, handleError: () => {} }),
    ).rejects.toThrow("network down");
  });

  test("an async iterable source works too, and is closed on [DONE]", async () => {
    let closed = false;
    async function* gen() {
      try {
        yield `data: ${U1}\n`;
        yield "data: [DONE]\n";
        yield `data: ${U1}\n`;
      } finally {
        closed = true;
      }
    }
    const { seen, adapter } = recorder();
    const result = await consumeAAtUIStream(gen(), adapter);
    expect(result.reason).toBe("done");
    expect(seen).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 0));
    expect(closed).toBe(true);
  });
});

// ---- property: any chunking equals a naive reading of the rules over the whole text ----

function reference(text: string): Seen[] {
  const out: Seen[] = [];
  const lines = text.split("\n");
  const partial = lines.pop()!;
  let blockId: string | undefined;
  for (const raw of lines) {
    const line = raw.replace(/\r$/, "").trim();
    if (line === "") {
      if (blockId !== undefined) out.push(["position", blockId]);
      blockId = undefined;
      continue;
    }
    if (line.startsWith("id:")) {
      blockId = line.slice(3).trim();
      continue;
    }
    if (!line.startsWith("data:")) continue;
    const payload = line.slice(5).trim();
    if (payload === "[DONE]") return out;
    let value: unknown;
    try {
      value = JSON.parse(payload);
    } catch {
      out.push(["error", "EJSON", { source: "stream", raw: payload }]);
      continue;
    }
    const r = validateCommand(value);
    if (r.ok) out.push(["dispatch", r.command, blockId]);
    else out.push(["error", "EINVAL", { source: "stream", raw: payload, command: value }]);
  }
  if (partial.trim() !== "") out.push(["error", "ETRAILING", { source: "stream", raw: partial }]);
  return out;
}

const pad = fc.constantFrom(
  "",
  " ",
  "\t",
  "  ",
  "\u00a0",
  "\u3000",
  "\ufeff",
  "\u2028",
  "\u200b",
  "\v",
);
const lineArb = fc.oneof(
  {
    weight: 5,
    arbitrary: fc
      .tuple(pad, pad, fc.string({ unit: "binary", maxLength: 8 }))
      .map(
        ([a, b, s]) =>
          `${a}data:${b}${JSON.stringify({ type: "update", widgetId: "w\u{1F600}", params: { s } })}`,
      ),
  },
  { weight: 1, arbitrary: fc.constant('data: {"type":"render","component":"A","widgetId":"x"}') },
  { weight: 1, arbitrary: fc.constant("data: {broken \u00e9") },
  { weight: 1, arbitrary: fc.constant("data: [DONE]") },
  { weight: 1, arbitrary: fc.nat(99).map((n) => `id: ${n}`) },
  { weight: 1, arbitrary: fc.constantFrom("", " ", ": hb", "event: x", "\u00e9vent") },
);
const eolArb = fc.constantFrom("\n", "\r\n");

describe("property", () => {
  test("random streams × random byte chunkings match the rules applied to the whole text", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(lineArb, eolArb), { maxLength: 15 }),
        fc.option(fc.constantFrom("data: {", "  ", "data: [DONE]", "x\r"), { nil: undefined }),
        fc.array(fc.nat(), { maxLength: 12 }),
        async (lines, tail, points) => {
          const text = lines.map(([l, e]) => l + e).join("") + (tail ?? "");
          const bytes = enc.encode(text);
          const sorted = [...new Set(points.map((p) => p % (bytes.length + 1)))].sort(
            (a, b) => a - b,
          );
          const chunks: Uint8Array[] = [];
          let prev = 0;
          for (const p of sorted) {
            chunks.push(bytes.slice(prev, p));
            prev = p;
          }
          chunks.push(bytes.slice(prev));
          const { seen } = await run(chunks);
          expect(seen).toEqual(reference(text));
        },
      ),
      { numRuns: 500 },
    );
  });
});
