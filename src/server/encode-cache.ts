// Encode each event once per format, however many subscribers send it.
// With the memory log every subscriber of an execution reads the same event
// objects, so a WeakMap keyed by the event object turns N base64 encodings per
// chunk (500 subscribers: 500x the CPU) into one; entries vanish with the
// events. Logs that build fresh objects per read (SQLite, Redis) just miss the
// cache and encode as before. Heartbeats are per subscriber: never cached.
// The cached bytes are fresh arrays from the codec and are never mutated, so
// sharing them between responses is safe.

import { encodeExecEvent, frameToJson } from "../wire/exec-wire.js";
import { formatSseEvent } from "../wire/sse.js";
import type { ExecEvent } from "../wire/types.js";

const ndjson = new WeakMap<ExecEvent, Uint8Array>();
const sse = new WeakMap<ExecEvent, Uint8Array>();

/** The exec-wire line of `ev` (with "\n"). */
export function encodeNdjson(ev: ExecEvent): Uint8Array {
  if (ev.name === "heartbeat") return encodeExecEvent(ev);
  let bytes = ndjson.get(ev);
  if (bytes === undefined) {
    bytes = encodeExecEvent(ev);
    ndjson.set(ev, bytes);
  }
  return bytes;
}

/** The SSE block of `ev`: `id: seq` / `event: name` / `data: frame`; heartbeats carry no id. */
export function encodeSse(ev: ExecEvent): Uint8Array {
  // Heartbeats carry no `id:` so they never move Last-Event-ID (WIRE.md §2).
  if (ev.name === "heartbeat") {
    return Buffer.from(formatSseEvent({ event: "heartbeat", data: frameToJson(ev) }));
  }
  let bytes = sse.get(ev);
  if (bytes === undefined) {
    bytes = Buffer.from(formatSseEvent({ id: ev.seq, event: ev.name, data: frameToJson(ev) }));
    sse.set(ev, bytes);
  }
  return bytes;
}
