// The streaming hot path: moves events from an execution's ReadableStream to a
// byte sink (an HTTP response or a WebSocket) as pre-encoded frames.
//
// Why this shape (measured; docs/benchmarks.md has the server figures):
// - One `reader.read()` per event and nothing else per event: no pipeThrough
//   hops, no per-event write. Encoded frames collect into a batch that is
//   written with ONE write when the stream's queue is momentarily empty (the
//   next read did not resolve before a setImmediate) or the batch passed
//   `batchBytes`. Under load that is one write per many events; at low rate it
//   is one write per event after at most one macrotask (sub-millisecond).
// - Backpressure: when the sink reports full (res.write() returned false, or a
//   WebSocket's bufferedAmount is over its mark) the pump stops reading until
//   the sink drains. A slow client therefore only falls behind in the log; it
//   never grows server memory or slows the process or other subscribers.

import type { ExecEvent } from "../../wire/types.js";

/**
 * One encoded frame: bytes, or ASCII text. Text goes to the socket without an
 * intermediate Buffer, written as latin1 (one byte per character: no UTF-8
 * length scan, no transcoding), measured ~1.5-2x faster than encoding to bytes
 * first for 64 KiB base64 frames. Producers hand anything that is not ASCII
 * over as its UTF-8 bytes (encode-cache.ts), so `length` is always the byte count.
 */
export type Frame = Uint8Array | string;

export interface ByteSink {
  /**
   * Writes one batch of encoded frames, in order; false means "full": the pump
   * waits for `drained()`. An HTTP sink corks and writes the parts (one writev,
   * no copy); a WebSocket sink joins them into one message.
   */
  write(parts: Frame[], totalBytes: number): boolean;
  /** Resolves when the sink can take more (or is closed). */
  drained(): Promise<void>;
  /** True once the peer went away: the pump stops. */
  readonly closed: boolean;
}

export interface PumpOptions {
  /**
   * Encodes one event to its bytes on the wire; null skips it. An array is
   * one event in several parts (a binary record's header and its payload, so
   * the payload is copied once, into the sink's message, not into a record first).
   */
  encode(ev: ExecEvent): Frame | Frame[] | null;
  /** Flush early once a batch reaches this many bytes (default 256 KiB). */
  batchBytes?: number;
  /** Called per flushed batch with its size in bytes (metrics). */
  onBytes?(n: number): void;
}

/** Why a pump stopped: the exit event went out, the stream ended, the sink closed, or the stream failed. */
export type PumpEnd =
  | { kind: "exit" }
  | { kind: "eof" }
  | { kind: "closed" }
  | { kind: "error"; error: unknown };

const TICK = Symbol("tick");

/**
 * Pumps `stream` into `sink` until the exit event was written, the stream ended,
 * the sink closed, or the stream failed. Never throws; the caller decides how to
 * report the end (error frame, `event: end`, close).
 */
export async function pumpEvents(
  stream: ReadableStream<ExecEvent>,
  sink: ByteSink,
  options: PumpOptions,
): Promise<PumpEnd> {
  const reader = stream.getReader();
  const limit = options.batchBytes ?? 256 * 1024;
  let batch: Frame[] = [];
  let batchSize = 0;
  let tick: Promise<typeof TICK> | null = null;
  const nextTick = (): Promise<typeof TICK> => {
    if (tick === null) {
      tick = new Promise((resolve) =>
        setImmediate(() => {
          tick = null;
          resolve(TICK);
        }),
      );
    }
    return tick;
  };
  // Writes the batch; returns false when the sink is closed.
  const flush = async (): Promise<boolean> => {
    if (batch.length === 0) return !sink.closed;
    const parts = batch;
    const size = batchSize;
    batch = [];
    batchSize = 0;
    if (sink.closed) return false;
    const ok = sink.write(parts, size);
    options.onBytes?.(size);
    if (!ok) await sink.drained();
    return !sink.closed;
  };
  const add = (bytes: Frame | Frame[]) => {
    if (!Array.isArray(bytes)) {
      batch.push(bytes);
      batchSize += bytes.length;
      return;
    }
    for (const part of bytes) {
      batch.push(part);
      batchSize += part.length;
    }
  };
  let pending = reader.read();
  try {
    for (;;) {
      const r = batch.length > 0 ? await Promise.race([pending, nextTick()]) : await pending;
      if (r === TICK) {
        if (!(await flush())) return { kind: "closed" };
        continue;
      }
      if (r.done) {
        if (!(await flush())) return { kind: "closed" };
        return { kind: "eof" };
      }
      const ev = r.value;
      if (sink.closed) return { kind: "closed" };
      const bytes = options.encode(ev);
      if (ev.name === "exit") {
        if (bytes) add(bytes);
        if (!(await flush())) return { kind: "closed" };
        return { kind: "exit" };
      }
      pending = reader.read();
      if (bytes) {
        add(bytes);
        if (batchSize >= limit && !(await flush())) return { kind: "closed" };
      }
    }
  } catch (error) {
    // Whatever was read before the failure still goes out, then the error.
    try {
      await flush();
    } catch {
      // sink gone
    }
    return { kind: "error", error };
  } finally {
    reader.cancel().catch(() => {});
    // A pending read on a cancelled reader settles; ignore it.
    pending.catch(() => {});
  }
}
