// exec-wire (WIRE.md §1): a command's events as JSON lines. Encoder, a
// synchronous push decoder, and web-stream wrappers around both.
//
// Shape and speed decisions (figures in shared/PERF-NOTES.md and
// docs/benchmarks.md):
// - The decoder scans bytes for LF. Complete lines inside a chunk are decoded
//   to text with ONE non-streaming TextDecoder call per chunk and split on
//   "\n" in string space (UTF-8 never has 0x0A inside a character, and the
//   WHATWG decoder never swallows an ASCII byte into a replacement, so this
//   equals decoding line by line). A line spanning chunks is kept as owned
//   byte segments (lines.ts PendingBytes) and joined once when its LF arrives:
//   linear for any chunking, never the streaming TextDecoder.
// - Frames in our own canonical shape take a fast path (prefix checks, digit
//   loop, one small JSON.parse of the value only when it has escapes); any
//   deviation falls back to JSON.parse of the whole line, which is the
//   authority: the fast path either returns exactly what the generic path
//   would, or declines. A property test holds the two paths equal.
// - The push API returns arrays of events so hot paths pay no per-event
//   stream hop; the stream form enqueues a chunk's events in one pull.
// - The encoder builds the canonical text by concatenation (key order is part
//   of the contract, so we never rely on object property order) and writes
//   bytes with `encodeInto` into a reused scratch buffer (~6x faster than
//   `TextEncoder.encode` per line), copying out exactly the frame.

import { decodeBase64, decodeBase64Ascii, decodeBase64Bytes, encodeBase64 } from "./base64.js";
import { ComputerError, type ErrorCode, toErrorCode } from "./errors.js";
import {
  DEFAULT_MAX_LINE_BYTES,
  excerptOf,
  indexOfByte,
  lastIndexOfByte,
  PendingBytes,
  WireLineError,
} from "./lines.js";
import type {
  Chunk,
  ErrorFrame,
  ExecEvent,
  ExitEvent,
  ExitReason,
  HeartbeatEvent,
  OutputEvent,
} from "./types.js";

export { DEFAULT_MAX_LINE_BYTES } from "./lines.js";

/**
 * A malformed line (`EINVAL`), an over-long line (`ELIMIT`), or a producer's
 * `error` frame (its own `code`, e.g. `ELOG_TRUNCATED` with `earliestSeq`).
 */
export class ExecWireError extends WireLineError {
  /** For a producer's error frame: the frame's fields as received. */
  readonly frame?: Record<string, unknown>;

  constructor(
    code: ErrorCode,
    message: string,
    line: number,
    excerpt: string,
    extra?: { earliestSeq?: number; frame?: Record<string, unknown>; cause?: unknown },
  ) {
    super(code, message, line, excerpt, extra);
    this.name = "ExecWireError";
    if (extra?.frame !== undefined) this.frame = extra.frame;
  }
}

// ---------------------------------------------------------------------------
// Encoding

const utf8 = new TextEncoder();
let scratch = new Uint8Array(64 * 1024);

// Node's Buffer, found through globalThis (no `node:` import in src/wire):
// `write` into a preallocated slab is ~4x faster per line than
// `TextEncoder.encode` and ~2x `encodeInto` + copy (measured, Node 20).
interface NodeBufferStatic {
  allocUnsafeSlow(
    size: number,
  ): Uint8Array & { write(text: string, offset: number, encoding?: string): number };
  byteLength(text: string): number;
}
const NodeBuffer = (globalThis as { Buffer?: NodeBufferStatic }).Buffer;
const SLAB_BYTES = 64 * 1024;
let slab: ReturnType<NodeBufferStatic["allocUnsafeSlow"]> | undefined;
let slabUsed = 0;

function invalidEvent(why: string): ComputerError {
  return new ComputerError("EINVAL", `cannot encode exec-wire event: ${why}`);
}

function checkHeader(ev: { id: unknown; seq: unknown }): void {
  if (typeof ev.id !== "string") throw invalidEvent("`id` must be a string");
  if (!Number.isSafeInteger(ev.seq) || (ev.seq as number) < 0) {
    throw invalidEvent("`seq` must be a non-negative integer");
  }
}

function finiteNumber(v: unknown, what: string): number {
  if (typeof v !== "number" || !Number.isFinite(v)) throw invalidEvent(`${what} must be a number`);
  return v;
}

// Consecutive events mostly share one id: stringify it once.
let lastIdRaw = "";
let lastIdJson = '""';
function idJson(id: string): string {
  if (id !== lastIdRaw) {
    lastIdJson = JSON.stringify(id);
    lastIdRaw = id;
  }
  return lastIdJson;
}

/**
 * The canonical JSON text of an event, without the line end: compact, keys in
 * the order `id, seq, name, enc, value`, then `signal`, `reason` on exit.
 * This is also the `data` of the SSE mapping (WIRE.md §2).
 */
export function frameToJson(ev: ExecEvent): string {
  checkHeader(ev);
  const head = `{"id":${idJson(ev.id)},"seq":${ev.seq},"name":`;
  switch (ev.name) {
    case "stdout":
    case "stderr": {
      const v = ev.value;
      if (typeof v === "string") {
        return `${head}"${ev.name}","enc":"utf8","value":${JSON.stringify(v)}}`;
      }
      if (v instanceof Uint8Array) {
        return `${head}"${ev.name}","enc":"b64","value":"${encodeBase64(v)}"}`;
      }
      throw invalidEvent("output `value` must be a string or a Uint8Array");
    }
    case "exit": {
      if (!Number.isSafeInteger(ev.value)) throw invalidEvent("exit `value` must be an integer");
      let s = `${head}"exit","value":${ev.value}`;
      if (ev.signal !== undefined) {
        if (typeof ev.signal !== "string") throw invalidEvent("`signal` must be a string");
        s += `,"signal":${JSON.stringify(ev.signal)}`;
      }
      if (ev.reason !== undefined) {
        if (typeof ev.reason !== "string") throw invalidEvent("`reason` must be a string");
        s += `,"reason":${JSON.stringify(ev.reason)}`;
      }
      return `${s}}`;
    }
    case "heartbeat": {
      const v = ev.value;
      if (typeof v !== "object" || v === null)
        throw invalidEvent("heartbeat `value` must be an object");
      return `${head}"heartbeat","value":{"pid":${finiteNumber(v.pid, "pid")},"elapsedMs":${finiteNumber(v.elapsedMs, "elapsedMs")},"lastOutputMs":${finiteNumber(v.lastOutputMs, "lastOutputMs")}}}`;
    }
    default:
      throw invalidEvent(`unknown name ${JSON.stringify((ev as { name: unknown }).name)}`);
  }
}

