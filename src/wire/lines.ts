// Byte-level line splitter for the line-oriented wire formats (exec-wire's
// JSON lines; reusable by any LF-framed reader).
//
// Why it is shaped this way (see shared/PERF-NOTES.md): appending chunks to a
// string and searching it from the start is quadratic, and the streaming
// TextDecoder is 5x slower than decoding a complete line once. So we scan raw
// bytes for 0x0A with the native `indexOf`, hand out complete lines as byte
// views, and never decode text here at all. A line that spans chunks is kept
// as a list of segments and joined exactly once when its LF arrives: every
// buffered byte is copied once into a segment and once into the joined line,
// never re-scanned (the search for LF starts in the new bytes only).
//
// Small pieces (< 16 KiB) are copied into our own 64 KiB segments: 1-byte
// chunks would otherwise cost ~100 bytes of view object per byte, and a
// caller that reuses a small buffer (pooled sockets) stays safe. Pieces of
// 16 KiB and more are kept as views until the line completes (copying them
// doubled the cost of 64 KiB binary events): do not modify a large chunk
// after pushing it. Memory stays close to the length of the longest line.

import { ComputerError, type ErrorCode } from "./errors.js";

/** Default bound on one line (excluding its line end): 64 MiB, as WIRE.md §1 says. */
export const DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024;

/** Longest excerpt of an offending line that errors quote (UTF-16 code units). */
export const EXCERPT_CHARS = 120;

const LF = 0x0a;
const CR = 0x0d;
const SEGMENT_BYTES = 64 * 1024;
const VIEW_MIN_BYTES = 16 * 1024;

// Every byte of a joined line is written: skip zero-filling where the
// platform allows (Node's Buffer.allocUnsafeSlow: unpooled, exact size).
const allocUnsafeSlow = (globalThis as { Buffer?: { allocUnsafeSlow(n: number): Uint8Array } })
  .Buffer?.allocUnsafeSlow;
function allocBytes(n: number): Uint8Array {
  if (allocUnsafeSlow === undefined || n < 4096) return new Uint8Array(n);
  const b = allocUnsafeSlow(n);
  return new Uint8Array(b.buffer, b.byteOffset, n);
}
// 120 UTF-16 units never need more than 4 bytes per unit, plus slack.
const EXCERPT_HEAD_BYTES = EXCERPT_CHARS * 4;

const excerptDecoder = new TextDecoder("utf-8", { ignoreBOM: true });

// Byte search. V8's TypedArray#indexOf is a plain loop (~0.45 GB/s here);
// Node's Buffer#indexOf is memchr (~40 GB/s) and works on any Uint8Array.
// Found through globalThis so this module needs no `node:` import.
type ByteSearch = (this: Uint8Array, value: number, from?: number) => number;
const NodeBufferProto = (globalThis as { Buffer?: { prototype: Uint8Array } }).Buffer?.prototype as
  | { indexOf: ByteSearch; lastIndexOf: ByteSearch }
  | undefined;
const nativeIndexOf: ByteSearch = NodeBufferProto?.indexOf ?? Uint8Array.prototype.indexOf;
const nativeLastIndexOf: ByteSearch =
  NodeBufferProto?.lastIndexOf ?? Uint8Array.prototype.lastIndexOf;

/** Index of the first `byte` in `bytes` at or after `from`, or -1 (memchr speed on Node). */
export function indexOfByte(bytes: Uint8Array, byte: number, from = 0): number {
  return from >= bytes.length ? -1 : nativeIndexOf.call(bytes, byte, from);
}

/** Index of the last `byte` in `bytes`, or -1. */
export function lastIndexOfByte(bytes: Uint8Array, byte: number): number {
  return bytes.length === 0 ? -1 : nativeLastIndexOf.call(bytes, byte);
}

/**
 * At most `EXCERPT_CHARS` UTF-16 code units of `text`, never ending in half
 * of a surrogate pair (so the excerpt is always well-formed text).
 */
export function excerptOf(text: string): string {
  if (text.length <= EXCERPT_CHARS) return text;
  let end = EXCERPT_CHARS;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return text.slice(0, end);
}

