// Shared pieces of the line-oriented wire formats (exec-wire's JSON lines):
// the byte search for LF, the buffer for a line still arriving, the error
// that names a line, and the excerpt such errors quote.
//
// Why bytes (measured on Node 20): appending chunks to a
// string and searching it from the start is quadratic, and the streaming
// TextDecoder is 5x slower than decoding a complete line once. So decoders
// scan raw bytes for 0x0A with the native `indexOf` and decode text per
// complete line. A line that spans chunks is kept as a list of segments and
// joined exactly once when its LF arrives: every buffered byte is copied once
// into a segment and once into the joined line, never re-scanned (the search
// for LF starts in the new bytes only).
//
// Small pieces (< 16 KiB) are copied into our own 64 KiB segments: 1-byte
// chunks would otherwise cost ~100 bytes of view object per byte, and a
// caller that reuses a small buffer (pooled sockets) stays safe. Pieces of
// 16 KiB and more are kept as views until the line completes (copying them
// doubled the cost of 64 KiB binary events): do not modify a large chunk
// after pushing it to a decoder. Memory stays close to the length of the longest line.

import { ComputerError, type ErrorCode } from "./errors.js";

/** Default bound on one line (excluding its line end): 64 MiB (docs/protocol.md §1, "What a decoder must do"). */
export const DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024;

/** Longest excerpt of an offending line that errors quote (UTF-16 code units). */
const EXCERPT_CHARS = 120;

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
