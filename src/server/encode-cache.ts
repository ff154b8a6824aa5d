// Encode each event once per format, however many subscribers send it.
// With the memory log every subscriber of an execution reads the same event
// objects, so a WeakMap keyed by the event object turns N base64 encodings per
// chunk (500 subscribers: 500x the CPU) into one; entries vanish with the
// events. Logs that build fresh objects per read (SQLite, Redis) just miss the
// cache and encode as before. Heartbeats are per subscriber: never cached.
// Cached values are immutable strings, so sharing them between responses is safe.

import { frameToJson } from "../wire/exec-wire.js";
import { formatSseEvent } from "../wire/sse.js";
import type { ExecEvent } from "../wire/types.js";

const ndjson = new WeakMap<ExecEvent, string>();
const sse = new WeakMap<ExecEvent, string>();

/**
 * The exec-wire line of `ev` (with "\n") as text: the codec's canonical frame
 * (frameToJson). Sinks write text straight to the socket as UTF-8 (see Frame
 * in pump.ts), which skips one copy of every frame.
 */
export function encodeNdjson(ev: ExecEvent): string {
  if (ev.name === "heartbeat") return `${frameToJson(ev)}\n`;
  let text = ndjson.get(ev);
  if (text === undefined) {
    text = `${frameToJson(ev)}\n`;
    ndjson.set(ev, text);
  }
  return text;
}

/** The SSE block of `ev`: `id: seq` / `event: name` / `data: frame`; heartbeats carry no id. */
export function encodeSse(ev: ExecEvent): string {
  // Heartbeats carry no `id:` so they never move Last-Event-ID (WIRE.md §2).
  if (ev.name === "heartbeat") {
    return formatSseEvent({ event: "heartbeat", data: frameToJson(ev) });
  }
  let text = sse.get(ev);
  if (text === undefined) {
    text = formatSseEvent({ id: ev.seq, event: ev.name, data: frameToJson(ev) });
    sse.set(ev, text);
  }
  return text;
}