/** UTF-8 bytes of `text` followed by "\n", as a fresh exactly-sized array. */
function lineBytes(text: string): Uint8Array {
  const max = text.length * 3 + 1; // UTF-8 needs at most 3 bytes per UTF-16 unit
  if (NodeBuffer !== undefined) {
    if (max <= SLAB_BYTES / 4) {
      // Small frames are written side by side into a shared slab (like Node's
      // own Buffer pool): one native write, no per-frame allocation but the
      // view. Holding a frame keeps its 64 KiB slab alive.
      if (slab === undefined || slabUsed + max > SLAB_BYTES) {
        slab = NodeBuffer.allocUnsafeSlow(SLAB_BYTES);
        slabUsed = 0;
      }
      const n = slab.write(text, slabUsed);
      slab[slabUsed + n] = 0x0a;
      const out = new Uint8Array(slab.buffer, slab.byteOffset + slabUsed, n + 1);
      slabUsed += n + 1;
      return out;
    }
    const n = NodeBuffer.byteLength(text);
    const big = NodeBuffer.allocUnsafeSlow(n + 1);
    big.write(text, 0);
    big[n] = 0x0a;
    return new Uint8Array(big.buffer, big.byteOffset, n + 1);
  }
  if (scratch.length < max) scratch = new Uint8Array(Math.max(max, scratch.length * 2));
  const { written } = utf8.encodeInto(text, scratch);
  const out = scratch.slice(0, written + 1);
  out[written] = 0x0a;
  return out;
}

/** One event as its canonical exec-wire line (UTF-8 JSON + "\n"). */
export function encodeExecEvent(ev: ExecEvent): Uint8Array {
  if (ev.name === "stdout" || ev.name === "stderr") {
    const out = encodeOutputIntoSlab(ev);
    if (out !== undefined) return out;
  }
  return lineBytes(frameToJson(ev));
}

// Output frames (nearly all the traffic) are assembled directly as bytes in
// a shared slab: fixed parts copied, seq digits and the JSON string written
// by a hand-rolled escaper + UTF-8 encoder. `JSON.stringify` of a ~100-char
// value alone costs more than this whole function (measured), and building
// then flattening a frame string is avoided. The escaper reproduces
// JSON.stringify exactly (property-tested against it).
const asciiBytes = (s: string): Uint8Array => Uint8Array.from(s, (c) => c.charCodeAt(0));
const E_OPEN = asciiBytes('{"id":');
const E_SEQ = asciiBytes(',"seq":');
const E_MIDDLE = {
  stdout: {
    utf8: asciiBytes(',"name":"stdout","enc":"utf8","value":'),
    b64: asciiBytes(',"name":"stdout","enc":"b64","value":"'),
  },
  stderr: {
    utf8: asciiBytes(',"name":"stderr","enc":"utf8","value":'),
    b64: asciiBytes(',"name":"stderr","enc":"b64","value":"'),
  },
};
const HEX = asciiBytes("0123456789abcdef");
let lastIdBytesRaw: string | undefined;
let lastIdBytes = new Uint8Array(0);
let plainSlab: Uint8Array | undefined;

/** An exactly-sized array whose every byte the caller writes (unzeroed on Node). */
function allocExact(n: number): Uint8Array {
  return NodeBuffer !== undefined ? NodeBuffer.allocUnsafeSlow(n) : new Uint8Array(n);
}
let plainUsed = 0;

function put(dst: Uint8Array, o: number, src: Uint8Array): number {
  for (let i = 0; i < src.length; i++) dst[o + i] = src[i]!;
  return o + src.length;
}

function putU(dst: Uint8Array, o: number, c: number): number {
  dst[o] = 0x5c;
  dst[o + 1] = 0x75;
  dst[o + 2] = HEX[c >>> 12]!;
  dst[o + 3] = HEX[(c >>> 8) & 15]!;
  dst[o + 4] = HEX[(c >>> 4) & 15]!;
  dst[o + 5] = HEX[c & 15]!;
  return o + 6;
}

/** Writes `JSON.stringify(s)` as UTF-8 at `o`; needs room for 6 bytes per unit + 2. */
function writeJsonString(dst: Uint8Array, o: number, s: string): number {
  dst[o++] = 0x22;
  const n = s.length;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) {
      if (c >= 0x20 && c !== 0x22 && c !== 0x5c) {
        dst[o++] = c;
        continue;
      }
      let e = 0;
      if (c === 0x22 || c === 0x5c) e = c;
      else if (c === 0x0a) e = 0x6e;
      else if (c === 0x0d) e = 0x72;
      else if (c === 0x09) e = 0x74;
      else if (c === 0x08) e = 0x62;
      else if (c === 0x0c) e = 0x66;
      if (e !== 0) {
        dst[o++] = 0x5c;
        dst[o++] = e;
      } else o = putU(dst, o, c);
    } else if (c < 0x800) {
      dst[o++] = 0xc0 | (c >>> 6);
      dst[o++] = 0x80 | (c & 63);
    } else if (c < 0xd800 || c > 0xdfff) {
      dst[o++] = 0xe0 | (c >>> 12);
      dst[o++] = 0x80 | ((c >>> 6) & 63);
      dst[o++] = 0x80 | (c & 63);
    } else {
      const d = i + 1 < n ? s.charCodeAt(i + 1) : 0;
      if (c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) {
        const cp = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        dst[o++] = 0xf0 | (cp >>> 18);
        dst[o++] = 0x80 | ((cp >>> 12) & 63);
        dst[o++] = 0x80 | ((cp >>> 6) & 63);
        dst[o++] = 0x80 | (cp & 63);
        i++;
      } else o = putU(dst, o, c); // a lone surrogate, escaped like JSON.stringify
    }
  }
  dst[o++] = 0x22;
  return o;
}

