// The binary WebSocket codec (docs/protocol.md §1, "Binary WebSocket
// messages"): exec-wire events as length-prefixed records in binary messages,
// so output bytes travel raw instead of as base64 inside JSON.
//
// Shape decisions:
// - A message holds one or more complete records (never a part of one), as a
//   text message holds complete lines: a WebSocket message is the framing, so
//   there is nothing to carry across messages and no chunking to survive.
// - Output gets a fixed 14-byte header (kind, id length, seq, payload length)
//   then the id and the payload. Everything else (exit, heartbeat, anything a
//   newer server adds) is a "line" record holding the event's exec-wire JSON,
//   decoded by the same function as a text line: one validation authority,
//   and new frame types need no new record kinds.
// - The encoder falls back to a line record for any output event whose id or
//   text cannot travel as UTF-8 unchanged (a lone surrogate, an id over 255
//   bytes), so every event round-trips exactly as over text.
// - Decoded output values are views into the message (no copy); the caller
//   hands over the message and must not reuse its buffer.
// Web standards only (DataView, TextEncoder/Decoder): runs in browsers.

import { ComputerError, type ErrorCode } from "./errors.js";
import { decodeExecFrame, type ExecWireDecodeOptions, frameToJson } from "./exec-wire/index.js";
import type { ExecEvent } from "./types.js";

/** The WebSocket subprotocol that asks the server for binary output records. */
export const BINARY_SUBPROTOCOL = "agent-computer.exec-wire.binary.v1";

/** Record kinds (the first byte of a record). */
export const RECORD_KIND = {
  /** stdout, raw bytes */
  stdoutBytes: 0x01,
  /** stderr, raw bytes */
  stderrBytes: 0x02,
  /** stdout, UTF-8 text (an execution started with `encoding: "utf8"`) */
  stdoutText: 0x11,
  /** stderr, UTF-8 text */
  stderrText: 0x12,
  /** one exec-wire frame as JSON text (no line end): exit, heartbeat, … */
  line: 0x20,
} as const;

/** Fixed part of a record: kind u8, id length u8, seq u64, payload length u32 (big-endian). */
export const RECORD_HEADER_BYTES = 14;
const MAX_ID_BYTES = 255;
const TWO32 = 2 ** 32;

const encoder = new TextEncoder();
const textDecoder = new TextDecoder("utf-8", { ignoreBOM: true });

/** A malformed binary message: `offset` is where its bad record starts. */
export class BinaryFrameError extends ComputerError {
  readonly offset: number;
  /** The events of the records before the bad one, delivered with the error. */
  events?: ExecEvent[];
  constructor(code: ErrorCode, message: string, offset: number, cause?: unknown) {
    super(code, `binary message, record at byte ${offset}: ${message}`, { cause });
    this.name = "BinaryFrameError";
    this.offset = offset;
  }
}

/** Allocates a record's bytes (the server passes Buffer.allocUnsafe: no zero fill). */
export type Alloc = (size: number) => Uint8Array;
const defaultAlloc: Alloc = (n) => new Uint8Array(n);

let lastId = "";
let lastIdBytes: Uint8Array | undefined = new Uint8Array(0);

/** The UTF-8 of an id, or undefined when it cannot be a record's id (memoised: streams repeat one id). */
function idBytes(id: string): Uint8Array | undefined {
  if (id === lastId) return lastIdBytes;
  const ok = id.length <= MAX_ID_BYTES && isWellFormed(id);
  const b = ok ? encoder.encode(id) : undefined;
  lastId = id;
  lastIdBytes = b && b.length <= MAX_ID_BYTES ? b : undefined;
  return lastIdBytes;
}

function isWellFormed(s: string): boolean {
  const f = (s as { isWellFormed?: () => boolean }).isWellFormed;
  if (f) return f.call(s);
  return !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);
}

function writeHeader(
  out: Uint8Array,
  kind: number,
  id: Uint8Array,
  seq: number,
  length: number,
): number {
  const view = new DataView(out.buffer, out.byteOffset, RECORD_HEADER_BYTES);
  view.setUint8(0, kind);
  view.setUint8(1, id.length);
  view.setUint32(2, Math.floor(seq / TWO32));
  view.setUint32(6, seq >>> 0);
  view.setUint32(10, length);
  out.set(id, RECORD_HEADER_BYTES);
  return RECORD_HEADER_BYTES + id.length;
}

/**
 * One event as one record. Output with bytes or well-formed text becomes an
 * output record; anything else a line record (its canonical exec-wire JSON).
 * Invalid events throw EINVAL, as the text encoder does.
 */
export function encodeBinaryRecord(ev: ExecEvent, alloc: Alloc = defaultAlloc): Uint8Array {
  const isOutput = ev.name === "stdout" || ev.name === "stderr";
  const id = isOutput && Number.isSafeInteger(ev.seq) && ev.seq >= 0 ? idBytes(ev.id) : undefined;
  if (id && ev.value instanceof Uint8Array) {
    const out = alloc(RECORD_HEADER_BYTES + id.length + ev.value.length);
    const kind = ev.name === "stdout" ? RECORD_KIND.stdoutBytes : RECORD_KIND.stderrBytes;
    out.set(ev.value, writeHeader(out, kind, id, ev.seq, ev.value.length));
    return out;
  }
  if (id && typeof ev.value === "string" && isWellFormed(ev.value)) {
    const text = encoder.encode(ev.value);
    const out = alloc(RECORD_HEADER_BYTES + id.length + text.length);
    const kind = ev.name === "stdout" ? RECORD_KIND.stdoutText : RECORD_KIND.stderrText;
    out.set(text, writeHeader(out, kind, id, ev.seq, text.length));
    return out;
  }
  // frameToJson validates (EINVAL) and gives the canonical text.
  const json = encoder.encode(frameToJson(ev));
  const out = alloc(RECORD_HEADER_BYTES + json.length);
  const view = new DataView(out.buffer, out.byteOffset, RECORD_HEADER_BYTES);
  view.setUint8(0, RECORD_KIND.line);
  view.setUint8(1, 0);
  view.setUint32(2, 0);
  view.setUint32(6, 0);
  view.setUint32(10, json.length);
  out.set(json, RECORD_HEADER_BYTES);
  return out;
}

