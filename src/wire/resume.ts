// The one reconnect-and-resume loop. Every reader of a resumable stream in the
// project (the SDK's exec events, the UI client's events, an A@UI page's
// command feed, the dashboard's terminals, the CLI) is this loop with a
// different transport plugged in, so "what happens when the connection breaks"
// has one answer everywhere.
//
// Shape decisions:
// - Transport-agnostic: the caller's `connect(after, signal)` opens one
//   connection asking for the items after `after` and returns them as an async
//   iterable of batches (a decoded body chunk, a poll answer, the messages a
//   socket received). HTTP, SSE, long-polling and WebSocket all fit, and a
//   test plugs in a fake.
// - One cursor, `after`: the seq of the last item accepted. Items at or below
//   it are duplicates from an overlap and are dropped; an item beyond
//   `after + 1` is a gap (EGAP) on streams that promise none (exec events);
//   streams whose positions may skip (A@UI commands after compaction) say
//   `gapFree: false`. Items without a seq (heartbeats, markers) pass through.
// - Pull-based ReadableStream: a connection is opened and read only when the
//   consumer asks for more (highWaterMark 0 by default), so a slow consumer
//   applies backpressure down to the socket.
// - Everything accepted before an error reaches the consumer before the error:
//   a final error waits until the queue is drained (a ReadableStream's
//   `error()` would discard queued items). The same wait orders a truncation
//   policy after the items that came before it. Only abort is immediate: the
//   consumer asked to stop.
// - Retry only what means "try again" and what the project emits: ENETWORK
//   (connection failures, a proxy's non-JSON 5xx), EUNAVAILABLE (a server
//   shutting down), ELAGGING (a slow reader cut off), EINTERNAL (a 500).
//   Exponential backoff with jitter, so many clients do not reconnect in
//   lockstep; progress (a new seq) resets the failure count.
// - Web standards only (AbortSignal, ReadableStream, setTimeout): it runs in
//   Node and in browsers (the dashboard page imports this file).

import { ComputerError, codeOf } from "./errors.js";

/** Reconnect tuning, honoured by every caller of the loop. */
export interface ResumeOptions {
  /** Consecutive failed attempts (without any progress) before giving up. Default 10; Infinity: never. */
  maxRetries?: number;
  /** First backoff delay; doubles per failure. Default 50 ms. */
  initialDelayMs?: number;
  /** Backoff cap. Default 2000 ms. */
  maxDelayMs?: number;
}

export const DEFAULT_RESUME: Readonly<Required<ResumeOptions>> = Object.freeze({
  maxRetries: 10,
  initialDelayMs: 50,
  maxDelayMs: 2000,
});

/** `open`: a connection was established; `reconnecting`: one failed (`error` says why, none for a clean cut). */
export type ResumeState = "open" | "reconnecting";

/**
 * A truncation policy: the log no longer has the items after `after`
 * (`error.earliestSeq` says where it starts). Return the position to continue
 * from, or throw to fail the stream.
 */
export type TruncationPolicy = (error: ComputerError, after: number) => number | Promise<number>;

export interface ResumableOptions<T> {
  /**
   * Opens one connection for the items with seq > `after`. It ends when the
   * iterable returns (see `ended`) or throws (a coded error decides whether to
   * retry; anything else counts as a network failure). `signal` aborts when
   * the loop leaves this connection.
   */
  connect(after: number, signal: AbortSignal): AsyncIterable<T[]> | Promise<AsyncIterable<T[]>>;
  /** An item's position; undefined for items that have none (they are never dropped). */
  seqOf(item: T): number | undefined;
  /** The last item of the stream (an exit event, a `[DONE]` marker): delivered, then the stream closes. */
  isEnd?(item: T): boolean;
  /**
   * A connection ended without an end item: true when the stream is complete,
   * false to reconnect (a clean cut). May throw. Default: reconnect.
   */
  ended?(after: number, signal: AbortSignal): boolean | Promise<boolean>;
  /** Where to start: a seq (default 0), or a function resolving it on the first attempt (a pinned tail). */
  after?: number | ((signal: AbortSignal) => Promise<number>);
  /** Positions never skip, so `seq > after + 1` is EGAP. Default true. */
  gapFree?: boolean;
  retry?: ResumeOptions;
  /** Which errors reconnect (default `isRetryable`). */
  retryable?(error: ComputerError): boolean;
  /** What to do on ELOG_TRUNCATED; without it the error (with `earliestSeq`) fails the stream. */
  onTruncated?: TruncationPolicy;
  /** Abort: the stream errors with EABORTED at once and nothing reconnects. */
  signal?: AbortSignal;
  onState?(state: ResumeState, error?: ComputerError): void;
  /** Items read ahead of the consumer (default 0: read only on demand). */
  highWaterMark?: number;
}

