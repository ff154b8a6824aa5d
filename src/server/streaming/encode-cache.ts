// Frame encoders for the server's event streams: one per open stream, sharing
// encoded frames between streams of the same execution.
//
// Why shared: with the memory log every subscriber of an execution reads the
// same event objects, so a cache keyed by the event object turns N base64
// encodings per chunk (500 subscribers: 500x the CPU) into one. Subscribers of
// a live execution read close together, so a small FIFO window of recent
// frames (1 MiB per format) catches nearly every hit; a WeakMap would keep an
// encoded copy of every event for as long as the log retains it.
//
// Why only when shared: a cached frame outlives the young-generation GC that
// would otherwise free it for nothing, gets copied and promoted, and old-space
// growth then forces full collections. A lone stream (the common case) gained
// nothing from the cache and paid ~25% of the server's CPU for it (1 GiB of
// raw output, docs/benchmarks.md). So frames are cached only while more than
// one stream of the same execution and format is open on this server.
//
// Frames are ASCII text whenever possible (pump.ts: sinks write text as
// latin1, one byte per character, with no UTF-8 scan or transcoding): base64
// output frames always are (ids are validated ASCII), other frames are checked,
// and a frame that is not ASCII is handed over as its UTF-8 bytes instead.
// Logs that build fresh event objects per read (SQLite, Redis) miss the cache,
// which is then only a bounded window of wasted memory. Heartbeats are per
// subscriber: never cached. Cached values are immutable, so sharing is safe.

import { frameToJson } from "../../wire/exec-wire/index.js";
import { formatSseLineEvent } from "../../wire/sse.js";
import type { ExecEvent } from "../../wire/types.js";
import type { Frame } from "./pump.js";

export type StreamFormat = "ndjson" | "sse";

/** The encoder of one open event stream; `close()` when the stream ends. */
export interface FrameEncoder {
  encode(ev: ExecEvent): Frame;
  close(): void;
}

// 1 MiB (about 12 frames of 64 KiB output): enough for fan-out subscribers,
// which read close together (500 subscribers x 2 MiB in ~1.9 s, as with 8 MiB).
const LIMIT = 1024 * 1024;

/** A FIFO window of recent frames of one format, at most LIMIT bytes. */
class FrameCache {
  private readonly map = new Map<ExecEvent, Frame>();
  private bytes = 0;
  /** Open streams per execution id: frames are cached only for ids with two or more. */
  readonly streams = new Map<string, number>();
  get(ev: ExecEvent): Frame | undefined {
    return this.map.get(ev);
  }
  set(ev: ExecEvent, frame: Frame): void {
    this.map.set(ev, frame);
    this.bytes += frame.length;
    while (this.bytes > LIMIT) {
      const oldest = this.map.entries().next().value;
      if (!oldest) break;
      this.map.delete(oldest[0]);
      this.bytes -= oldest[1].length;
    }
  }
}

/** True when every character of `text` is ASCII: its UTF-8 length is its length (native, ~8x a regex scan). */
const isAscii = (text: string): boolean => Buffer.byteLength(text, "utf8") === text.length;

/** The text of `ev` in `format`, without caching. */
function frameText(format: StreamFormat, ev: ExecEvent): string {
  if (format === "ndjson") return `${frameToJson(ev)}\n`;
  // Compact JSON is one line, and frameToJson has checked seq and name.
  // Heartbeats carry no `id:` so they never move Last-Event-ID: a reconnecting
  // EventSource resumes after the last logged event (docs/protocol.md).
  const id = ev.name === "heartbeat" ? undefined : ev.seq;
  return formatSseLineEvent(id, ev.name, frameToJson(ev));
}

/** `text` as a Frame: itself when ASCII (`known` skips the scan), else its UTF-8 bytes. */
function asFrame(text: string, known: boolean): Frame {
  return known || isAscii(text) ? text : Buffer.from(text, "utf8");
}

/**
 * The frame encoders of one server: its caches (one per format) are shared by
 * the streams of that server only, so two servers in one process (tests,
 * embedding) never see each other's frames or stream counts.
 */
export class FrameEncoders {
  private readonly caches: Record<StreamFormat, FrameCache> = {
    ndjson: new FrameCache(),
    sse: new FrameCache(),
  };

  /**
   * Opens the encoder for one stream of execution `id` in `format`. Its frames
   * are byte-for-byte the codec's canonical text (frameToJson, formatSseEvent).
   */
  open(format: StreamFormat, id: string): FrameEncoder {
    return openEncoder(this.caches[format], format, id);
  }
}

function openEncoder(cache: FrameCache, format: StreamFormat, id: string): FrameEncoder {
  cache.streams.set(id, (cache.streams.get(id) ?? 0) + 1);
  const idAscii = isAscii(id);
  let open = true;
  return {
    encode(ev) {
      // Raw-byte output is base64 inside an ASCII header: no scan needed.
      const ascii = idAscii && ev.id === id && ev.value instanceof Uint8Array;
      if (ev.name === "heartbeat" || (cache.streams.get(id) ?? 0) < 2) {
        return asFrame(frameText(format, ev), ascii);
      }
      let frame = cache.get(ev);
      if (frame === undefined) {
        frame = asFrame(frameText(format, ev), ascii);
        cache.set(ev, frame);
      }
      return frame;
    },
    close() {
      if (!open) return;
      open = false;
      const n = (cache.streams.get(id) ?? 1) - 1;
      if (n > 0) cache.streams.set(id, n);
      else cache.streams.delete(id);
    },
  };
}
