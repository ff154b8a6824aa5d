// Numbers one execution's events and writes them to the event log. Every
// event (stdout, stderr, exit) gets the next seq of one gap-free sequence, in
// the order the runtime read the pipes, so the log's continuity check always
// holds and readers can resume anywhere.
//
// Appends are batched: while one append is in flight, new events queue and go
// in the next append, so a fast child costs one append per round trip, not
// one per chunk. What the log has not accepted yet is bounded: above
// `maxUnflushedBytes` the sequencer reports itself blocked (the child's pipes
// pause until the log has taken half of the backlog), so a slow or
// unreachable log (Redis) cannot grow the node's memory.
//
// A refused append drops what was queued (the runtime then kills the
// process); numbering goes on after the last event the log accepted, and what
// follows (a notice, the exit) is retried while the refusal is temporary, so
// the execution still finishes in the log with its reason.
//
// Chunks are the pipe's own buffers and are held only until the log's append
// takes them: the memory log copies them into its pooled segments within the
// append call (store/output-ring.ts), a remote log once it has sent them.
// Then the accepted batch goes to the readers waiting at the live end
// (live-tail.ts), which hand the chunks to their consumers. So no chunk
// outlives the batch in flight and its consumers, and output does not pile
// up promoted per-chunk buffers for full GCs to free.

import { eventSize } from "../store/common.js";
import type { EventLog } from "../store/types.js";
import { hasCode } from "../wire/errors.js";
import type { Chunk, ExitReason, LoggedEvent } from "../wire/types.js";

/** Waits between the retries of an append after a refusal (about 15 s in all). */
const RETRY_DELAYS_MS = [100, 200, 400, 800, 1600, 3000, 3000, 3000, 3000];

/** Told the size of every event as it is numbered (the backpressure accounting). */
export interface OutputMeter {
  produced(seq: number, size: number): void;
  /** The events after `seq` were never logged (the log refused them): forget them. */
  rewind?(seq: number): void;
}

export interface SequencerHooks {
  /** `blocked` changed. */
  blockedChanged(): void;
  /** The log refused an append: the output can no longer be recorded. */
  appendFailed(err: unknown): void;
  /**
   * The log accepted `batch` (the append resolved). The batch is no longer
   * needed here: its values may be handed on (live-tail.ts).
   */
  accepted?(batch: LoggedEvent[]): void;
}

export class Sequencer {
  private seq = 0;
  /** Seq of the last event the log accepted. */
  private accepted = 0;
  /** An append was refused: what follows (notice, exit) is retried while the refusal is temporary. */
  private refused = false;
  private pending: LoggedEvent[] = [];
  /** The part of `unflushed` that is still in `pending`. */
  private pendingBytes = 0;
  /** Bytes numbered but not yet accepted by the log (pending + the batch in flight). */
  private unflushed = 0;
  private isBlocked = false;
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly id: string,
    private readonly eventLog: EventLog,
    private readonly maxUnflushedBytes: number,
    private readonly meter: OutputMeter,
    private readonly hooks: SequencerHooks,
  ) {}

  /** Seq of the last event numbered (0 before the first). */
  get lastSeq(): number {
    return this.seq;
  }

  /** True while the log is behind by more than maxUnflushedBytes. */
  get blocked(): boolean {
    return this.isBlocked;
  }

  /**
   * Number a chunk of output and queue it for the log (the per-chunk path).
   * Once the log refused an append, output is discarded (the process is being
   * killed) unless `keep`: the notice that says so.
   */
  output(name: "stdout" | "stderr", value: Chunk, keep = false): void {
    if (this.refused && !keep) return;
    this.push({ id: this.id, seq: this.seq + 1, name, value });
  }

  /** Number the exit event; nothing may follow it. */
  exit(value: number, reason: ExitReason, signal: string | null): void {
    const ev: LoggedEvent = { id: this.id, seq: this.seq + 1, name: "exit", value, reason };
    if (signal) ev.signal = signal;
    this.push(ev);
  }

  /** Resolves once everything numbered so far was handed to the log (or refused). */
  async drained(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private push(ev: LoggedEvent): void {
    this.seq = ev.seq;
    const size = eventSize(ev);
    this.meter.produced(ev.seq, size);
    this.pending.push(ev);
    this.pendingBytes += size;
    this.unflushed += size;
    if (!this.isBlocked && this.unflushed > this.maxUnflushedBytes) {
      this.isBlocked = true;
      this.hooks.blockedChanged();
    }
    this.flushing ??= this.flush();
  }

  /**
   * One append. After a refusal, the batch that finishes the execution is
   * retried for a few seconds while the log says it is temporarily unable
   * (EUNAVAILABLE: a Redis over its maxmemory frees the buffers of the
   * refused write a moment later), so the exit is recorded when it can be.
   */
  private async append(batch: LoggedEvent[]): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.eventLog.append(this.id, batch);
      } catch (err) {
        const finishing = batch[batch.length - 1]!.name === "exit";
        if (!this.refused || !finishing || !hasCode(err, "EUNAVAILABLE")) throw err;
        if (attempt >= RETRY_DELAYS_MS.length) {
          throw err;
        }
        await new Promise((r) => setTimeout(r, RETRY_DELAYS_MS[attempt]));
      }
    }
  }

  private async flush(): Promise<void> {
    try {
      while (this.pending.length > 0) {
        const batch = this.pending;
        const batchBytes = this.pendingBytes;
        this.pending = [];
        this.pendingBytes = 0;
        await this.append(batch);
        this.accepted = batch[batch.length - 1]!.seq;
        this.unflushed -= batchBytes;
        this.hooks.accepted?.(batch);
        if (this.isBlocked && this.unflushed <= this.maxUnflushedBytes / 2) {
          this.isBlocked = false;
          this.hooks.blockedChanged();
        }
      }
    } catch (err) {
      // Nothing more is kept: what the log refused is gone. Numbering goes
      // on after the last event the log holds, so what follows (a notice, the
      // exit) still continues the log and can finish the execution.
      this.pending = [];
      this.pendingBytes = 0;
      this.unflushed = 0;
      this.seq = this.accepted;
      this.meter.rewind?.(this.accepted);
      this.refused = true;
      this.hooks.appendFailed(err);
      if (this.isBlocked) {
        this.isBlocked = false;
        this.hooks.blockedChanged();
      }
    } finally {
      this.flushing = null;
    }
  }
}