function encodeOutputIntoSlab(ev: OutputEvent): Uint8Array | undefined {
  checkHeader(ev);
  const v = ev.value;
  let b64: string | undefined;
  let room: number;
  if (typeof v === "string") room = v.length * 6 + 2;
  else if (v instanceof Uint8Array) {
    b64 = encodeBase64(v);
    room = b64.length + 1;
  } else throw invalidEvent("output `value` must be a string or a Uint8Array");
  if (ev.id !== lastIdBytesRaw) {
    lastIdBytes = utf8.encode(idJson(ev.id));
    lastIdBytesRaw = ev.id;
  }
  const max = E_OPEN.length + lastIdBytes.length + 64 + room;
  let dst: Uint8Array;
  let start = 0;
  const big = max > SLAB_BYTES / 4;
  if (big) {
    // Big text frames go through lineBytes (their size is not known without
    // a scan); big binary frames have an exact size: one unzeroed buffer,
    // the base64 text copied in natively.
    if (b64 === undefined) return undefined;
    dst = allocExact(max);
  } else {
    // A plain Uint8Array slab (not a Buffer): stores stay monomorphic.
    if (plainSlab === undefined || plainUsed + max > SLAB_BYTES) {
      plainSlab = new Uint8Array(SLAB_BYTES);
      plainUsed = 0;
    }
    dst = plainSlab;
    start = plainUsed;
  }
  let o = put(dst, start, E_OPEN);
  o = put(dst, o, lastIdBytes);
  o = put(dst, o, E_SEQ);
  // seq: a non-negative safe integer (checked above), in plain decimal.
  let seq = ev.seq;
  let digits = 1;
  for (let t = seq; t >= 10; t = Math.floor(t / 10)) digits++;
  for (let k = o + digits - 1; k >= o; k--) {
    dst[k] = 0x30 + (seq % 10);
    seq = Math.floor(seq / 10);
  }
  o += digits;
  o = put(dst, o, E_MIDDLE[ev.name][b64 === undefined ? "utf8" : "b64"]);
  if (b64 === undefined) o = writeJsonString(dst, o, v as string);
  else {
    if (big && NodeBuffer !== undefined) {
      o += (dst as ReturnType<NodeBufferStatic["allocUnsafeSlow"]>).write(b64, o, "latin1");
    } else {
      for (let i = 0; i < b64.length; i++) dst[o + i] = b64.charCodeAt(i);
      o += b64.length;
    }
    dst[o++] = 0x22;
  }
  dst[o++] = 0x7d;
  dst[o++] = 0x0a;
  if (big) return new Uint8Array(dst.buffer, dst.byteOffset, o);
  plainUsed = o;
  return new Uint8Array(dst.buffer, start, o - start);
}

/**
 * A producer's failure as its exec-wire line: `{"id"?,"name":"error","code",
 * "message","earliestSeq"?}` (id first when present, like every frame).
 */
export function encodeErrorFrame(frame: ErrorFrame): Uint8Array {
  return lineBytes(errorFrameToJson(frame));
}

/** The canonical JSON text of an error frame, without the line end. */
export function errorFrameToJson(frame: ErrorFrame): string {
  if (typeof frame.code !== "string" || frame.code === "") {
    throw invalidEvent("error frame `code` must be a non-empty string");
  }
  let s = "{";
  if (frame.id !== undefined) s += `"id":${JSON.stringify(frame.id)},`;
  s += `"name":"error","code":${JSON.stringify(frame.code)},"message":${JSON.stringify(String(frame.message ?? ""))}`;
  if (frame.earliestSeq !== undefined) {
    if (!Number.isSafeInteger(frame.earliestSeq))
      throw invalidEvent("`earliestSeq` must be an integer");
    s += `,"earliestSeq":${frame.earliestSeq}`;
  }
  return `${s}}`;
}

type Source<T> = ReadableStream<T> | AsyncIterable<T>;

/** A ReadableStream that is also typed (and guaranteed at run time) as async-iterable. */
export type IterableStream<T> = ReadableStream<T> & AsyncIterable<T>;

function iteratorOf<T>(source: Source<T>): AsyncIterator<T> {
  // A ReadableStream is read through its reader even where it is async-
  // iterable: one promise per chunk instead of two (the iterator wraps
  // read()), which matters with many small chunks.
  if (typeof (source as ReadableStream<T>).getReader === "function") {
    const reader = (source as ReadableStream<T>).getReader();
    return {
      next: () => reader.read() as Promise<IteratorResult<T>>,
      return: async (value?: unknown) => {
        await reader.cancel(value);
        return { done: true, value: undefined as T };
      },
    };
  }
  return (source as AsyncIterable<T>)[Symbol.asyncIterator]();
}

/**
 * Node 20's ReadableStream is async-iterable (verified by a test); engines
 * where it is not get a reader-based iterator, so callers can always
 * `for await` the result.
 */
function asIterable<T>(stream: ReadableStream<T>): IterableStream<T> {
  const s = stream as IterableStream<T>;
  if (typeof s[Symbol.asyncIterator] !== "function") {
    Object.defineProperty(s, Symbol.asyncIterator, {
      configurable: true,
      value(): AsyncIterator<T> {
        const reader = stream.getReader();
        return {
          next: () => reader.read() as Promise<IteratorResult<T>>,
          return: async () => {
            await reader.cancel();
            reader.releaseLock();
            return { done: true, value: undefined as T };
          },
          [Symbol.asyncIterator]() {
            return this;
          },
        } as AsyncIterator<T>;
      },
    });
  }
  return s;
}

/** Encodes a stream of events to exec-wire bytes, one frame per chunk. */
export function encodeExecEvents(source: Source<ExecEvent>): IterableStream<Uint8Array> {
  let it: AsyncIterator<ExecEvent> | undefined;
  return asIterable(
    new ReadableStream<Uint8Array>({
      async pull(controller) {
        it ??= iteratorOf(source);
        const r = await it.next();
        if (r.done) controller.close();
        else controller.enqueue(encodeExecEvent(r.value));
      },
      async cancel(reason) {
        it ??= iteratorOf(source);
        await it.return?.(reason);
      },
    }),
  );
}

// ---------------------------------------------------------------------------
// Decoding

