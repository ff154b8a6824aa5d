// exec-wire as web streams: decodeExecEvents (bytes in, events out) and
// encodeExecEvents (events in, one frame per chunk out), over a
// ReadableStream or any AsyncIterable. The stream results are also
// async-iterable, so callers can always `for await` them.
//
// Why the decode stream has its own `for await` path: a ReadableStream costs
// a queue entry and a read promise per chunk, which for small events costs
// more than decoding them (~1.2 us per event, measured). When nothing has been
// read from the stream yet, iteration locks it (so it behaves as a consumed
// stream to everyone else) and takes the decoder's batches directly from the
// source. Reading through getReader() gives the same events and errors.
// Each stream has its own decoder: nothing is shared between streams.

import type { Chunk, ExecEvent } from "../types.js";
import type { ExecWireDecodeOptions, ExecWireError } from "./decode.js";
import { ExecWireDecoder } from "./decoder.js";
import { encodeExecEvent } from "./encode.js";

type Source<T> = ReadableStream<T> | AsyncIterable<T>;

/** A ReadableStream that is also typed (and guaranteed at run time) as async-iterable. */
export type IterableStream<T> = ReadableStream<T> & AsyncIterable<T>;

function iteratorOf<T>(source: Source<T>): AsyncIterator<T> {
  // A ReadableStream is read through its reader even where it is async-
  // iterable: one promise per chunk instead of two (the iterator wraps
  // read()), which matters with many small chunks.
  if (typeof (source as ReadableStream<T>).getReader === "function") {
    const reader = (source as ReadableStream<T>).getReader();
    return {
      next: () => reader.read() as Promise<IteratorResult<T>>,
      return: async (value?: unknown) => {
        await reader.cancel(value);
        return { done: true, value: undefined as T };
      },
    };
  }
  return (source as AsyncIterable<T>)[Symbol.asyncIterator]();
}

/**
 * Node 20's ReadableStream is async-iterable (verified by a test); engines
 * where it is not get a reader-based iterator, so callers can always
 * `for await` the result.
 */
function asIterable<T>(stream: ReadableStream<T>): IterableStream<T> {
  const s = stream as IterableStream<T>;
  if (typeof s[Symbol.asyncIterator] !== "function") {
    Object.defineProperty(s, Symbol.asyncIterator, {
      configurable: true,
      value(): AsyncIterator<T> {
        const reader = stream.getReader();
        return {
          next: () => reader.read() as Promise<IteratorResult<T>>,
          return: async () => {
            await reader.cancel();
            reader.releaseLock();
            return { done: true, value: undefined as T };
          },
          [Symbol.asyncIterator]() {
            return this;
          },
        } as AsyncIterator<T>;
      },
    });
  }
  return s;
}

/** Encodes a stream of events to exec-wire bytes, one frame per chunk. */
export function encodeExecEvents(source: Source<ExecEvent>): IterableStream<Uint8Array> {
  let it: AsyncIterator<ExecEvent> | undefined;
  return asIterable(
    new ReadableStream<Uint8Array>({
      async pull(controller) {
        it ??= iteratorOf(source);
        const r = await it.next();
        if (r.done) controller.close();
        else controller.enqueue(encodeExecEvent(r.value));
      },
      async cancel(reason) {
        it ??= iteratorOf(source);
        await it.return?.(reason);
      },
    }),
  );
}

/**
 * Decodes exec-wire bytes (a ReadableStream or any AsyncIterable of
 * Uint8Array) into a ReadableStream of events, also async-iterable. The
 * stream errors with an `ExecWireError` on a malformed line (unless
 * `onError` is given) and on a producer's error frame, after delivering
 * every event that came before it.
 */
