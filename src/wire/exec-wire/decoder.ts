// The exec-wire push decoder: byte chunks split anywhere in, complete events
// out in batches (decode.ts turns each line into its event). The framing
// rules are docs/protocol.md §1, "What a decoder must do".
//
// Shape and speed decisions (figures: docs/benchmarks.md):
// - Bytes are scanned for LF (memchr on Node). Complete lines inside a chunk
//   are decoded to text with ONE non-streaming TextDecoder call per chunk and
//   split on "\n" in string space (UTF-8 never has 0x0A inside a character,
//   and the WHATWG decoder never swallows an ASCII byte into a replacement,
//   so this equals decoding line by line). The scanner then reads each
//   line's bytes, and slices strings from the text.
// - A line spanning chunks is kept as owned byte segments (lines.ts
//   PendingBytes) and joined once when its LF arrives: linear for any
//   chunking, never the streaming TextDecoder.
// - Long lines (1 KiB or more) are decoded one by one, first from their
//   bytes: a big b64 frame never becomes text.
// - `push` returns arrays of events so hot paths pay no per-event stream
//   hop; the stream wrappers (stream.ts) use `pushInto`/`endInto`.
// Every piece of state (the pending line, the line count, the id memo) is
// this decoder's own: decoders never share anything.

import { ComputerError } from "../errors.js";
import {
  DEFAULT_MAX_LINE_BYTES,
  excerptOf,
  indexOfByte,
  lastIndexOfByte,
  PendingBytes,
} from "../lines.js";
import type { Chunk, ExecEvent } from "../types.js";
import {
  decodeLine,
  type ExecWireDecodeOptions,
  ExecWireError,
  type LineRules,
  lineRules,
  scanOutputFrame,
} from "./decode.js";

const LF = 0x0a;
const CR = 0x0d;
/** Lines at least this long try the byte scanner before any text decoding. */
const LONG_LINE = 1024;
/** Bytes of an over-long line kept for its excerpt (120 characters of at most 4 bytes). */
const HEAD_BYTES = 480;

const textDecoder = new TextDecoder("utf-8", { ignoreBOM: true });

/**
 * The exec-wire decoder for callers without streams: feed byte chunks split
 * anywhere, get complete events back in batches.
 *
 * Errors: without `onError`, a malformed or over-long line fails the decoder;
 * so does a producer's error frame (always). The `push`/`end` that makes the
 * failure known throws the `ExecWireError` at once (an over-long line as soon
 * as the bytes pending for it pass the limit, before its LF), and the events
 * that chunk completed before the failure travel with it as `error.events`,
 * so nothing decoded is lost and no caller waits for input that may never
 * come to learn of the error. Once failed, every later call throws it again
 * (without `events`).
 */
export class ExecWireDecoder<V extends Chunk = Chunk> {
  readonly #max: number;
  readonly #onError: ((err: ExecWireError) => void) | undefined;
  readonly #rules: LineRules;
  readonly #pending = new PendingBytes();
  #line = 0;
  #skipping = false;
  #failed: ExecWireError | undefined;
  #failedThrown = false;
  #ended = false;

  constructor(options: ExecWireDecodeOptions = {}) {
    this.#max = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    this.#onError = options.onError;
    this.#rules = lineRules(options);
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
      delete this.#failed.events; // delivered once, by the call that failed
      throw this.#failed;
    }
    if (this.#ended) throw new ComputerError("ECLOSED", "exec-wire decoder already ended");
  }

  #settle(out: ExecEvent<V>[]): ExecEvent<V>[] {
    if (this.#failed !== undefined && !this.#failedThrown) {
      this.#failedThrown = true;
      if (out.length > 0) this.#failed.events = out;
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
    // 2. All complete lines in this chunk.
    const last = lastIndexOfByte(chunk, LF);
    if (last >= pos) {
      // Short lines: decode them all to text at once (one call for many
      // frames). A long first line suggests large frames: line by line, so
      // each can take the byte scanner.
      if (last - pos <= this.#max && indexOfByte(chunk, LF, pos) - pos < LONG_LINE) {
        const region = chunk.subarray(pos, last);
        this.#lines(textDecoder.decode(region), region, out);
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
    const rules = this.#rules;
    if (rules.fast && len >= LONG_LINE) {
      const ev = scanOutputFrame(buf, start, start + len, undefined, 0, 0, rules.lastId);
      if (ev !== undefined) {
        rules.lastId = ev.id;
        out.push(ev as ExecEvent<V>);
        return;
      }
    }
    const text = textDecoder.decode(buf.subarray(start, end));
    this.#oneLine(text, 0, text.length, buf, start, end, out);
  }

  /**
   * Complete lines separated by "\n" (no final "\n"): their text, and the
   * bytes it was decoded from.
   */
  #lines(text: string, region: Uint8Array, out: ExecEvent<V>[]): void {
    // As many characters as bytes: every character came from one byte
    // (ASCII, or U+FFFD for one invalid byte), so byte and character offsets
    // coincide. Otherwise each line's bytes are found by their own LF.
    const sameOffsets = text.length === region.length;
    let start = 0;
    let bStart = 0;
    for (;;) {
      const nl = text.indexOf("\n", start);
      const end = nl === -1 ? text.length : nl;
      const bEnd = sameOffsets ? end : nl === -1 ? region.length : indexOfByte(region, LF, bStart);
      this.#line++;
      this.#oneLine(text, start, end, region, bStart, bEnd, out);
      if (nl === -1 || this.#failed !== undefined) return;
      start = nl + 1;
      bStart = bEnd + 1;
    }
  }

  /** One line, `text[start, end)` decoded from `b[bStart, bEnd)`, line end excluded. */
  #oneLine(
    text: string,
    start: number,
    end: number,
    b: Uint8Array,
    bStart: number,
    bEnd: number,
    out: ExecEvent<V>[],
  ): void {
    if (end > start && text.charCodeAt(end - 1) === CR) {
      end--;
      bEnd--;
    }
    // One BOM (EF BB BF), only at the very start of the stream.
    if (this.#line === 1 && text.charCodeAt(start) === 0xfeff) {
      start++;
      bStart += 3;
    }
    if (end === start) return;
    const r = decodeLine(text, start, end, b, bStart, bEnd, this.#line, this.#rules);
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
