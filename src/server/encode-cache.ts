// Encode each event once per format, however many subscribers send it.
// With the memory log every subscriber of an execution reads the same event
// objects, so a cache keyed by the event object turns N base64 encodings per
// chunk (500 subscribers: 500x the CPU) into one. Subscribers of a live
// execution read close together, so a small window of recent frames catches
// nearly every hit: the cache is a FIFO bounded in bytes (1 MiB per
// format), not a WeakMap, which would keep an encoded copy of every event for
// as long as the log retains it (tripling a finished execution's memory).
// Logs that build fresh objects per read (SQLite, Redis) just miss the cache.
// Heartbeats are per subscriber: never cached. Cached values are immutable
// strings, so sharing them between responses is safe.

import { frameToJson } from "../wire/exec-wire.js";
import { formatSseEvent } from "../wire/sse.js";
import type { ExecEvent } from "../wire/types.js";

// 1 MiB (about 12 frames of 64 KiB output): enough for fan-out subscribers,
// which read close together (500 subscribers: 1.9 s, as with 8 MiB), while
// frames die young. At 8 MiB the cached strings outlived scavenges and were
// copied and promoted: the encode path of one stream ran at ~290 MB/s instead
// of ~415 MB/s (Computer -> pumpEvents -> null sink, 512 MiB of /dev/zero).
const LIMIT = 1024 * 1024;

class FrameCache {
  private readonly map = new Map<ExecEvent, string>();
  private bytes = 0;
  get(ev: ExecEvent): string | undefined {
    return this.map.get(ev);
  }
  set(ev: ExecEvent, text: string): void {
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
