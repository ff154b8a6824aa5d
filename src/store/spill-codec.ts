// The on-disk framing of events spilled from the memory log to segment files:
// a 16-byte header (payload length, event name, value kind, seq) followed by
// the payload (raw bytes, UTF-8 text, or the exit event's JSON). Fixed-size
// headers let a reader walk a segment from any recorded offset without an
// index entry per event, and raw payloads keep the write path a plain copy.

import type { ExitEvent, LoggedEvent } from "../wire/types.js";

export const HEADER_BYTES = 16;

const NAME_CODES = { stdout: 1, stderr: 2, exit: 3 } as const;
const NAMES = [undefined, "stdout", "stderr", "exit"] as const;
const KIND_BYTES = 0;
const KIND_TEXT = 1;
const KIND_JSON = 2;

/**
 * The buffers that frame one event (header, then the payload), ready for
 * writev. A byte event's payload may be given as `parts` (in order; its
 * `value` is then ignored): bytes that lie in two places are written from
 * both, not copied together first.
 */
export function encodeSpilled(ev: LoggedEvent, parts?: readonly Uint8Array[]): Buffer[] {
  const out: Buffer[] = [Buffer.allocUnsafe(HEADER_BYTES)];
  let kind: number;
  let length = 0;
  if (ev.name === "exit") {
    const { value, reason, signal } = ev;
    out.push(Buffer.from(JSON.stringify({ value, reason, signal })));
    kind = KIND_JSON;
  } else if (typeof ev.value === "string") {
    out.push(Buffer.from(ev.value, "utf8"));
    kind = KIND_TEXT;
  } else {
    for (const v of parts ?? [ev.value])
      out.push(Buffer.from(v.buffer, v.byteOffset, v.byteLength));
    kind = KIND_BYTES;
  }
  for (let i = 1; i < out.length; i++) length += out[i]!.byteLength;
  const header = out[0]!;
  header.writeUInt32LE(length, 0);
  header.writeUInt8(NAME_CODES[ev.name], 4);
  header.writeUInt8(kind, 5);
  header.writeUInt16LE(0, 6);
  header.writeDoubleLE(ev.seq, 8);
  return out;
}

/** Length of the framed event at `offset` of `buf`, or -1 when it is not all there. */
export function framedLength(buf: Buffer, offset: number): number {
  if (buf.byteLength - offset < HEADER_BYTES) return -1;
  const total = HEADER_BYTES + buf.readUInt32LE(offset);
  return buf.byteLength - offset < total ? -1 : total;
}

/** Seq of the framed event at `offset` (its header must be in `buf`). */
export function framedSeq(buf: Buffer, offset: number): number {
  return buf.readDoubleLE(offset + 8);
}

/** Decode the complete framed event at `offset` of `buf`, for execution `id`. */
export function decodeSpilled(id: string, buf: Buffer, offset: number): LoggedEvent {
  const len = buf.readUInt32LE(offset);
  const name = NAMES[buf.readUInt8(offset + 4)];
  const kind = buf.readUInt8(offset + 5);
  const seq = buf.readDoubleLE(offset + 8);
  const start = offset + HEADER_BYTES;
  if (name === undefined) throw new Error(`corrupt spill segment of ${id} at seq ${seq}`);
  if (name === "exit") {
    const o = JSON.parse(buf.toString("utf8", start, start + len)) as Omit<ExitEvent, "id" | "seq">;
    const ev: ExitEvent = { id, seq, name, value: o.value };
    if (o.reason !== undefined) ev.reason = o.reason;
    if (o.signal !== undefined) ev.signal = o.signal;
    return ev;
  }
  if (kind === KIND_TEXT) return { id, seq, name, value: buf.toString("utf8", start, start + len) };
  // A copy, so the event does not pin the whole read buffer.
  return { id, seq, name, value: new Uint8Array(buf.subarray(start, start + len)) };
}
