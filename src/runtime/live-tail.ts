// Hands each batch of events the log has just accepted straight to the
// readers of a running execution that wait at its live end, so a reader that
// keeps up never reads its events back out of the log.
//
// Why: a reader that keeps up would otherwise, for every pipe chunk, be woken
// by the log, read the event back (the memory log copies the bytes out of its
// ring into a fresh buffer) and ask again only to find nothing. That round
// trip cost more than everything else the runtime does per chunk. The batch
// handed over here is the one the sequencer gave the log: its values are the
// pipe's own chunks, which the log no longer needs once it accepted them (it
// copied them, committed them or sent them).
//
// Only what the log accepted is handed over (after the append resolved), so
// a log that publishes only what is durable (SQLite) still never shows a
// reader an event a crash can take back. A reader takes a batch only when it
// continues exactly where the reader stands; otherwise (it fell behind, or
// it parked after the batch was accepted) it is woken with nothing and reads
// the log, which is always right. So the hand-over can skip work, never
// events.
//
// Ownership: the first reader handed a batch gets its events as they are;
// every other reader gets its own copies, so readers never share a value.

import type { LoggedEvent } from "../wire/types.js";

/** One parked reader: resolved with the events it takes, or [] to read the log. */
export interface TailWait {
  readonly promise: Promise<LoggedEvent[]>;
  /** Leave without waiting any longer (resolves with []). */
  cancel(): void;
}

interface Parked {
  after: number;
  resolve(events: LoggedEvent[]): void;
}

const NOTHING: LoggedEvent[] = [];

export class LiveTail {
  private readonly parked = new Set<Parked>();
  /** Seq of the last event the log accepted. */
  private acceptedSeq = 0;
  private closed = false;

  /** Seq of the last event the log accepted: every later one will be handed to waiting readers. */
  get lastAccepted(): number {
    return this.acceptedSeq;
  }

  /**
   * Park a reader that has handed out every event up to `after`. Resolves at
   * once with [] when the log already accepted more (read it), or the tail is
   * closed.
   */
  wait(after: number): TailWait {
    if (this.closed || this.acceptedSeq > after) {
      return { promise: Promise.resolve(NOTHING), cancel: () => {} };
    }
    let parked!: Parked;
    const promise = new Promise<LoggedEvent[]>((resolve) => {
      parked = { after, resolve };
    });
    this.parked.add(parked);
    return {
      promise,
      cancel: () => {
        if (this.parked.delete(parked)) parked.resolve(NOTHING);
      },
    };
  }

  /** The log accepted `batch` (contiguous seqs): hand it to the readers waiting for it. */
  accepted(batch: LoggedEvent[]): void {
    if (batch.length === 0) return;
    const first = batch[0]!.seq;
    const last = batch[batch.length - 1]!.seq;
    this.acceptedSeq = last;
    if (this.parked.size === 0) return;
    let shared = false;
    for (const p of this.parked) {
      if (p.after >= last) continue; // parked after reading these from the log
      this.parked.delete(p);
      if (p.after + 1 < first) {
        p.resolve(NOTHING); // behind this batch: the log has what it missed
        continue;
      }
      const mine = p.after + 1 === first ? batch : batch.slice(p.after + 1 - first);
      p.resolve(shared ? mine.map(ownCopy) : mine);
      shared = true;
    }
  }

  /** Wake every parked reader to read the log (the log refused, or the execution ended). */
  wakeAll(): void {
    for (const p of this.parked) p.resolve(NOTHING);
    this.parked.clear();
  }

  /** No more batches: wake everyone, and later waits return at once. */
  close(): void {
    this.closed = true;
    this.wakeAll();
  }
}

function ownCopy(ev: LoggedEvent): LoggedEvent {
  if (ev.name === "exit" || typeof ev.value === "string") return { ...ev };
  return { ...ev, value: ev.value.slice() } as LoggedEvent;
}