export interface ExecWireDecodeOptions {
  /** Longest allowed line in bytes, excluding its line end (default 64 MiB). */
  maxLineBytes?: number;
  /**
   * Report malformed (`EINVAL`) and over-long (`ELIMIT`) lines here and go on
   * with the next line. Without it the first such line fails the decode.
   * A producer's `error` frame always ends the stream, whatever this says.
   */
  onError?: (err: ExecWireError) => void;
  /**
   * Frames with an unknown `name` that carry an `id` are extensions from a
   * newer producer: they are skipped, and handed here if given.
   */
  onUnknownFrame?: (frame: Record<string, unknown>, line: number) => void;
  /**
   * `"as-sent"` (default): `utf8` frames give a string, `b64` frames a
   * Uint8Array. `"bytes"`: every output value is a Uint8Array (utf8 text is
   * encoded back to its bytes). There is no "text" mode on purpose: a b64
   * chunk may end inside a character, so text needs a per-stream streaming
   * decoder, which belongs to the consumer (see docs/protocol.md).
   */
  values?: "as-sent" | "bytes";
  /** Use the canonical-shape fast path (default true). Off: JSON.parse every line (for testing). */
  fastPath?: boolean;
}

const LF = 0x0a;
const CR = 0x0d;
/** Lines at least this long try the byte fast path (fastOutputBytes) before any text decoding. */
const LONG_LINE = 1024;
const HEAD_BYTES = 480;

const OUTPUT_NAMES = new Set(["stdout", "stderr"]);

function decodeError(line: number, text: string, why: string, cause?: unknown): ExecWireError {
  return new ExecWireError("EINVAL", `exec-wire line ${line}: ${why}`, line, excerptOf(text), {
    cause,
  });
}

/** True when `s[from..to)` can be a JSON string body as-is: no quote, backslash or control char. */
function plainJsonChars(s: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c) return false;
  }
  return true;
}

// The fixed parts of a canonical output frame, as char codes.
const codes = (lit: string): Uint16Array => Uint16Array.from(lit, (c) => c.charCodeAt(0));
const L_OPEN = codes('{"id":"');
const L_SEQ = codes('","seq":');
const L_STDOUT = codes(',"name":"stdout","enc":"');
const L_STDERR = codes(',"name":"stderr","enc":"');
const L_UTF8 = codes('utf8","value":"');
const L_B64 = codes('b64","value":"');
let lastId = "";

/** True when `s` has the literal `lit` at `p` (and room for it before `end`). */
function at(s: string, p: number, end: number, lit: Uint16Array): boolean {
  const n = lit.length;
  if (p + n > end) return false;
  for (let i = 0; i < n; i++) if (s.charCodeAt(p + i) !== lit[i]) return false;
  return true;
}

/**
 * Parses `s[start..end)` when it is in our canonical stdout/stderr shape,
 * without JSON.parse. Returns undefined for anything else (then the generic
 * path decides, including which error to raise); where it answers, the
 * answer is exactly the generic path's (a property test holds them equal).
 */
function fastOutput(s: string, start: number, end: number): OutputEvent | undefined {
  // {"id":"<id>","seq":<n>,"name":"stdout","enc":"utf8","value":"<v>"}
  if (!at(s, start, end, L_OPEN)) return undefined;
  const idStart = start + L_OPEN.length;
  const idEnd = s.indexOf('"', idStart);
  if (idEnd < 0 || !at(s, idEnd, end, L_SEQ)) return undefined;
  // Consecutive frames mostly share one id: reuse the string (no allocation,
  // and no slice of this chunk's text kept alive by a long-lived id).
  let id = lastId;
  let same = idEnd - idStart === id.length;
  for (let i = 0; same && i < id.length; i++) same = s.charCodeAt(idStart + i) === id.charCodeAt(i);
  if (!same) {
    if (!plainJsonChars(s, idStart, idEnd)) return undefined;
    id = JSON.parse(s.slice(idStart - 1, idEnd + 1)) as string; // a fresh, flat copy
    lastId = id;
  }
  let p = idEnd + L_SEQ.length;
  const d0 = p;
  let seq = 0;
  for (; p < end; p++) {
    const c = s.charCodeAt(p);
    if (c < 0x30 || c > 0x39) break;
    seq = seq * 10 + (c - 0x30);
  }
  const digits = p - d0;
  if (digits === 0 || digits > 15 || (digits > 1 && s.charCodeAt(d0) === 0x30)) return undefined;
  let name: "stdout" | "stderr";
  if (at(s, p, end, L_STDOUT)) name = "stdout";
  else if (at(s, p, end, L_STDERR)) name = "stderr";
  else return undefined;
  p += L_STDOUT.length;
  let b64: boolean;
  if (at(s, p, end, L_UTF8)) {
    b64 = false;
    p += L_UTF8.length;
  } else if (at(s, p, end, L_B64)) {
    b64 = true;
    p += L_B64.length;
  } else return undefined;
  // The value runs to the line's closing `"}`. If its body is a valid JSON
  // string body, every quote inside is escaped, so the literal really ends
  // at the line's last quote and the object right after it.
  const vEnd = end - 2;
  if (vEnd < p || s.charCodeAt(vEnd) !== 0x22 || s.charCodeAt(vEnd + 1) !== 0x7d) return undefined;
  let value: Chunk;
  if (b64) {
    // Base64 text needs no escapes, and the strict decode rejects anything
    // outside its alphabet. Decline (not raise) so the generic path names
    // the error, and so an escaped body like "\/" gets JSON's reading.
    try {
      value = decodeBase64(s.slice(p, vEnd));
    } catch {
      return undefined;
    }
  } else if (plainJsonChars(s, p, vEnd)) {
    value = s.slice(p, vEnd);
  } else {
    const v = escapedLiteral(s, p, vEnd);
    if (v === undefined) return undefined;
    value = v;
  }
  return { id, seq, name, value };
}

/**
 * The string literal `s[p - 1, vEnd]` (quotes included) with escapes
 * (typically "\n"), or undefined if it is not valid JSON. JSON.parse of just
 * the literal is ~4x cheaper than of the whole line (and than a hand-written
 * unescaper, measured). If it succeeds, every quote inside is escaped.
 */
function escapedLiteral(s: string, p: number, vEnd: number): string | undefined {
  try {
    return JSON.parse(s.slice(p - 1, vEnd + 1)) as string;
  } catch {
    return undefined;
  }
}