/** Excerpt of a line given as bytes (decoded leniently: U+FFFD for invalid UTF-8). */
export function excerptOfBytes(bytes: Uint8Array): string {
  const head = bytes.length > EXCERPT_HEAD_BYTES ? bytes.subarray(0, EXCERPT_HEAD_BYTES) : bytes;
  return excerptOf(excerptDecoder.decode(head));
}

/** An error about one line of a line-framed stream: carries the 1-based line number and an excerpt. */
export class WireLineError extends ComputerError {
  /** 1-based line number in the stream (blank lines counted). */
  readonly line: number;
  /** At most 120 characters of the offending line. */
  readonly excerpt: string;

  constructor(
    code: ErrorCode,
    message: string,
    line: number,
    excerpt: string,
    extra?: { earliestSeq?: number; cause?: unknown },
  ) {
    super(code, message, extra);
    this.name = "WireLineError";
    this.line = line;
    this.excerpt = excerpt;
  }
}

/**
 * The bytes of a line that is still arriving, as a list of owned segments.
 * `append` copies each byte once; `take` joins once. Nothing is re-copied or
 * re-scanned while the line grows.
 */
export class PendingBytes {
  #segments: Uint8Array[] = [];
  #current: Uint8Array | null = null;
  #used = 0;
  #length = 0;

  /** Total bytes buffered. */
  get length(): number {
    return this.#length;
  }

