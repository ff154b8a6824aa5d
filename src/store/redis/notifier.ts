// Wake-ups for waiters of the Redis event log. One subscriber connection per
// log instance, subscribed to an execution's notification channel only while
// someone waits on it (with a linger, so a follower's repeated waits do not
// churn SUBSCRIBE), instead of one blocking XREAD connection per waiter.
//
// Pub/sub drops messages while the subscriber is disconnected, so after a
// reconnect every waiter is told to re-check the record; a slow safety poll
// (the caller's `pollMs`) covers anything else. A writer in this process also
// delivers its own notification at once (`local`), without the round trip.

import type { Redis } from "ioredis";
import { abortedError } from "../common.js";
import type { RedisKeys } from "./keys.js";

/** How long a channel stays subscribed after its last waiter left. */
const LINGER_MS = 10_000;

export interface Watch {
  id: string;
  refs: number;
  /** The SUBSCRIBE was confirmed: every later publish reaches this watch. */
  ready: boolean;
  /** Highest seq announced for this id (append notifications). */
  maxSeq: number;
  /** Bumped on every notification; waiters compare it across their re-check. */
  version: number;
  wakers: Set<(recheck: boolean) => void>;
  subscribed: Promise<void>;
  linger?: ReturnType<typeof setTimeout>;
}

/** Per-execution pub/sub subscriptions shared by all waiters of one log instance. */
export class Notifier {
  private sub: Redis | undefined;
  private readonly watches = new Map<string, Watch>();
  private closed = false;

  /** `makeSub` opens the subscriber connection, on the first wait only. */
  constructor(
    private readonly makeSub: () => Redis,
    private readonly keys: RedisKeys,
  ) {}

  private connection(): Redis {
    if (this.sub) return this.sub;
    const sub = this.makeSub();
    const idStart = this.keys.notifyChannelPrefix.length;
    sub.on("message", (channel: string, message: string) => {
      const w = this.watches.get(channel.slice(idStart));
      if (w) this.deliver(w, message);
    });
    // Pub/sub drops what was published while disconnected: make everyone re-check.
    let first = true;
    sub.on("ready", () => {
      if (first) {
        first = false;
        return;
      }
      for (const w of this.watches.values()) this.fire(w, true);
    });
    sub.on("error", () => {
      /* reconnects on its own; waiters re-check on "ready" */
    });
    this.sub = sub;
    return sub;
  }

  async acquire(id: string): Promise<Watch> {
    let w = this.watches.get(id);
    if (!w) {
      const sub = this.connection();
      const watch: Watch = {
        id,
        refs: 0,
        ready: false,
        maxSeq: 0,
        version: 0,
        wakers: new Set(),
        subscribed: Promise.resolve(),
      };
      watch.subscribed = sub.subscribe(this.keys.notifyChannel(id)).then(
        () => {
          watch.ready = true;
        },
        (err) => {
          if (this.watches.get(id) === watch) this.watches.delete(id);
          throw err;
        },
      );
      this.watches.set(id, watch);
      w = watch;
    }
    if (w.linger) {
      clearTimeout(w.linger);
      w.linger = undefined;
    }
    w.refs++;
    try {
      await w.subscribed;
    } catch (err) {
      w.refs--;
      throw err;
    }
    return w;
  }

  release(w: Watch): void {
    if (--w.refs > 0 || this.closed) return;
    w.linger = setTimeout(() => {
      if (w.refs > 0 || this.watches.get(w.id) !== w) return;
      this.watches.delete(w.id);
      this.sub?.unsubscribe(this.keys.notifyChannel(w.id)).catch(() => {});
    }, LINGER_MS);
    w.linger.unref?.();
  }

  /** The live, confirmed subscription of `id`, if any (no side effects). */
  peek(id: string): Watch | undefined {
    const w = this.watches.get(id);
    return w?.ready ? w : undefined;
  }

  /** A local writer's notification (same effect as the pub/sub message, sooner). */
  local(id: string, message: string): void {
    const w = this.watches.get(id);
    if (w) this.deliver(w, message);
  }

  private deliver(w: Watch, message: string): void {
    const n = Number(message);
    if (Number.isInteger(n)) {
      if (n > w.maxSeq) w.maxSeq = n;
      this.fire(w, false);
    } else {
      // Re-created or disposed: seqs start over.
      if (message === "c" || message === "d") w.maxSeq = 0;
      this.fire(w, true);
    }
  }

  private fire(w: Watch, recheck: boolean): void {
    w.version++;
    if (w.wakers.size === 0) return;
    const all = [...w.wakers];
    w.wakers.clear();
    for (const f of all) f(recheck);
  }

  /** Sleep until the next notification (true: state may have changed, re-check). */
  next(w: Watch, signal: AbortSignal | undefined, pollMs: number): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      const done = (recheck: boolean) => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        w.wakers.delete(done);
        resolve(recheck);
      };
      const onAbort = () => {
        clearTimeout(timer);
        w.wakers.delete(done);
        reject(abortedError(signal));
      };
      const timer = setTimeout(() => done(true), pollMs);
      w.wakers.add(done);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  close(): void {
    this.closed = true;
    for (const w of this.watches.values()) {
      if (w.linger) clearTimeout(w.linger);
      this.fire(w, true);
    }
    this.watches.clear();
    this.sub?.disconnect();
    this.sub = undefined;
  }
}