// The same literals as bytes, for the all-ASCII fast path.
const bytesOf = (lit: Uint16Array): Uint8Array => Uint8Array.from(lit);
const B_OPEN = bytesOf(L_OPEN);
const B_SEQ = bytesOf(L_SEQ);
const B_STDOUT = bytesOf(L_STDOUT);
const B_STDERR = bytesOf(L_STDERR);
const B_UTF8 = bytesOf(L_UTF8);
const B_B64 = bytesOf(L_B64);

function atBytes(b: Uint8Array, p: number, end: number, lit: Uint8Array): boolean {
  const n = lit.length;
  if (p + n > end) return false;
  for (let i = 0; i < n; i++) if (b[p + i] !== lit[i]) return false;
  return true;
}

/**
 * `fastOutput` read from bytes, `b[start, end)` (no CR). Reading structure
 * from a Uint8Array is ~2x cheaper than `charCodeAt` (measured).
 * - With `s` (the same text at the same offsets, for an all-ASCII chunk):
 *   strings are sliced from `s`; utf8 and b64 frames.
 * - Without (a long line nobody decoded): b64 frames only, the base64 handed
 *   to the native decoder as one latin1 copy. Large raw-byte frames are the
 *   bulk of a busy stream, and decoding each whole line to text first cost a
 *   client ~10% of its CPU (a 1 GiB stream).
 * Same contract as `fastOutput`: exactly the generic answer, or undefined
 * (ids that are not plain printable ASCII, any deviation: the text path decides).
 */
function fastOutputBytes(
  b: Uint8Array,
  s: string | undefined,
  start: number,
  end: number,
): OutputEvent | undefined {
  if (!atBytes(b, start, end, B_OPEN)) return undefined;
  const idStart = start + B_OPEN.length;
  let idEnd = idStart;
  for (; idEnd < end; idEnd++) {
    const c = b[idEnd]!;
    if (c === 0x22) break;
    // Printable ASCII without escapes only: then the id's characters are its bytes.
    if (c < 0x20 || c === 0x5c || c > 0x7e) return undefined;
  }
  if (!atBytes(b, idEnd, end, B_SEQ)) return undefined;
  let id = lastId;
  let same = idEnd - idStart === id.length;
  for (let i = 0; same && i < id.length; i++) same = b[idStart + i] === id.charCodeAt(i);
  if (!same) {
    if (idEnd - idStart > 256) return undefined; // keeps the spread below small
    id = String.fromCharCode(...b.subarray(idStart, idEnd)); // a fresh, flat copy
    lastId = id;
  }
  let p = idEnd + B_SEQ.length;
  const d0 = p;
  let seq = 0;
  for (; p < end; p++) {
    const c = b[p]!;
    if (c < 0x30 || c > 0x39) break;
    seq = seq * 10 + (c - 0x30);
  }
  const digits = p - d0;
  if (digits === 0 || digits > 15 || (digits > 1 && b[d0] === 0x30)) return undefined;
  let name: "stdout" | "stderr";
  if (atBytes(b, p, end, B_STDOUT)) name = "stdout";
  else if (atBytes(b, p, end, B_STDERR)) name = "stderr";
  else return undefined;
  p += B_STDOUT.length;
  let b64: boolean;
  if (atBytes(b, p, end, B_UTF8)) {
    b64 = false;
    p += B_UTF8.length;
  } else if (atBytes(b, p, end, B_B64)) {
    b64 = true;
    p += B_B64.length;
  } else return undefined;
  const vEnd = end - 2;
  if (vEnd < p || b[vEnd] !== 0x22 || b[vEnd + 1] !== 0x7d) return undefined;
  let value: Chunk;
  if (b64) {
    try {
      if (s !== undefined) value = decodeBase64Ascii(s.slice(p, vEnd));
      else if (decodeBase64Bytes !== undefined) value = decodeBase64Bytes(b, p, vEnd);
      else return undefined;
    } catch {
      return undefined;
    }
  } else {
    if (s === undefined) return undefined;
    let plain = true;
    for (let i = p; i < vEnd; i++) {
      const c = b[i]!;
      if (c < 0x20 || c === 0x22 || c === 0x5c) {
        plain = false;
        break;
      }
    }
    if (plain) value = s.slice(p, vEnd);
    else {
      const v = escapedLiteral(s, p, vEnd);
      if (v === undefined) return undefined;
      value = v;
    }
  }
  return { id, seq, name, value };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** JSON whitespace only (space, tab, CR, LF): such a line counts as blank. */
function isJsonBlank(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0d && c !== 0x0a) return false;
  }
  return true;
}

const textDecoder = new TextDecoder("utf-8", { ignoreBOM: true });

/**
 * The exec-wire decoder for callers without streams: feed byte chunks split
 * anywhere, get complete events back in batches.
 *
 * Errors: without `onError`, a malformed or over-long line fails the decoder;
 * so does a producer's error frame (always). `push` first returns the events
 * that came before the failure in that chunk, and the next `push`/`end`
 * throws the `ExecWireError` (immediately if there were no such events), so
 * nothing decoded is lost. Once failed, every later call throws it again.
 */
export class ExecWireDecoder<V extends Chunk = Chunk> {
  readonly #max: number;
  readonly #onError: ((err: ExecWireError) => void) | undefined;
  readonly #onUnknown: ExecWireDecodeOptions["onUnknownFrame"];
  readonly #bytes: boolean;
  readonly #fast: boolean;
  readonly #pending = new PendingBytes();
  #line = 0;
  #skipping = false;
  #failed: ExecWireError | undefined;
  #failedThrown = false;
  #ended = false;

  constructor(options: ExecWireDecodeOptions = {}) {
    this.#max = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    this.#onError = options.onError;
    this.#onUnknown = options.onUnknownFrame;
    this.#bytes = options.values === "bytes";
    this.#fast = options.fastPath ?? true;
  }

  /** Number of lines completed so far (1-based numbering; blank lines counted). */
  get lineNumber(): number {
    return this.#line;
  }

