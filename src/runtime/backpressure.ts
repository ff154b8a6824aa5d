// Backpressure between one running execution and its live readers in this
// process. Readers pull from the event log, which retains only
// `capacityBytes` of events per execution (EventLog.capacityBytes); a reader
// further behind than that would lose events. So while any reader is more
// than half the capacity behind, the child's pipes are paused (the child
// blocks on write) and they resume once every reader is within a quarter.
// Half, not all: a pipe still delivers a chunk or two after pause(), and a
// log may trim below its capacity in one step (SQLite trims to 3/4).
//
// A reader that holds the child back and asks for nothing for `stallMs` is
// cut off with ELAGGING, so one dead client cannot freeze a command; the
// others carry on.
//
// Lag is measured in the log's own unit (eventSize: payload plus a fixed
// overhead), so "how far behind" matches what the log would drop. To know
// the bytes produced up to any seq without storing every event, a window of
// cumulative sizes about one capacity long is kept; a reader older than the
// window is simply "far behind". A log that never drops events (capacity
// Infinity) needs none of this, and nothing is tracked.

import { EVENT_OVERHEAD_BYTES } from "../store/common.js";
import { ComputerError } from "../wire/errors.js";

/** A live reader of one execution, as backpressure sees it. */
export interface Reader {
  /** Seq of the last event handed to the consumer. */
  after: number;
  /** When the consumer last asked for more (epoch ms). */
  lastPull: number;
  /** Ends the reader's stream with `err` (it was cut off). */
  cut(err: ComputerError): void;
}

export class Backpressure {
  private readonly readers = new Set<Reader>();
  private readonly tracking: boolean;
  /** Lag (bytes) above which the pipes pause, and at or below which they resume. */
  private readonly pauseAt: number;
  private readonly resumeAt: number;
  private readonly capacityBytes: number;
  /** Seq of the last event produced. */
  private lastSeq = 0;
  /** Sum of eventSize() of everything produced. */
  private total = 0;
  /** totals[i] = total after the event with seq firstSeq + (i - head). */
  private totals: number[] = [];
  /** Total before the event firstSeq: what a reader at seq firstSeq - 1 has consumed. */
  private baseTotal = 0;
  private firstSeq = 1;
  private head = 0;
  private held = false;
  private stallTimer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly id: string,
    capacityBytes: number,
    private readonly stallMs: number,
    /** Called when `paused` changes. */
    private readonly onChange: () => void,
  ) {
    this.capacityBytes = capacityBytes;
    this.tracking = Number.isFinite(capacityBytes);
    this.pauseAt = Math.floor(capacityBytes / 2);
    this.resumeAt = Math.floor(this.pauseAt / 2);
  }

  /** True while a lagging reader holds the pipes. */
  get paused(): boolean {
    return this.held;
  }

  /** Account for the event `seq` of `size` bytes (on the per-chunk path: O(1) amortised). */
  produced(seq: number, size: number): void {
    if (!this.tracking) return;
    this.lastSeq = seq;
    this.total += size;
    this.totals.push(this.total);
    // Keep the window to about one capacity of bytes (older events are gone from the log too).
    const floor = this.total - this.capacityBytes - EVENT_OVERHEAD_BYTES;
    while (this.totals.length - this.head > 1 && this.totals[this.head]! < floor) {
      this.baseTotal = this.totals[this.head]!;
      this.head++;
      this.firstSeq++;
    }
    if (this.head > 4096 && this.head * 2 > this.totals.length) {
      this.totals = this.totals.slice(this.head);
      this.head = 0;
    }
    if (!this.held && this.readers.size > 0) this.update();
  }

  /** The events after `seq` were never logged (the log refused them): forget them. */
  rewind(seq: number): void {
    if (!this.tracking || seq >= this.lastSeq) return;
    if (seq < this.firstSeq - 1) {
      // Older than the window: start a new one there.
      this.totals = [];
      this.head = 0;
      this.firstSeq = seq + 1;
      this.baseTotal = this.total;
    } else {
      this.totals.length = this.head + (seq - this.firstSeq) + 1;
      this.total =
        seq === this.firstSeq - 1 ? this.baseTotal : this.totals[this.totals.length - 1]!;
    }
    this.lastSeq = seq;
    if (this.readers.size > 0) this.update();
  }

  add(reader: Reader): void {
    if (!this.tracking) return;
    this.readers.add(reader);
    this.update();
  }

  remove(reader: Reader): void {
    if (!this.readers.delete(reader)) return;
    this.update();
  }

  /** The reader moved on; only a paused execution needs to look again. */
  advanced(): void {
    if (this.held) this.update();
  }

  /** The execution finished: readers that are behind read on from the log, holding nothing. */
  stop(): void {
    if (this.stallTimer) clearInterval(this.stallTimer);
    this.stallTimer = undefined;
    this.readers.clear();
  }

  /** Bytes produced after the reader's position. */
  private lagOf(reader: Reader): number {
    const seq = reader.after;
    if (seq >= this.lastSeq) return 0;
    // Older than the window: more than a whole capacity behind.
    if (seq < this.firstSeq - 1) return Number.POSITIVE_INFINITY;
    const consumed =
      seq === this.firstSeq - 1 ? this.baseTotal : this.totals[this.head + (seq - this.firstSeq)]!;
    return this.total - consumed;
  }

  private update(): void {
    let maxLag = 0;
    for (const r of this.readers) {
      const lag = this.lagOf(r);
      if (lag > maxLag) maxLag = lag;
    }
    if (!this.held && maxLag > this.pauseAt) {
      this.held = true;
      this.onChange();
      const every = Math.max(10, Math.min(1000, Math.floor(this.stallMs / 4)));
      this.stallTimer = setInterval(() => this.checkStalls(), every);
      this.stallTimer.unref?.();
    } else if (this.held && maxLag <= this.resumeAt) {
      this.held = false;
      if (this.stallTimer) clearInterval(this.stallTimer);
      this.stallTimer = undefined;
      this.onChange();
    }
  }

  private checkStalls(): void {
    const now = Date.now();
    for (const r of [...this.readers]) {
      if (this.lagOf(r) > this.resumeAt && now - r.lastPull >= this.stallMs) {
        this.readers.delete(r);
        r.cut(
          new ComputerError(
            "ELAGGING",
            `subscriber to ${this.id} read nothing for ${this.stallMs} ms while holding the process back`,
          ),
        );
      }
    }
    this.update();
  }
}
