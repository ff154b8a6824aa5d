// Reading one execution's events: replay from a start position, then follow
// until `exit`. Live and resuming readers take the same path (read the log
// after a seq, wait for more), so they cannot disagree; the one shortcut is
// at the live end of a process running here, where the wait itself may hand
// over the next accepted batch (live-tail.ts) instead of a read of it.
//
// Opening is one async step, shared by events() and subscribe(): it parses
// `after` (parseAfter), finds the execution and checks that the log can serve
// the start (resolveAfter: EINVAL beyond the last seq, ELOG_TRUNCATED with
// earliestSeq), and only then registers the reader. A bad start therefore
// fails before any event: subscribe() rejects, events() errors its stream.
//
// A reader of an execution running in this process also holds it back when
// it lags (see backpressure.ts); readers of executions on other nodes just
// read the shared log.

import type { EventLog, ExecRecord } from "../store/types.js";
import { ComputerError } from "../wire/errors.js";
import { parseAfter, resolveAfter } from "../wire/position.js";
import type { ExecEvent, LoggedEvent } from "../wire/types.js";
import type { Reader } from "./backpressure.js";
import { type HeartbeatTicker, heartbeatEvent, type Parked } from "./heartbeat.js";
import type { TailWait } from "./live-tail.js";
import type { LocalExec } from "./process.js";
import type { EventsOptions } from "./types.js";

/** Events read from the log per call. */
const READ_BATCH = 64;

/** What a subscription reads from. */
export interface SubscriptionSource {
  eventLog: Promise<EventLog>;
  /** The execution if its process runs here (possibly just finished). */
  local(id: string): LocalExec | undefined;
  /** The shared heartbeat ticker; undefined when heartbeats are off. */
  heartbeats: HeartbeatTicker | undefined;
}

/** A fresh stream of the execution's events; a bad start errors the stream. */
export function eventStream(
  source: SubscriptionSource,
  id: string,
  options: EventsOptions,
): ReadableStream<ExecEvent> {
  let sub: Subscription | undefined;
  let cancelled = false;
  return new ReadableStream<ExecEvent>(
    {
      async start(controller) {
        sub = await openSubscription(source, id, options);
        if (cancelled) sub.close();
        else sub.attach(controller);
      },
      pull: (controller) => sub!.pull(controller),
      cancel() {
        cancelled = true;
        sub?.close();
      },
    },
    { highWaterMark: 0 },
  );
}

/** The same stream, returned only once its start is known to be servable. */
export async function subscribeStream(
  source: SubscriptionSource,
  id: string,
  options: EventsOptions,
): Promise<ReadableStream<ExecEvent>> {
  const sub = await openSubscription(source, id, options);
  return new ReadableStream<ExecEvent>(
    {
      start: (controller) => sub.attach(controller),
      pull: (controller) => sub.pull(controller),
      cancel: () => sub.close(),
    },
    { highWaterMark: 0 },
  );
}

/** Validate the start position once, then register the reader. */
async function openSubscription(
  source: SubscriptionSource,
  id: string,
  options: EventsOptions,
): Promise<Subscription> {
  const signal = options.signal;
  if (signal?.aborted) throw aborted();
  const requested = parseAfter(options.after);
  const eventLog = await source.eventLog;
  const exe = source.local(id);
  const rec = await eventLog.get(id);
  if (!rec) throw notFound(id);
  // A running execution may have numbered events the log has not stored yet.
  const running = exe && !exe.finished ? exe : undefined;
  const lastSeq = running ? Math.max(running.lastSeq, rec.lastSeq) : rec.lastSeq;
  const after = resolveAfter(id, requested, { lastSeq, earliestSeq: rec.earliestSeq });
  if (signal?.aborted) throw aborted();
  const heartbeats = options.heartbeats !== false ? source.heartbeats : undefined;
  return new Subscription(source, eventLog, id, after, running, heartbeats, signal);
}

class Subscription implements Reader {
  /** Seq of the last event handed out. */
  after: number;
  lastPull = Date.now();
  private controller: ReadableStreamDefaultController<ExecEvent> | undefined;
  /** An error raised before the stream was attached. */
  private early: unknown;
  private buf: LoggedEvent[] = [];
  private bi = 0;
  private done = false;
  /** Last time anything (event or heartbeat) was handed out, and the last logged event. */
  private lastSeenAt = Date.now();
  private lastEventAt = this.lastSeenAt;
  /** Ends a wait on the log when the stream ends (remote executions only). */
  private readonly inner = new AbortController();
  private readonly parked: (Parked & { record?: ExecRecord; live?: LocalExec }) | undefined;
  private readonly onAbort = () => this.fail(aborted());
  /** The wait at the live end of a process running here, while parked there. */
  private tailWait: TailWait | undefined;

