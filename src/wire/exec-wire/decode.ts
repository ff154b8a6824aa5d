// exec-wire decoding of ONE line (a frame without its line end) to its
// event: the rules of docs/protocol.md §1 ("What a decoder must do"), shared
// by the push decoder (decoder.ts) and decodeExecFrame, so that a frame
// decodes alike whichever way it arrived (a property test holds them equal).
//
// Two paths, one authority:
// - `scanOutputFrame` reads a stdout/stderr frame in our own canonical shape
//   (prefix checks, a digit loop, one small JSON.parse of the value only when
//   it has escapes). It either returns exactly what the generic path would,
//   or declines (a property test holds the two paths equal on any line).
// - `parseFrame` is JSON.parse of the whole line plus every validation rule:
//   the authority for anything the scanner declines, and the one that names
//   errors.
//
// One scanner for text and bytes: `scanOutputFrame` reads the line's UTF-8
// bytes (reading a Uint8Array is ~2x cheaper than charCodeAt, and a long b64
// line need never become text at all) and only slices strings from the text.
// A line that exists only as text (decodeExecFrame: an SSE `data`) is fed as
// its UTF-8 (encodeInto, into a scratch buffer; only a head of a long one,
// whose value is then read from the text); a chunk with non-ASCII text
// gives each line's bytes alongside its text (byte and character offsets
// then differ, and the scanner maps the value's position from one to the
// other). Measured against separate string and byte scanners (CPU time,
// Node 20): the same speed within noise on ASCII text and big b64 chunks,
// 10-20% faster on non-ASCII text and on decodeExecFrame of text frames
// (bytes are cheaper to read than charCodeAt). The other way to share one
// scanner, reading either input through a type test per character, was
// 5-25% slower, so it was not kept.
//
// State: the id memo (consecutive frames mostly share one id, whose string
// is then reused instead of allocated) is owned by the caller, one per
// decoder; decodeExecFrame's memo and scratch are explained where they are.

import { decodeBase64, decodeBase64Ascii, decodeBase64Bytes } from "../base64.js";
import { type ErrorCode, toErrorCode } from "../errors.js";
import { excerptOf, WireLineError } from "../lines.js";
import type {
  Chunk,
  ExecEvent,
  ExitEvent,
  ExitReason,
  HeartbeatEvent,
  OutputEvent,
} from "../types.js";

/**
 * A malformed line (`EINVAL`), an over-long line (`ELIMIT`), or a producer's
 * `error` frame (its own `code`, e.g. `ELOG_TRUNCATED` with `earliestSeq`).
 */