  /**
   * Feeds a chunk; returns the events completed by it, in order. A chunk of
   * 16 KiB or more that ends inside a line is kept as a view until that line
   * completes: do not modify it after pushing (smaller ones are copied).
   */
  push(chunk: Uint8Array): ExecEvent<V>[] {
    const out: ExecEvent<V>[] = [];
    this.#check();
    this.#push(chunk, out);
    return this.#settle(out);
  }

  /** Ends the input: decodes a final line that had no "\n". */
  end(): ExecEvent<V>[] {
    const out: ExecEvent<V>[] = [];
    this.#check();
    this.endInto(out);
    return this.#settle(out);
  }

  /** The error that failed this decoder, if any (also for stream wrappers). */
  get error(): ExecWireError | undefined {
    return this.#failed;
  }

  #check(): void {
    if (this.#failed !== undefined) {
      this.#failedThrown = true;
      throw this.#failed;
    }
    if (this.#ended) throw new ComputerError("ECLOSED", "exec-wire decoder already ended");
  }

  #settle(out: ExecEvent<V>[]): ExecEvent<V>[] {
    if (this.#failed !== undefined && out.length === 0 && !this.#failedThrown) {
      this.#failedThrown = true;
      throw this.#failed;
    }
    return out;
  }

  /** Internal: push without throwing (stream wrappers read `error` afterwards). */
  pushInto(chunk: Uint8Array, out: ExecEvent<V>[]): void {
    if (this.#failed === undefined) this.#push(chunk, out);
  }

  /** Internal: end without throwing. */
  endInto(out: ExecEvent<V>[]): void {
    if (this.#failed !== undefined || this.#ended) return;
    this.#ended = true;
    if (this.#skipping) {
      this.#skipping = false;
      this.#line++;
    } else if (this.#pending.length > 0) {
      this.#line++;
      const line = this.#pending.take();
      this.#lineFromBytes(line, 0, line.length, out);
    }
  }

  #push(chunk: Uint8Array, out: ExecEvent<V>[]): void {
    const n = chunk.length;
    if (n === 0) return;
    let pos = 0;
    // 1. Finish the line that was waiting for its LF.
    if (this.#pending.length > 0 || this.#skipping) {
      const lf = indexOfByte(chunk, LF);
      if (lf === -1) {
        this.#buffer(chunk, 0, n);
        return;
      }
      this.#line++;
      if (this.#skipping) this.#skipping = false;
      else {
        const line = this.#pending.take(chunk, 0, lf);
        this.#lineFromBytes(line, 0, line.length, out);
        if (this.#failed !== undefined) return;
      }
      pos = lf + 1;
    }
    // 2. All complete lines in this chunk, decoded to text in one call.
    const last = lastIndexOfByte(chunk, LF);
    if (last >= pos) {
      // Short lines: decode them all to text at once (one call for many
      // frames). A long first line suggests large frames: line by line, so
      // each can take the byte fast path.
      if (last - pos <= this.#max && indexOfByte(chunk, LF, pos) - pos < LONG_LINE) {
        const region = chunk.subarray(pos, last);
        const text = textDecoder.decode(region);
        // Same length in UTF-16 units as in bytes means every character is
        // one byte (ASCII, or U+FFFD for one invalid byte): byte and char
        // offsets coincide, and the fast path can read the bytes.
        this.#lines(text, text.length === region.length ? region : undefined, out);
      } else {
        // Some line here may exceed the limit: measure each one in bytes.
        while (pos <= last && this.#failed === undefined) {
          const lf = indexOfByte(chunk, LF, pos);
          this.#line++;
          this.#lineFromBytes(chunk, pos, lf, out);
          pos = lf + 1;
        }
      }
      if (this.#failed !== undefined) return;
      pos = last + 1;
    }
    // 3. Keep the start of the next line.
    if (pos < n) this.#buffer(chunk, pos, n);
  }

  #buffer(chunk: Uint8Array, start: number, end: number): void {
    if (this.#skipping) return;
    this.#pending.append(chunk, start, end);
    // max + 1 may still be a max-byte line plus the CR of a CRLF.
    if (this.#pending.length > this.#max + 1) {
      const head = this.#pending.head(Math.min(HEAD_BYTES, this.#max + 1));
      this.#pending.clear();
      this.#skipping = true;
      this.#tooLong(this.#line + 1, head);
    }
  }

  #tooLong(line: number, head: Uint8Array): void {
    const bytes = head.subarray(0, Math.min(HEAD_BYTES, this.#max + 1));
    this.#fail(
      new ExecWireError(
        "ELIMIT",
        `exec-wire line ${line} is longer than maxLineBytes (${this.#max} bytes)`,
        line,
        excerptOf(textDecoder.decode(bytes)),
      ),
    );
  }

  /** Reports a malformed/over-long line, or fails the decoder when there is no onError. */
  #fail(err: ExecWireError): void {
    if (this.#onError !== undefined) this.#onError(err);
    else this.#failed = err;
  }

  #lineFromBytes(buf: Uint8Array, start: number, end: number, out: ExecEvent<V>[]): void {
    const len = end - start - (end > start && buf[end - 1] === CR ? 1 : 0);
    if (len > this.#max) {
      this.#tooLong(this.#line, buf.subarray(start, end));
      return;
    }
    if (this.#fast && len >= LONG_LINE) {
      const ev = fastOutputBytes(buf, undefined, start, start + len);
      if (ev !== undefined) {
        out.push(ev as ExecEvent<V>);
        return;
      }
    }
    const bytes = start === 0 && end === buf.length ? buf : buf.subarray(start, end);
    const text = textDecoder.decode(bytes);
    this.#oneLine(text, text.length === bytes.length ? bytes : undefined, 0, text.length, out);
  }

  /** Text of one or more complete lines separated by "\n" (no final "\n"). */
  #lines(text: string, ascii: Uint8Array | undefined, out: ExecEvent<V>[]): void {
    let start = 0;
    for (;;) {
      const nl = text.indexOf("\n", start);
      this.#line++;
      this.#oneLine(text, ascii, start, nl === -1 ? text.length : nl, out);
      if (nl === -1 || this.#failed !== undefined) return;
      start = nl + 1;
    }
  }

  #oneLine(
    text: string,
    ascii: Uint8Array | undefined,
    start: number,
    end: number,
    out: ExecEvent<V>[],
  ): void {
    if (end > start && text.charCodeAt(end - 1) === CR) end--;
    // One BOM, only at the very start of the stream.
    if (this.#line === 1 && text.charCodeAt(start) === 0xfeff) start++;
    if (end === start) return;
    const r = decodeLineText(
      text,
      ascii,
      start,
      end,
      this.#line,
      this.#fast,
      this.#bytes,
      this.#onUnknown,
    );
    if (r === null) return;
    if (r instanceof ExecWireError) {
      // A producer's error frame always ends the stream (onError is for
      // malformed lines only).
      if (r.frame !== undefined) this.#failed = r;
      else this.#fail(r);
      return;
    }
    out.push(r as ExecEvent<V>);
  }
}

/**
 * Decodes the text of ONE exec-wire frame (a line without its line end), as
 * the stream decoder would decode that line: the same fast path, rules and
 * errors. For frames that arrive already split, above all the `data` of an
 * SSE event (WIRE.md §2), which is exactly one frame.
 * Returns null where the stream decoder would skip the line: blank text, or
 * an unknown `name` with an `id` (an extension from a newer producer).
 * @throws ExecWireError EINVAL (malformed; `line` is 1), or the producer's
 *   code for an `error` frame (with `earliestSeq` when given).
 */
export function decodeExecFrame(
  text: string,
  options: Pick<ExecWireDecodeOptions, "values" | "onUnknownFrame"> = {},
): ExecEvent | null {
  const bytes = options.values === "bytes";
  const r = decodeLineText(text, undefined, 0, text.length, 1, true, bytes, options.onUnknownFrame);
  if (r instanceof ExecWireError) throw r;
  return r;
}

/**
 * The text of one line, `text[start, end)` (no line end), to its event: the
 * canonical-shape fast path where it answers (from the bytes when `ascii`
 * holds them), else the authoritative JSON.parse path (parseFrame). Shared by
 * the stream decoder and decodeExecFrame so that both decode a line alike.
 */
function decodeLineText(
  text: string,
  ascii: Uint8Array | undefined,
  start: number,
  end: number,
  line: number,
  fast: boolean,
  bytes: boolean,
  onUnknown: ExecWireDecodeOptions["onUnknownFrame"],
): ExecEvent | ExecWireError | null {
  const ev = !fast
    ? undefined
    : ascii !== undefined
      ? fastOutputBytes(ascii, text, start, end)
      : fastOutput(text, start, end);
  if (ev !== undefined) {
    if (bytes && typeof ev.value === "string") ev.value = utf8.encode(ev.value);
    return ev;
  }
  const s = start === 0 && end === text.length ? text : text.slice(start, end);
  return parseFrame(s, line, bytes, onUnknown);
}

/**
 * JSON.parse a line and check every rule of WIRE.md §1. Returns the event,
 * an error (an error frame's error has `frame` set), or null for a line to
 * skip (blank, or an unknown frame with an id).
 */
function parseFrame(
  s: string,
  line: number,
  bytes: boolean,
  onUnknown: ExecWireDecodeOptions["onUnknownFrame"],
): ExecEvent | ExecWireError | null {
  let obj: unknown;
  try {
    obj = JSON.parse(s);
  } catch (cause) {
    if (isJsonBlank(s)) return null;
    return decodeError(line, s, "invalid JSON", cause);
  }
  if (!isRecord(obj)) {
    return decodeError(line, s, "a frame must be a JSON object");
  }
  const name = obj.name;
  if (name === "error") {
    const code = toErrorCode(obj.code);
    let message = typeof obj.message === "string" ? obj.message : "producer error";
    // A code this version does not know stays visible in the message.
    if (typeof obj.code === "string" && obj.code !== code) message = `${obj.code}: ${message}`;
    const extra: { frame: Record<string, unknown>; earliestSeq?: number } = { frame: obj };
    if (Number.isSafeInteger(obj.earliestSeq)) extra.earliestSeq = obj.earliestSeq as number;
    return new ExecWireError(code, message, line, excerptOf(s), extra);
  }
  const known = name === "stdout" || name === "stderr" || name === "exit" || name === "heartbeat";
  if (!known) {
    // A named frame we do not know, from a newer producer: skip it.
    if (typeof obj.id === "string" && typeof name === "string") {
      onUnknown?.(obj, line);
      return null;
    }
    return decodeError(
      line,
      s,
      typeof name === "string"
        ? `unknown name ${JSON.stringify(name)} with no id`
        : "missing or non-string `name`",
    );
  }
  if (typeof obj.id !== "string") {
    return decodeError(line, s, "missing or non-string `id`");
  }
  const seq = obj.seq;
  if (typeof seq !== "number" || !Number.isSafeInteger(seq) || seq < 0) {
    return decodeError(line, s, "`seq` must be a non-negative integer");
  }
  const id = obj.id;
  if (OUTPUT_NAMES.has(name)) {
    const enc = obj.enc;
    const value = obj.value;
    if (enc === undefined) return decodeError(line, s, "missing `enc`");
    if (typeof value !== "string") {
      return decodeError(line, s, "output `value` must be a string");
    }
    let v: Chunk;
    if (enc === "utf8") v = bytes ? utf8.encode(value) : value;
    else if (enc === "b64") {
      try {
        v = decodeBase64(value);
      } catch (cause) {
        return decodeError(line, s, "bad base64 in `value`", cause);
      }
    } else return decodeError(line, s, `unknown enc ${JSON.stringify(enc)}`);
    return { id, seq, name: name as "stdout" | "stderr", value: v };
  }
  if (name === "exit") {
    const value = obj.value;
    if (typeof value !== "number" || !Number.isSafeInteger(value)) {
      return decodeError(line, s, "exit `value` must be an integer");
    }
    const ev: ExitEvent = { id, seq, name: "exit", value };
    if (obj.signal !== undefined && obj.signal !== null) {
      if (typeof obj.signal !== "string") {
        return decodeError(line, s, "`signal` must be a string");
      }
      ev.signal = obj.signal;
    }
    if (obj.reason !== undefined && obj.reason !== null) {
      if (typeof obj.reason !== "string") {
        return decodeError(line, s, "`reason` must be a string");
      }
      ev.reason = obj.reason as ExitReason;
    }
    return ev;
  }
  // heartbeat
  const v = obj.value;
  if (!isRecord(v)) return decodeError(line, s, "heartbeat `value` must be an object");
  const { pid, elapsedMs, lastOutputMs } = v;
  if (
    typeof pid !== "number" ||
    typeof elapsedMs !== "number" ||
    typeof lastOutputMs !== "number"
  ) {
    return decodeError(line, s, "heartbeat needs numeric `pid`, `elapsedMs`, `lastOutputMs`");
  }
  const hb: HeartbeatEvent = {
    id,
    seq,
    name: "heartbeat",
    value: { pid, elapsedMs, lastOutputMs },
  };
  return hb;
}

/**
 * Decodes exec-wire bytes (a ReadableStream or any AsyncIterable of
 * Uint8Array) into a ReadableStream of events, also async-iterable. The
 * stream errors with an `ExecWireError` on a malformed line (unless
 * `onError` is given) and on a producer's error frame, after delivering
 * every event that came before it.
 */
export function decodeExecEvents<V extends Chunk = Chunk>(
  source: Source<Uint8Array>,
  options?: ExecWireDecodeOptions & { values?: "as-sent" },
): IterableStream<ExecEvent<V>>;
export function decodeExecEvents(
  source: Source<Uint8Array>,
  options: ExecWireDecodeOptions & { values: "bytes" },
): IterableStream<ExecEvent<Uint8Array>>;
export function decodeExecEvents(
  source: Source<Uint8Array>,
  options: ExecWireDecodeOptions = {},
): IterableStream<ExecEvent> {
  const decoder = new ExecWireDecoder(options);
  let it: AsyncIterator<Uint8Array> | undefined;
  const batch: ExecEvent[] = [];
  let deferred: ExecWireError | undefined;
  let pulled = false;
  let controllerRef: ReadableStreamDefaultController<ExecEvent> | undefined;
  const stream = new ReadableStream<ExecEvent>(
    {
      start(controller) {
        controllerRef = controller;
      },
      async pull(controller) {
        pulled = true;
        // An error found with events still to deliver waits one pull:
        // `controller.error` would discard events already queued.
        if (deferred !== undefined) {
          controller.error(deferred);
          return;
        }
        it ??= iteratorOf(source);
        // Read until this pull has something to deliver (or the end).
        for (;;) {
          const r = await it.next();
          if (r.done) decoder.endInto(batch);
          else decoder.pushInto(r.value, batch);
          for (let i = 0; i < batch.length; i++) controller.enqueue(batch[i]!);
          const delivered = batch.length > 0;
          batch.length = 0;
          const err = decoder.error;
          if (err !== undefined) {
            if (!r.done) await it.return?.(err);
            if (delivered) deferred = err;
            else controller.error(err);
            return;
          }
          if (r.done) {
            controller.close();
            return;
          }
          if (delivered) return;
        }
      },
      async cancel(reason) {
        it ??= iteratorOf(source);
        await it.return?.(reason);
      },
    },
    // Events are queued per chunk; pull again only when the reader waits.
    { highWaterMark: 0 },
  );

  // `for await` fast path. A ReadableStream costs a queue entry and a read
  // promise per chunk, which for small events costs more than decoding them
  // (~1.2 us per event, PERF-NOTES). When nothing has been read from the
  // stream yet, iteration locks it (so it behaves as a consumed stream to
  // everyone else) and takes the decoder's batches directly from the source.
  const standard = (stream as Partial<AsyncIterable<ExecEvent>>)[Symbol.asyncIterator];
  Object.defineProperty(stream, Symbol.asyncIterator, {
    configurable: true,
    value(this: ReadableStream<ExecEvent>, ...args: unknown[]): AsyncIterator<ExecEvent> {
      if (pulled || standard === undefined) {
        return standard !== undefined ? standard.apply(this, args as []) : readerIterator(this);
      }
      const reader = stream.getReader(); // throws if locked, as iteration must
      it ??= iteratorOf(source);
      const src = it;
      let buf: ExecEvent[] = [];
      let idx = 0;
      let finished = false;
      let failed: ExecWireError | undefined;
      // Settle the (unread) stream like a consumed one; it may already be
      // closed if it was cancelled, which is fine.
      const settle = (err?: unknown) => {
        try {
          if (err !== undefined) controllerRef?.error(err);
          else controllerRef?.close();
        } catch {}
        reader.releaseLock();
      };
      const finish = (err?: unknown) => {
        finished = true;
        settle(err);
      };
      const iterator: AsyncIterator<ExecEvent> & AsyncIterable<ExecEvent> = {
        async next(): Promise<IteratorResult<ExecEvent>> {
          if (idx < buf.length) return { done: false, value: buf[idx++]! };
          if (failed !== undefined) {
            const err = failed;
            failed = undefined;
            finish(err);
            throw err;
          }
          if (finished) return { done: true, value: undefined };
          buf = [];
          idx = 0;
          for (;;) {
            let r: IteratorResult<Uint8Array>;
            try {
              r = await src.next();
            } catch (err) {
              finish(err);
              throw err;
            }
            if (r.done) decoder.endInto(buf);
            else decoder.pushInto(r.value, buf);
            const err = decoder.error;
            if (err !== undefined) {
              if (!r.done) await src.return?.(err);
              if (buf.length > 0) {
                failed = err; // deliver what came before it first
                break;
              }
              finish(err);
              throw err;
            }
            if (r.done) {
              if (buf.length === 0) {
                finish();
                return { done: true, value: undefined };
              }
              finish();
              break;
            }
            if (buf.length > 0) break;
          }
          return { done: false, value: buf[idx++]! };
        },
        async return(): Promise<IteratorResult<ExecEvent>> {
          if (!finished) {
            finished = true;
            buf = [];
            await src.return?.();
            settle();
          }
          return { done: true, value: undefined };
        },
        [Symbol.asyncIterator]() {
          return this;
        },
      };
      return iterator;
    },
  });
  return stream as IterableStream<ExecEvent>;
}

function readerIterator<T>(stream: ReadableStream<T>): AsyncIterator<T> {
  const reader = stream.getReader();
  return {
    next: () => reader.read() as Promise<IteratorResult<T>>,
    return: async () => {
      await reader.cancel();
      reader.releaseLock();
      return { done: true, value: undefined as T };
    },
  };
}
