// Encode each event once per format, however many subscribers send it.
// With the memory log every subscriber of an execution reads the same event
// objects, so a cache keyed by the event object turns N base64 encodings per
// chunk (500 subscribers: 500x the CPU) into one. Subscribers of a live
// execution read close together, so a small window of recent frames catches
// nearly every hit: the cache is a FIFO bounded in bytes (default 8 MiB per
// format), not a WeakMap, which would keep an encoded copy of every event for
// as long as the log retains it (tripling a finished execution's memory).
// Logs that build fresh objects per read (SQLite, Redis) just miss the cache.
// Heartbeats are per subscriber: never cached. Cached frames are never
// modified after they are built, so sharing them between responses is safe.
//
// Raw-byte output (nearly all the volume of a binary stream) is built as a
// Buffer, not a string: the base64 text is a short-lived string that dies in
// the next scavenge, and the frame itself lives outside the V8 heap. As a
// string, every ~87 KiB frame held by this cache survived young-generation GC
// (copied, promoted, then marked and compacted: ~17% of the server's CPU on a
// 1 GiB stream), and the socket copied it once more into UTF-8 on every write;
// a Buffer goes to writev() as is, for every subscriber.

import { frameToJson } from "../wire/exec-wire.js";
import { formatSseEvent } from "../wire/sse.js";
import type { ExecEvent, OutputEvent } from "../wire/types.js";
import type { Frame } from "./pump.js";

const LIMIT = 8 * 1024 * 1024;

class FrameCache {
  private readonly map = new Map<ExecEvent, Frame>();
  private bytes = 0;
  get(ev: ExecEvent): Frame | undefined {
    return this.map.get(ev);
  }
  set(ev: ExecEvent, text: Frame): void {
    this.map.set(ev, text);
    this.bytes += text.length;
    while (this.bytes > LIMIT) {
      const oldest = this.map.entries().next().value;
      if (!oldest) break;
      this.map.delete(oldest[0]);
      this.bytes -= oldest[1].length;
    }
  }
}

const ndjson = new FrameCache();
const sse = new FrameCache();

const EMPTY = new Uint8Array(0);
/** Below this many value bytes a string frame is as cheap as a Buffer (small objects, one write). */
const BINARY_MIN = 1024;

function isBinaryOutput(ev: ExecEvent): ev is OutputEvent<Uint8Array> {
  return (
    (ev.name === "stdout" || ev.name === "stderr") &&
    ev.value instanceof Uint8Array &&
    ev.value.length >= BINARY_MIN
  );
}

/**
 * `before` + frameToJson(ev) + `after` as one Buffer, for raw-byte output. The
 * frame's head comes from frameToJson itself (run on the same event with an
 * empty value, so validation and key order stay the codec's), and the base64
 * text is copied in natively; the bytes are exactly the string forms' UTF-8.
 */
function binaryFrame(before: string, ev: OutputEvent<Uint8Array>, after: string): Buffer {
  const shell = frameToJson({ ...ev, value: EMPTY }); // ...,"value":""}
  const head = before + shell.slice(0, -2);
  const tail = shell.slice(-2) + after;
  const v = ev.value;
  const b64 = Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64");
  const headBytes = Buffer.byteLength(head);
  const buf = Buffer.allocUnsafeSlow(headBytes + b64.length + tail.length);
  buf.write(head, 0, "utf8");
  buf.write(b64, headBytes, "latin1");
  buf.write(tail, headBytes + b64.length, "latin1");
  return buf;
}

/**
 * The exec-wire line of `ev` (with "\n"): the codec's canonical frame
 * (frameToJson). Text frames stay strings (written to the socket as UTF-8
 * without an intermediate copy); raw-byte output becomes a Buffer (see above).
 */
export function encodeNdjson(ev: ExecEvent): Frame {
  if (ev.name === "heartbeat") return `${frameToJson(ev)}\n`;
  let frame = ndjson.get(ev);
  if (frame === undefined) {
    frame = isBinaryOutput(ev) ? binaryFrame("", ev, "\n") : `${frameToJson(ev)}\n`;
    ndjson.set(ev, frame);
  }
  return frame;
}

/** The SSE block of `ev`: `id: seq` / `event: name` / `data: frame`; heartbeats carry no id. */
export function encodeSse(ev: ExecEvent): Frame {
  // Heartbeats carry no `id:` so they never move Last-Event-ID (WIRE.md §2).
  if (ev.name === "heartbeat") {
    return formatSseEvent({ event: "heartbeat", data: frameToJson(ev) });
  }
  let frame = sse.get(ev);
  if (frame === undefined) {
    if (isBinaryOutput(ev)) {
      // The same block formatSseEvent makes: a compact JSON frame is one line.
      frame = binaryFrame(`id: ${ev.seq}\nevent: ${ev.name}\ndata: `, ev, "\n\n");
    } else {
      frame = formatSseEvent({ id: ev.seq, event: ev.name, data: frameToJson(ev) });
    }
    sse.set(ev, frame);
  }
  return frame;
}