export class ExecWireError extends WireLineError {
  /** For a producer's error frame: the frame's fields as received. */
  readonly frame?: Record<string, unknown>;
  /**
   * Thrown by ExecWireDecoder.push/end: the events that chunk completed
   * before the failure, delivered with the error so none is lost.
   */
  events?: ExecEvent[];

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

/** How the lines of one stream are decoded (fixed), plus its id memo. */
export interface LineRules {
  readonly fast: boolean;
  readonly bytes: boolean;
  readonly onUnknown: ExecWireDecodeOptions["onUnknownFrame"];
  /** The id of the last frame the scanner read (reused while frames repeat it). */
  lastId: string;
}

/** The rules for `options`, with an empty id memo. */
export function lineRules(options: ExecWireDecodeOptions): LineRules {
  return {
    fast: options.fastPath ?? true,
    bytes: options.values === "bytes",
    onUnknown: options.onUnknownFrame,
    lastId: "",
  };
}

const utf8 = new TextEncoder();

/**
 * Decodes the text of ONE exec-wire frame (a line without its line end), as
 * the stream decoder would decode that line: the same fast path, rules and
 * errors. For frames that arrive already split, above all the `data` of an
 * SSE event (docs/protocol.md §2), which is exactly one frame.
 * Returns null where the stream decoder would skip the line: blank text, or
 * an unknown `name` with an `id` (an extension from a newer producer).
 * @throws ExecWireError EINVAL (malformed; `line` is 1), or the producer's
 *   code for an `error` frame (with `earliestSeq` when given).
 */
export function decodeExecFrame(
  text: string,
  options: Pick<ExecWireDecodeOptions, "values" | "onUnknownFrame"> = {},
): ExecEvent | null {
  const rules = lineRules(options);
  rules.lastId = frameLastId;
  const b = utf8Of(text);
  const r = decodeLine(text, 0, text.length, b, 0, b.length, 1, rules);
  frameLastId = rules.lastId;
  if (r instanceof ExecWireError) throw r;
  return r;
}

// decodeExecFrame's state, shared by every caller in the process, and safe:
// `frameLastId` is a pure memo (an immutable string, compared with the
// frame's id before it is reused); `frameScratch` holds the UTF-8 of the
// frame being decoded, is overwritten before every use and never handed out
// (event strings are sliced from the text, never from these bytes), and no
// code of anyone else's runs while it is in use.
let frameLastId = "";
const FRAME_SCRATCH_BYTES = 64 * 1024;
/** Bytes of a long frame's head: more than the longest header the scanner reads. */
const FRAME_HEAD_BYTES = 512;
let frameScratch: Uint8Array | undefined;

/**
 * The UTF-8 of `text` when it surely fits the scratch buffer, else of a head
 * of it (fewer bytes than `text` has characters: the scanner's sign for a
 * head). Encoding a long b64 frame whole would cost half as much again as
 * decoding it (measured), and the scanner needs only its structure.
 */
function utf8Of(text: string): Uint8Array {
  frameScratch ??= new Uint8Array(FRAME_SCRATCH_BYTES);
  const whole = text.length * 3 <= FRAME_SCRATCH_BYTES;
  const dst = whole ? frameScratch : frameScratch.subarray(0, FRAME_HEAD_BYTES);
  return frameScratch.subarray(0, utf8.encodeInto(text, dst).written);
}

/**
 * One line to its event. The line is `text[start, end)` (no line end) and,
 * when given, its UTF-8 bytes `b[bStart, bEnd)`: the scanner reads those, and
 * slices strings from the text. Returns the event, an error (an error
 * frame's error has `frame` set), or null for a line to skip (blank, or an
 * unknown frame with an id).
 */
export function decodeLine(
  text: string,
  start: number,
  end: number,
  b: Uint8Array | undefined,
  bStart: number,
  bEnd: number,
  line: number,
  rules: LineRules,
): ExecEvent | ExecWireError | null {
  if (rules.fast && b !== undefined) {
    const ev = scanOutputFrame(b, bStart, bEnd, text, start, end, rules.lastId);
    if (ev !== undefined) {
      rules.lastId = ev.id;
      if (rules.bytes && typeof ev.value === "string") ev.value = utf8.encode(ev.value);
      return ev;
    }
  }
  const s = start === 0 && end === text.length ? text : text.slice(start, end);
  return parseFrame(s, line, rules);
}

// ---------------------------------------------------------------------------
// The canonical-shape scanner

// {"id":"<id>","seq":<n>,"name":"stdout","enc":"utf8","value":"<v>"}
const codes = (lit: string): Uint8Array => Uint8Array.from(lit, (c) => c.charCodeAt(0));
const L_OPEN = codes('{"id":"');
const L_SEQ = codes('","seq":');
const L_STDOUT = codes(',"name":"stdout","enc":"');
const L_STDERR = codes(',"name":"stderr","enc":"');
const L_UTF8 = codes('utf8","value":"');
const L_B64 = codes('b64","value":"');
/** Longest id the scanner reads (longer ones go the JSON.parse way). */
const MAX_ID = 256;

/** True when `b` has the literal `lit` at `p` (and room for it before `end`). */
function at(b: Uint8Array, p: number, end: number, lit: Uint8Array): boolean {
  const n = lit.length;
  if (p + n > end) return false;
  for (let i = 0; i < n; i++) if (b[p + i] !== lit[i]) return false;
  return true;
}

/**
 * Reads the line `b[start, end)` (UTF-8, no line end) when it is a
 * stdout/stderr frame in our canonical shape; undefined for anything else
 * (the generic path then decides, including which error to raise).
 * - `s[sStart, sEnd)`, when given, is the same line as text; strings are
 *   sliced from it. Everything before the value is ASCII once the scanner
 *   accepts it (the literals, a printable-ASCII id, digits), so the value
 *   starts at the same distance from the line's start in both, and ends two
 *   units (`"}`) before the line's end in both.
 * - With the text, the bytes may be only a head of the line: fewer bytes
 *   than the text has characters (a whole line never has: every character
 *   takes at least one byte). The structure is read from the head, the
 *   value from the text (a long frame that only exists as text need not be
 *   encoded whole).
 * - Without the text (a long line nobody decoded): b64 frames only, the
 *   base64 handed to the native decoder as one latin1 copy. Large raw-byte
 *   frames are the bulk of a busy stream, and decoding each whole line to
 *   text first cost a client ~10% of its CPU (a 1 GiB stream).
 * - `lastId`: the previous frame's id, returned as is when this one repeats
 *   it (no allocation, and no slice of this chunk kept alive by an id).
 */
export function scanOutputFrame(
  b: Uint8Array,
  start: number,
  end: number,
  s: string | undefined,
  sStart: number,
  sEnd: number,
  lastId: string,
): OutputEvent | undefined {
  if (!at(b, start, end, L_OPEN)) return undefined;
  const idStart = start + L_OPEN.length;
  let idEnd = idStart;
  for (; idEnd < end; idEnd++) {
    const c = b[idEnd]!;
    if (c === 0x22) break;
    // Printable ASCII without escapes only: then the id's characters are its bytes.
    if (c < 0x20 || c === 0x5c || c > 0x7e) return undefined;
  }
  if (!at(b, idEnd, end, L_SEQ)) return undefined;
  let id = lastId;
  let same = idEnd - idStart === id.length;
  for (let i = 0; same && i < id.length; i++) same = b[idStart + i] === id.charCodeAt(i);
  if (!same) {
    if (idEnd - idStart > MAX_ID) return undefined; // keeps the spread below small
    id = String.fromCharCode(...b.subarray(idStart, idEnd)); // a fresh, flat copy
  }
  let p = idEnd + L_SEQ.length;
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
  if (at(b, p, end, L_STDOUT)) name = "stdout";
  else if (at(b, p, end, L_STDERR)) name = "stderr";
  else return undefined;
  p += L_STDOUT.length;
  let b64: boolean;
  if (at(b, p, end, L_UTF8)) {
    b64 = false;
    p += L_UTF8.length;
  } else if (at(b, p, end, L_B64)) {
    b64 = true;
    p += L_B64.length;
  } else return undefined;
  // The value runs to the line's closing `"}`. If its body is a valid JSON
  // string body, every quote inside is escaped, so the literal really ends
  // at the line's last quote and the object right after it.
  const vEnd = end - 2;
  const sp = sStart + (p - start); // the value's start in the text
  const sv = sEnd - 2; // its end there
  let value: Chunk;
  if (s !== undefined && end - start < sEnd - sStart) {
    // Only a head of the bytes: the value is read from the text alone.
    if (sv < sp || s.charCodeAt(sv) !== 0x22 || s.charCodeAt(sv + 1) !== 0x7d) return undefined;
    try {
      value = b64 ? decodeBase64(s.slice(sp, sv)) : (JSON.parse(s.slice(sp - 1, sv + 1)) as string);
    } catch {
      return undefined;
    }
    return { id, seq, name, value };
  }
  if (vEnd < p || b[vEnd] !== 0x22 || b[vEnd + 1] !== 0x7d) return undefined;
  if (b64) {
    // Base64 text needs no escapes, and the strict decode rejects anything
    // outside its alphabet. Decline (not raise) so the generic path names
    // the error, and so an escaped body like "\/" gets JSON's reading.
    try {
      if (s === undefined) {
        if (decodeBase64Bytes === undefined) return undefined;
        value = decodeBase64Bytes(b, p, vEnd);
      } else if (sEnd - sStart === end - start) {
        // As many characters as bytes: every character came from one byte
        // (ASCII, or U+FFFD for an invalid one), as decodeBase64Ascii needs.
        value = decodeBase64Ascii(s.slice(sp, sv));
      } else value = decodeBase64(s.slice(sp, sv));
    } catch {
      return undefined;
    }
  } else {
    if (s === undefined) return undefined;
    let plain = true;
    for (let i = p; i < vEnd; i++) {
      // UTF-8 never has a byte below 0x80 inside a multi-byte character, so
      // these are exactly the text's quotes, backslashes and controls.
      const c = b[i]!;
      if (c < 0x20 || c === 0x22 || c === 0x5c) {
        plain = false;
        break;
      }
    }
    if (plain) value = s.slice(sp, sv);
    else {
      // JSON.parse of just the literal (typically a "\n" inside) is ~4x
      // cheaper than of the whole line and than a hand-written unescaper
      // (measured). If it succeeds, every quote inside is escaped.
      try {
        value = JSON.parse(s.slice(sp - 1, sv + 1)) as string;
      } catch {
        return undefined;
      }
    }
  }
  return { id, seq, name, value };
}

// ---------------------------------------------------------------------------
// The generic path

const OUTPUT_NAMES = new Set(["stdout", "stderr"]);

function decodeError(line: number, text: string, why: string, cause?: unknown): ExecWireError {
  return new ExecWireError("EINVAL", `exec-wire line ${line}: ${why}`, line, excerptOf(text), {
    cause,
  });
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

/**
 * JSON.parse a line and check every rule of docs/protocol.md §1. Returns the
 * event, an error (an error frame's error has `frame` set), or null for a
 * line to skip (blank, or an unknown frame with an id).
 */
function parseFrame(s: string, line: number, rules: LineRules): ExecEvent | ExecWireError | null {
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
      rules.onUnknown?.(obj, line);
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
    if (enc === "utf8") v = rules.bytes ? utf8.encode(value) : value;
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