const RETRYABLE = new Set(["ENETWORK", "EUNAVAILABLE", "ELAGGING", "EINTERNAL"]);

/** True for the codes that mean "try again" (see the file header). */
export function isRetryable(err: unknown): boolean {
  const code = codeOf(err);
  return code !== undefined && RETRYABLE.has(code);
}

function aborted(): ComputerError {
  return new ComputerError("EABORTED", "aborted");
}

/** The delay before retry number `failures + 1`: exponential, capped, jittered to 50–100 %. */
function backoff(retry: Required<ResumeOptions>, failures: number): number {
  const base = Math.min(retry.maxDelayMs, retry.initialDelayMs * 2 ** failures);
  return base / 2 + Math.random() * (base / 2);
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(aborted());
    const onAbort = () => {
      clearTimeout(timer);
      reject(aborted());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** `p`, or EABORTED as soon as `signal` aborts (for transports that ignore their signal). */
function unlessAborted<R>(p: Promise<R>, signal: AbortSignal): Promise<R> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      p.catch(() => {});
      return reject(aborted());
    }
    const onAbort = () => reject(aborted());
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

/** Any failure as a coded error: ours pass, anything else (a socket error, a TypeError from fetch) is ENETWORK. */
function coded(err: unknown): ComputerError {
  if (err instanceof ComputerError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new ComputerError("ENETWORK", message || "connection failed", { cause: err });
}

/**
 * One request (or any idempotent operation) retried like a stream: same
 * codes, same backoff, same budget. For calls that return one answer, such as
 * the SDK's result().
 */
export async function retrying<R>(
  fn: () => Promise<R>,
  options: { retry?: ResumeOptions; signal?: AbortSignal } = {},
): Promise<R> {
  const retry = { ...DEFAULT_RESUME, ...options.retry };
  for (let failures = 0; ; failures++) {
    try {
      return await fn();
    } catch (err) {
      if (options.signal?.aborted) throw aborted();
      if (!isRetryable(err) || failures >= retry.maxRetries) throw err;
      await sleep(backoff(retry, failures), options.signal);
    }
  }
}

/** Marks a connection that ended without an end item (not an error in itself). */
const CUT = Symbol("cut");

/** The resumable stream: see the file header. */
export function resumable<T>(options: ResumableOptions<T>): ReadableStream<T> {
  const retry = { ...DEFAULT_RESUME, ...options.retry };
  const gapFree = options.gapFree !== false;
  const retryable = options.retryable ?? isRetryable;
  const hwm = options.highWaterMark ?? 0;
  const outer = options.signal;
  /** Aborted when the stream is finished for any reason: ends the current connection too. */
  const life = new AbortController();

  let after = typeof options.after === "function" ? undefined : (options.after ?? 0);
  let conn: { iterator: AsyncIterator<T[]>; ac: AbortController } | undefined;
  let failures = 0;
  /** The final error, raised once the consumer has every item accepted before it. */
  let failure: ComputerError | undefined;
  /** A truncation waiting for the queue to drain before its policy runs. */
  let truncation: ComputerError | undefined;
  let finished = false;
  let ctrl!: ReadableStreamDefaultController<T>;

  const drop = () => {
    if (!conn) return;
    const { iterator, ac } = conn;
    conn = undefined;
    ac.abort();
    iterator.return?.()?.catch(() => {});
  };

  const finish = (error?: ComputerError) => {
    if (finished) return;
    finished = true;
    outer?.removeEventListener("abort", onOuterAbort);
    drop();
    life.abort();
    if (error) ctrl.error(error);
    else ctrl.close(); // queued items stay readable
  };

  const onOuterAbort = () => finish(aborted());
  if (outer?.aborted) life.abort();
  else outer?.addEventListener("abort", onOuterAbort, { once: true });

  /** The consumer has read everything enqueued so far. */
  const drained = () => ctrl.desiredSize === hwm;

  /** Accepts one batch; returns how many items were enqueued. Throws EGAP after enqueuing what came before it. */
  const accept = (batch: T[]): number => {
    let delivered = 0;
    for (const item of batch) {
      const seq = options.seqOf(item);
      if (seq !== undefined) {
        const last = after!;
        if (seq <= last) continue; // overlap after a resume
        if (gapFree && seq > last + 1) {
          throw new ComputerError("EGAP", `stream gap: expected seq ${last + 1}, got ${seq}`);
        }
        after = seq;
        failures = 0; // progress resets the retry budget
      }
      ctrl.enqueue(item);
      delivered++;
      if (options.isEnd?.(item)) {
        finish();
        return delivered;
      }
    }
    return delivered;
  };

  const pull = async (): Promise<void> => {
    for (;;) {
      if (finished) return;
      if (life.signal.aborted) return finish(aborted());
      if (failure) {
        if (drained()) finish(failure);
        return; // otherwise raised by the pull after the last queued item is read
      }
      try {
        if (truncation) {
          if (!drained()) return;
          const error = truncation;
          truncation = undefined;
          try {
            after = await unlessAborted(
              Promise.resolve(options.onTruncated!(error, after!)),
              life.signal,
            );
          } catch (err) {
            if (life.signal.aborted) throw err;
            failure = coded(err); // the policy refused: final
            continue;
          }
          // The first truncation in a row reconnects at once; repeated ones back off.
          if (failures > 0) await sleep(backoff(retry, failures - 1), life.signal);
          failures++;
          continue;
        }
        if (after === undefined) {
          const start = options.after as (signal: AbortSignal) => Promise<number>;
          after = await unlessAborted(start(life.signal), life.signal);
        }
        if (!conn) {
          const ac = new AbortController();
          const signal = AbortSignal.any([life.signal, ac.signal]);
          const iterable = await unlessAborted(
            Promise.resolve(options.connect(after, signal)),
            life.signal,
          );
          if (finished) return;
          conn = { iterator: iterable[Symbol.asyncIterator](), ac };
          options.onState?.("open");
          if (finished) return;
        }
        const r = await unlessAborted(conn.iterator.next(), life.signal);
        if (finished) return;
        if (r.done) {
          drop();
          if (
            await unlessAborted(
              Promise.resolve(options.ended?.(after, life.signal) ?? false),
              life.signal,
            )
          ) {
            return finish();
          }
          throw CUT;
        }
        if (accept(r.value) > 0) return; // wait for the next pull
      } catch (err) {
        drop();
        if (finished) return;
        if (life.signal.aborted) return finish(aborted());
        const error = err === CUT ? undefined : coded(err);
        if (error?.code === "ELOG_TRUNCATED" && options.onTruncated) {
          if (failures >= retry.maxRetries) failure = error;
          else truncation = error;
          continue;
        }
        if ((error && !retryable(error)) || failures >= retry.maxRetries) {
          failure = error ?? new ComputerError("ENETWORK", "the stream ended before its end");
          continue;
        }
        options.onState?.("reconnecting", error);
        if (finished) return;
        try {
          await sleep(backoff(retry, failures++), life.signal);
        } catch {
          return finish(aborted());
        }
      }
    }
  };

  return new ReadableStream<T>(
    {
      start(controller) {
        ctrl = controller;
        if (outer?.aborted) finish(aborted());
      },
      pull,
      cancel() {
        finished = true;
        outer?.removeEventListener("abort", onOuterAbort);
        drop();
        life.abort();
      },
    },
    { highWaterMark: hwm },
  );
}

/** A batch queue fed by callbacks (WebSocket messages), read as a connection's async iterable. */
export interface BatchQueue<T> extends AsyncIterable<T[]> {
  /** Adds an item for the next batch. */
  push(item: T): void;
  /** The connection ended cleanly; queued items are still read. */
  end(): void;
  /** The connection failed; queued items are read first, then `error` is thrown. */
  fail(error: unknown): void;
  /** True once end() or fail() was called. */
  readonly settled: boolean;
}

export function batchQueue<T>(): BatchQueue<T> {
  let items: T[] = [];
  let state: "open" | "ended" | "failed" = "open";
  let error: unknown;
  let wake: (() => void) | undefined;
  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  return {
    push(item) {
      if (state !== "open") return;
      items.push(item);
      notify();
    },
    end() {
      if (state !== "open") return;
      state = "ended";
      notify();
    },
    fail(e) {
      if (state !== "open") return;
      state = "failed";
      error = e;
      notify();
    },
    get settled() {
      return state !== "open";
    },
    [Symbol.asyncIterator]() {
      return {
        async next(): Promise<IteratorResult<T[]>> {
          while (items.length === 0 && state === "open") {
            await new Promise<void>((r) => (wake = r));
          }
          if (items.length > 0) {
            const batch = items;
            items = [];
            return { value: batch, done: false };
          }
          if (state === "failed") throw error;
          return { value: undefined, done: true };
        },
        async return(): Promise<IteratorResult<T[]>> {
          state = state === "open" ? "ended" : state;
          items = [];
          notify();
          return { value: undefined, done: true };
        },
      };
    },
  };
}