export function decodeExecEvents<V extends Chunk = Chunk>(
  source: Source<Uint8Array>,
  options?: ExecWireDecodeOptions & { values?: "as-sent" },
): IterableStream<ExecEvent<V>>;
export function decodeExecEvents(
  source: Source<Uint8Array>,
  options: ExecWireDecodeOptions & { values: "bytes" },
): IterableStream<ExecEvent<Uint8Array>>;
export function decodeExecEvents(
  source: Source<Uint8Array>,
  options: ExecWireDecodeOptions = {},
): IterableStream<ExecEvent> {
  const decoder = new ExecWireDecoder(options);
  let it: AsyncIterator<Uint8Array> | undefined;
  const batch: ExecEvent[] = [];
  let deferred: ExecWireError | undefined;
  let pulled = false;
  let controllerRef: ReadableStreamDefaultController<ExecEvent> | undefined;
  const stream = new ReadableStream<ExecEvent>(
    {
      start(controller) {
        controllerRef = controller;
      },
      async pull(controller) {
        pulled = true;
        // An error found with events still to deliver waits one pull:
        // `controller.error` would discard events already queued.
        if (deferred !== undefined) {
          controller.error(deferred);
          return;
        }
        it ??= iteratorOf(source);
        // Read until this pull has something to deliver (or the end).
        for (;;) {
          const r = await it.next();
          if (r.done) decoder.endInto(batch);
          else decoder.pushInto(r.value, batch);
          for (let i = 0; i < batch.length; i++) controller.enqueue(batch[i]!);
          const delivered = batch.length > 0;
          batch.length = 0;
          const err = decoder.error;
          if (err !== undefined) {
            if (!r.done) await it.return?.(err);
            if (delivered) deferred = err;
            else controller.error(err);
            return;
          }
          if (r.done) {
            controller.close();
            return;
          }
          if (delivered) return;
        }
      },
      async cancel(reason) {
        it ??= iteratorOf(source);
        await it.return?.(reason);
      },
    },
    // Events are queued per chunk; pull again only when the reader waits.
    { highWaterMark: 0 },
  );

  // `for await` fast path (see the header): batches straight from the
  // decoder while nothing has been read through the stream itself.
  const standard = (stream as Partial<AsyncIterable<ExecEvent>>)[Symbol.asyncIterator];
  Object.defineProperty(stream, Symbol.asyncIterator, {
    configurable: true,
    value(this: ReadableStream<ExecEvent>, ...args: unknown[]): AsyncIterator<ExecEvent> {
      if (pulled || standard === undefined) {
        return standard !== undefined ? standard.apply(this, args as []) : readerIterator(this);
      }
      const reader = stream.getReader(); // throws if locked, as iteration must
      it ??= iteratorOf(source);
      const src = it;
      let buf: ExecEvent[] = [];
      let idx = 0;
      let finished = false;
      let failed: ExecWireError | undefined;
      // Settle the (unread) stream like a consumed one; it may already be
      // closed if it was cancelled, which is fine.
      const settle = (err?: unknown) => {
        try {
          if (err !== undefined) controllerRef?.error(err);
          else controllerRef?.close();
        } catch {}
        reader.releaseLock();
      };
      const finish = (err?: unknown) => {
        finished = true;
        settle(err);
      };
      const iterator: AsyncIterator<ExecEvent> & AsyncIterable<ExecEvent> = {
        async next(): Promise<IteratorResult<ExecEvent>> {
          if (idx < buf.length) return { done: false, value: buf[idx++]! };
          if (failed !== undefined) {
            const err = failed;
            failed = undefined;
            finish(err);
            throw err;
          }
          if (finished) return { done: true, value: undefined };
          buf = [];
          idx = 0;
          for (;;) {
            let r: IteratorResult<Uint8Array>;
            try {
              r = await src.next();
            } catch (err) {
              finish(err);
              throw err;
            }
            if (r.done) decoder.endInto(buf);
            else decoder.pushInto(r.value, buf);
            const err = decoder.error;
            if (err !== undefined) {
              if (!r.done) await src.return?.(err);
              if (buf.length > 0) {
                failed = err; // deliver what came before it first
                break;
              }
              finish(err);
              throw err;
            }
            if (r.done) {
              if (buf.length === 0) {
                finish();
                return { done: true, value: undefined };
              }
              finish();
              break;
            }
            if (buf.length > 0) break;
          }
          return { done: false, value: buf[idx++]! };
        },
        async return(): Promise<IteratorResult<ExecEvent>> {
          if (!finished) {
            finished = true;
            buf = [];
            await src.return?.();
            settle();
          }
          return { done: true, value: undefined };
        },
        [Symbol.asyncIterator]() {
          return this;
        },
      };
      return iterator;
    },
  });
  return stream as IterableStream<ExecEvent>;
}

function readerIterator<T>(stream: ReadableStream<T>): AsyncIterator<T> {
  const reader = stream.getReader();
  return {
    next: () => reader.read() as Promise<IteratorResult<T>>,
    return: async () => {
      await reader.cancel();
      reader.releaseLock();
      return { done: true, value: undefined as T };
    },
  };
}