  constructor(
    private readonly source: SubscriptionSource,
    private readonly eventLog: EventLog,
    private readonly id: string,
    after: number,
    /** The execution this reader may hold back, when it runs here. */
    private readonly running: LocalExec | undefined,
    private readonly heartbeats: HeartbeatTicker | undefined,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.after = after;
    this.parked = heartbeats ? { since: 0, beat: () => this.beat() } : undefined;
    signal?.addEventListener("abort", this.onAbort, { once: true });
    running?.follow(this);
  }

  attach(controller: ReadableStreamDefaultController<ExecEvent>): void {
    this.controller = controller;
    if (this.early !== undefined) throw this.early;
  }

  /** Backpressure cut this reader off (it held the process back without reading). */
  cut(err: ComputerError): void {
    this.fail(err);
  }

  close(): void {
    this.finish();
  }

  async pull(controller: ReadableStreamDefaultController<ExecEvent>): Promise<void> {
    if (this.done) return;
    this.lastPull = Date.now();
    try {
      for (;;) {
        if (this.done) return;
        if (this.bi < this.buf.length) {
          const ev = this.buf[this.bi++]!;
          this.after = ev.seq;
          if (this.running) this.running.advanced();
          this.lastSeenAt = this.lastEventAt = Date.now();
          controller.enqueue(ev as ExecEvent);
          if (ev.name === "exit") {
            this.finish();
            controller.close();
          }
          return;
        }
        // At the live end of a process running here there is nothing to read:
        // what comes next is handed over by the wait below.
        const running = this.running;
        if (!running || running.finished || running.acceptedSeq > this.after) {
          this.buf = await this.eventLog.read(this.id, this.after, { limit: READ_BATCH });
          this.bi = 0;
          if (this.buf.length > 0) continue;
        }
        // A process running here is known to be running: skip the record
        // lookup on the hot path. Otherwise ask the log (another node may own it).
        const live = this.source.local(this.id);
        let rec: ExecRecord | undefined;
        if (!live || live.finished) {
          rec = await this.eventLog.get(this.id);
          if (!rec) throw notFound(this.id);
          if (rec.lastSeq > this.after) continue;
          if (rec.state !== "running") {
            this.finish();
            controller.close();
            return;
          }
        }
        // No abort signal for a local execution: its waiter is woken by its
        // next output or exit anyway, and signal listeners cost per wait (a
        // reader that ends leaves the live tail itself, see finish()).
        // While parked, the shared ticker may hand out heartbeats on this
        // stream (they answer the pending read).
        const parked = this.parked;
        if (parked) {
          parked.since = this.lastSeenAt;
          parked.record = live?.record ?? rec!;
          parked.live = live;
          this.heartbeats!.park(parked);
        }
        try {
          if (live && !live.finished) {
            // At the live end of a process running here: take the next batch
            // the log accepts as it is (live-tail.ts), or read the log.
            const wait = live.waitTail(this.after);
            this.tailWait = wait;
            const got = await wait.promise;
            if (got.length > 0) {
              this.buf = got;
              this.bi = 0;
            }
          } else {
            await this.eventLog.waitFor(this.id, this.after, live ? undefined : this.inner.signal);
          }
        } finally {
          this.tailWait = undefined;
          if (parked) this.heartbeats!.unpark(parked);
        }
      }
    } catch (err) {
      if (this.done) return; // aborted or cut while waiting: already reported
      this.fail(err);
    }
  }

  private beat(): void {
    const parked = this.parked!;
    if (this.done || !parked.record) return;
    const now = Date.now();
    this.lastSeenAt = parked.since = now;
    const lastOutputAt = parked.live ? parked.live.lastOutputAt : this.lastEventAt;
    this.controller!.enqueue(heartbeatEvent(this.id, this.after, parked.record, lastOutputAt, now));
  }

  private finish(): void {
    this.done = true;
    this.running?.unfollow(this);
    this.tailWait?.cancel();
    this.inner.abort();
    this.signal?.removeEventListener("abort", this.onAbort);
  }

  private fail(err: unknown): void {
    if (this.done) return;
    this.finish();
    if (this.controller) this.controller.error(err);
    else this.early = err;
  }
}

function aborted(): ComputerError {
  return new ComputerError("EABORTED", "event stream aborted");
}

function notFound(id: string): ComputerError {
  return new ComputerError("ENOENT", `no such execution: ${id}`);
}