  /**
   * Adds `src[start..end)`. Pieces under 16 KiB are copied; a larger piece is
   * kept as a view until `take` (copying it would double the cost of big
   * lines, measured: allocation and copy cost as much as decoding).
   */
  append(src: Uint8Array, start = 0, end = src.length): void {
    let n = end - start;
    if (n <= 0) return;
    this.#length += n;
    if (n >= VIEW_MIN_BYTES) {
      if (this.#current !== null) {
        this.#segments.push(this.#current.subarray(0, this.#used));
        this.#current = null;
        this.#used = 0;
      }
      this.#segments.push(src.subarray(start, end));
      return;
    }
    const cur = this.#current;
    if (cur !== null) {
      const room = cur.length - this.#used;
      if (n <= room) {
        cur.set(n === src.length ? src : src.subarray(start, end), this.#used);
        this.#used += n;
        return;
      }
      if (room > 0) {
        cur.set(src.subarray(start, start + room), this.#used);
        this.#used += room;
        start += room;
        n -= room;
      }
      this.#segments.push(cur);
    }
    const seg = new Uint8Array(Math.max(n, SEGMENT_BYTES));
    seg.set(src.subarray(start, end), 0);
    this.#current = seg;
    this.#used = n;
  }

  /** First `n` buffered bytes (or fewer if fewer are buffered), without consuming them. */
  head(n: number): Uint8Array {
    const out = new Uint8Array(Math.min(n, this.#length));
    let off = 0;
    for (const seg of this.#segments) {
      if (off >= out.length) return out;
      const k = Math.min(seg.length, out.length - off);
      out.set(seg.subarray(0, k), off);
      off += k;
    }
    if (this.#current !== null && off < out.length) {
      out.set(this.#current.subarray(0, out.length - off), off);
    }
    return out;
  }

  /**
   * Joins everything buffered plus `tail[start..end)` into one array and
   * empties the buffer. The single copy the line's bytes ever get.
   */
  take(tail?: Uint8Array, start = 0, end = tail ? tail.length : 0): Uint8Array {
    const extra = tail ? end - start : 0;
    const out = allocBytes(this.#length + extra);
    let off = 0;
    for (const seg of this.#segments) {
      out.set(seg, off);
      off += seg.length;
    }
    if (this.#current !== null) {
      out.set(this.#current.subarray(0, this.#used), off);
      off += this.#used;
    }
    if (tail && extra > 0) out.set(tail.subarray(start, end), off);
    this.clear();
    return out;
  }

  /** Drops everything buffered. */
  clear(): void {
    this.#segments = [];
    this.#current = null;
    this.#used = 0;
    this.#length = 0;
  }
}

/** Called once per line, LF and one trailing CR removed. `line` may view the caller's chunk: copy it to keep it past the call. */
export type LineHandler = (line: Uint8Array, lineNumber: number) => void;

export interface LineSplitterOptions {
  /** Longest allowed line in bytes, excluding its line end (default 64 MiB). */
  maxLineBytes?: number;
  /**
   * Called instead of throwing when a line exceeds `maxLineBytes`; the rest of
   * that line is then discarded and splitting continues with the next line.
   * Without it, `push`/`end` throw a `WireLineError` with code `ELIMIT`.
   */
  onTooLong?: (err: WireLineError) => void;
}

/**
 * Splits a byte stream into LF-terminated lines, in linear time for any
 * chunking. A line end is LF; one CR right before it is removed too (so CRLF
 * works). A final line without LF is delivered by `end()`. Blank lines are
 * delivered (as empty arrays) so callers can count them; line numbers are
 * 1-based and count every line.
 */
export class LineSplitter {
  readonly #onLine: LineHandler;
  readonly #max: number;
  readonly #onTooLong: ((err: WireLineError) => void) | undefined;
  readonly #pending = new PendingBytes();
  #lineNumber = 0;
  /** True while discarding the rest of an over-long line. */
  #skipping = false;

  constructor(onLine: LineHandler, options: LineSplitterOptions = {}) {
    this.#onLine = onLine;
    this.#max = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    this.#onTooLong = options.onTooLong;
  }

  /** Number of lines completed so far (including discarded ones). */
  get lineNumber(): number {
    return this.#lineNumber;
  }

  /** Bytes buffered for the line still arriving. */
  get pendingBytes(): number {
    return this.#pending.length;
  }

  push(chunk: Uint8Array): void {
    const n = chunk.length;
    let pos = 0;
    while (pos < n) {
      const lf = indexOfByte(chunk, LF, pos);
      if (lf === -1) {
        this.#buffer(chunk, pos, n);
        return;
      }
      this.#lineNumber++;
      if (this.#skipping) {
        // The end of a line already reported as too long.
        this.#skipping = false;
      } else if (this.#pending.length === 0) {
        this.#deliver(chunk, pos, lf);
      } else {
        const line = this.#pending.take(chunk, pos, lf);
        this.#deliver(line, 0, line.length);
      }
      pos = lf + 1;
    }
  }

  /** Delivers a final line that had no LF (if any bytes are buffered). */
  end(): void {
    if (this.#skipping) {
      this.#skipping = false;
      this.#lineNumber++;
      return;
    }
    if (this.#pending.length === 0) return;
    this.#lineNumber++;
    const line = this.#pending.take();
    this.#deliver(line, 0, line.length);
  }

  #deliver(buf: Uint8Array, start: number, end: number): void {
    if (end > start && buf[end - 1] === CR) end--;
    if (end - start > this.#max) {
      this.#tooLong(this.#lineNumber, buf.subarray(start, end));
      return;
    }
    this.#onLine(
      start === 0 && end === buf.length ? buf : buf.subarray(start, end),
      this.#lineNumber,
    );
  }

  #buffer(chunk: Uint8Array, start: number, end: number): void {
    if (this.#skipping) return;
    this.#pending.append(chunk, start, end);
    // max + 1 may still be a line of `max` bytes plus the CR of a CRLF; beyond
    // that the line is too long whatever follows, so stop buffering now.
    if (this.#pending.length > this.#max + 1) {
      const head = this.#pending.head(this.#headBytes());
      this.#pending.clear();
      this.#skipping = true;
      this.#tooLong(this.#lineNumber + 1, head);
    }
  }

  // The excerpt quotes the same bytes whichever way the line was chunked:
  // at least max + 1 bytes of it are known in both overflow paths.
  #headBytes(): number {
    return Math.min(EXCERPT_HEAD_BYTES, this.#max + 1);
  }

  #tooLong(lineNumber: number, bytes: Uint8Array): void {
    const head = bytes.subarray(0, this.#headBytes());
    const err = new WireLineError(
      "ELIMIT",
      `line ${lineNumber} is longer than maxLineBytes (${this.#max} bytes)`,
      lineNumber,
      excerptOfBytes(head),
    );
    if (this.#onTooLong === undefined) throw err;
    this.#onTooLong(err);
  }
}
