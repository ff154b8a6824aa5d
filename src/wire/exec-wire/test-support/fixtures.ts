// Shared fixtures of the exec-wire tests: byte helpers, chunkings, the push
// and stream decode harnesses, the example frames of docs/protocol.md §1,
// and the fast-check arbitraries for events. Test-only (not built).
import fc from "fast-check";
import type { ExecEvent } from "../../types.js";
import { type ExecWireDecodeOptions, ExecWireDecoder, type ExecWireError } from "../index.js";

export const te = new TextEncoder();
export const td = new TextDecoder();
export const bytes = (s: string) => te.encode(s);

export function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

export function chunkAt(all: Uint8Array, cuts: number[]): Uint8Array[] {
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

export function oneByteChunks(all: Uint8Array): Uint8Array[] {
  return Array.from(all, (b) => Uint8Array.of(b));
}

/** Push API: decode chunks, collecting events and errors (push/end throw on failure). */
export function decodeAll(
  chunks: Uint8Array[],
  options?: ExecWireDecodeOptions,
): { events: ExecEvent[]; error?: ExecWireError } {
  const d = new ExecWireDecoder(options);
  const events: ExecEvent[] = [];
  try {
    for (const c of chunks) events.push(...d.push(c));
    events.push(...d.end());
  } catch (err) {
    events.push(...((err as ExecWireError).events ?? []));
    return { events, error: err as ExecWireError };
  }
  return { events };
}

export function streamOf(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream({
    pull(c) {
      if (i < chunks.length) c.enqueue(chunks[i++]!);
      else c.close();
    },
  });
}

export async function collect<T>(
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

// The three example frames of docs/protocol.md §1, exactly as printed there.
export const WIRE_EXAMPLE =
  '{"id":"r1","seq":1,"name":"stdout","enc":"utf8","value":"hello\\n"}\n' +
  '{"id":"r1","seq":2,"name":"stderr","enc":"b64","value":"AP/+"}\n' +
  '{"id":"r1","seq":3,"name":"exit","value":0}\n';
export const WIRE_EVENTS: ExecEvent[] = [
  { id: "r1", seq: 1, name: "stdout", value: "hello\n" },
  { id: "r1", seq: 2, name: "stderr", value: Uint8Array.of(0x00, 0xff, 0xfe) },
  { id: "r1", seq: 3, name: "exit", value: 0 },
];

// ---------------------------------------------------------------------------
// Arbitraries

// Text with astral characters and lone surrogates (JSON escapes those).
export const smallTextArb = fc.oneof(
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 20 }),
  fc.constantFrom("", "\n", "a\ud800b", "\udc00", "😀\r\n", '"\\/\t\u0000\u001f', "\u2028\u2029"),
);
export const smallBytesArb = fc.oneof(
  fc.uint8Array({ maxLength: 200 }),
  fc.constant(new Uint8Array(0)),
);
// Huge chunks (bigger than typical chunkings) are rarer to keep runs quick.
export const textArb = fc.oneof(
  { weight: 6, arbitrary: smallTextArb },
  { weight: 1, arbitrary: fc.string({ unit: "binary", minLength: 3000, maxLength: 12000 }) },
);
export const bytesArb = fc.oneof(
  { weight: 6, arbitrary: smallBytesArb },
  { weight: 1, arbitrary: fc.uint8Array({ minLength: 20000, maxLength: 70000 }) },
);
export const idArb = fc.oneof(fc.constant("exec_1"), fc.string({ unit: "binary", maxLength: 12 }));

export type Draft = Omit<ExecEvent, "seq">;
export const eventArbOf = (text: fc.Arbitrary<string>, bin: fc.Arbitrary<Uint8Array>) =>
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
export const eventArb = eventArbOf(textArb, bytesArb);
export const smallEventArb = eventArbOf(smallTextArb, smallBytesArb);

export const eventsArb = fc
  .array(eventArb, { maxLength: 10 })
  .map((drafts) => drafts.map((d, i) => ({ ...d, seq: i + 1 }) as ExecEvent));

/** Deep-equality on big byte arrays is slow in the matcher: compare base64 text instead. */
export const norm = (events: ExecEvent[]) =>
  events.map((e) =>
    e.value instanceof Uint8Array
      ? { ...e, value: `bytes:${Buffer.from(e.value).toString("base64")}` }
      : e,
  );