/**
 * The header (fixed part and id) of the output record of `ev`, whose payload
 * is then `ev.value` itself; undefined when `ev` is not raw-byte output that
 * an output record can carry (use encodeBinaryRecord). Lets a producer write
 * header and payload without first copying the payload into a record.
 */
export function encodeBinaryRecordHeader(
  ev: ExecEvent,
  alloc: Alloc = defaultAlloc,
): Uint8Array | undefined {
  if ((ev.name !== "stdout" && ev.name !== "stderr") || !(ev.value instanceof Uint8Array)) {
    return undefined;
  }
  if (!Number.isSafeInteger(ev.seq) || ev.seq < 0) return undefined;
  const id = idBytes(ev.id);
  if (!id) return undefined;
  const out = alloc(RECORD_HEADER_BYTES + id.length);
  const kind = ev.name === "stdout" ? RECORD_KIND.stdoutBytes : RECORD_KIND.stderrBytes;
  writeHeader(out, kind, id, ev.seq, ev.value.length);
  return out;
}

/** Several events as one binary message (records in order). */
export function encodeBinaryMessage(events: ExecEvent[], alloc: Alloc = defaultAlloc): Uint8Array {
  const records = events.map((ev) => encodeBinaryRecord(ev));
  const out = alloc(records.reduce((n, r) => n + r.length, 0));
  let at = 0;
  for (const r of records) {
    out.set(r, at);
    at += r.length;
  }
  return out;
}

export type BinaryDecodeOptions = Pick<ExecWireDecodeOptions, "values" | "onUnknownFrame">;

/**
 * Decodes one binary message into its events, in order. A line record is
 * decoded like a text line: an extension frame (unknown name with an id) is
 * skipped, an error frame throws its code (ExecWireError). A malformed record
 * throws BinaryFrameError (EINVAL) carrying the events before it as `events`.
 * Output values are views into `message` unless they are text.
 */
export function decodeBinaryMessage(
  message: Uint8Array,
  options: BinaryDecodeOptions = {},
): ExecEvent[] {
  const out: ExecEvent[] = [];
  const fail = (err: ComputerError & { events?: ExecEvent[] }) => {
    err.events = out;
    return err;
  };
  if (message.length === 0) throw fail(new BinaryFrameError("EINVAL", "empty message", 0));
  const view = new DataView(message.buffer, message.byteOffset, message.byteLength);
  const bytesWanted = options.values === "bytes";
  let at = 0;
  let ids: { bytes: Uint8Array; id: string } | undefined;
  while (at < message.length) {
    const start = at;
    if (message.length - at < RECORD_HEADER_BYTES) {
      throw fail(
        new BinaryFrameError("EINVAL", `truncated header (${message.length - at} bytes)`, start),
      );
    }
    const kind = view.getUint8(at);
    const idLength = view.getUint8(at + 1);
    const hi = view.getUint32(at + 2);
    const seq = hi * TWO32 + view.getUint32(at + 6);
    const length = view.getUint32(at + 10);
    at += RECORD_HEADER_BYTES;
    if (message.length - at < idLength + length) {
      throw fail(
        new BinaryFrameError(
          "EINVAL",
          `truncated record: ${idLength + length} bytes announced, ${message.length - at} left`,
          start,
        ),
      );
    }
    if (kind === RECORD_KIND.line) {
      if (idLength !== 0 || seq !== 0) {
        throw fail(new BinaryFrameError("EINVAL", "a line record has no id or seq", start));
      }
      const text = textDecoder.decode(message.subarray(at, at + length));
      at += length;
      let ev: ExecEvent | null;
      try {
        ev = decodeExecFrame(text, options);
      } catch (err) {
        throw fail(err as ComputerError);
      }
      if (ev) out.push(ev);
      continue;
    }
    const name =
      kind === RECORD_KIND.stdoutBytes || kind === RECORD_KIND.stdoutText
        ? "stdout"
        : kind === RECORD_KIND.stderrBytes || kind === RECORD_KIND.stderrText
          ? "stderr"
          : undefined;
    if (name === undefined) {
      throw fail(new BinaryFrameError("EINVAL", `unknown record kind 0x${hex(kind)}`, start));
    }
    if (hi > 0x1fffff) {
      throw fail(new BinaryFrameError("EINVAL", "seq is beyond 2^53 - 1", start));
    }
    const idView = message.subarray(at, at + idLength);
    at += idLength;
    if (!ids || !sameBytes(ids.bytes, idView)) {
      ids = { bytes: idView, id: textDecoder.decode(idView) };
    }
    const payload = message.subarray(at, at + length);
    at += length;
    const text = kind === RECORD_KIND.stdoutText || kind === RECORD_KIND.stderrText;
    out.push({
      id: ids.id,
      seq,
      name,
      value: text && !bytesWanted ? textDecoder.decode(payload) : payload,
    });
  }
  return out;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function hex(n: number): string {
  return n.toString(16).padStart(2, "0");
}
