// Screen snapshots of pty executions (docs/runtime.md, "Terminals"): a
// headless terminal (@xterm/headless) per execution, fed the events of its
// log in seq order with each recorded size applied where it falls, and
// serialized (@xterm/addon-serialize) on request. A viewer joining a long
// session draws the snapshot in one write, then follows from its seq.
//
// Pull, not push: a terminal catches up from the log only when a snapshot is
// asked for, so it never holds a running command back (a `cat` of a large
// file is not slowed by terminal emulation nobody looks at), and it works on
// any node that reads the log. Terminals are cached (least recently used
// first out) so a second snapshot only parses what came since the first.

import serializeAddon from "@xterm/addon-serialize";
import xtermHeadless from "@xterm/headless";
import type { EventLog, ExecRecord, PtyState } from "../store/types.js";
import { ComputerError, hasCode } from "../wire/errors.js";
import type { ScreenSnapshot } from "./types.js";

const { Terminal } = xtermHeadless;
const { SerializeAddon } = serializeAddon;
type HeadlessTerminal = InstanceType<typeof Terminal>;

/** Lines of scrollback kept (and serialized) per terminal. */
export const SCREEN_SCROLLBACK = 1000;
const MAX_TERMINALS = 32;
const IDLE_MS = 10 * 60_000;
const READ_BATCH = 512;

interface Tracker {
  startedAt: number;
  term: HeadlessTerminal;
  serializer: InstanceType<typeof SerializeAddon>;
  /** Last seq written into the terminal. */
  seq: number;
  /** `after` of the last size applied. */
  sizeAfter: number;
  partial: boolean;
  lastUsed: number;
  busy: Promise<unknown>;
}

export class ScreenSnapshots {
  private readonly trackers = new Map<string, Tracker>();

  constructor(private readonly eventLog: () => Promise<EventLog>) {}

  /** The current screen of execution `id`; ENOENT when unknown, EINVAL when not a pty. */
  async snapshot(id: string): Promise<ScreenSnapshot> {
    const eventLog = await this.eventLog();
    const rec = await eventLog.get(id);
    if (!rec) throw new ComputerError("ENOENT", `no such execution: ${id}`);
    if (!rec.pty) throw new ComputerError("EINVAL", `execution ${id} was not started with a pty`);
    let t = this.trackers.get(id);
    if (!t || t.startedAt !== rec.startedAt) {
      t?.term.dispose();
      t = newTracker(rec, rec.pty);
      this.trackers.set(id, t);
      this.evict();
    }
    const tracker = t;
    tracker.lastUsed = Date.now();
    const run = tracker.busy.then(() => this.catchUp(eventLog, rec, tracker));
    tracker.busy = run.catch(() => {});
    return run;
  }

  /** Drop every terminal. */
  close(): void {
    for (const t of this.trackers.values()) t.term.dispose();
    this.trackers.clear();
  }

  private async catchUp(eventLog: EventLog, rec: ExecRecord, t: Tracker): Promise<ScreenSnapshot> {
    const sizes = rec.pty!.sizes;
    // A fresh terminal starts where the log does (it may have dropped the beginning).
    if (t.seq === 0 && rec.earliestSeq > 1) {
      t.seq = rec.earliestSeq - 1;
      t.partial = true;
    }
    while (t.seq < rec.lastSeq) {
      let events: Awaited<ReturnType<EventLog["read"]>>;
      try {
        events = await eventLog.read(rec.id, t.seq, { limit: READ_BATCH });
      } catch (err) {
        if (!hasCode(err, "ELOG_TRUNCATED")) throw err;
        // Fell behind a log that dropped events: start over from its earliest.
        const earliest = (err as ComputerError).earliestSeq ?? rec.lastSeq;
        const fresh = newTracker(rec, rec.pty!);
        t.term.dispose();
        Object.assign(t, { ...fresh, seq: earliest - 1, partial: true, busy: t.busy });
        continue;
      }
      if (events.length === 0) break;
      for (const ev of events) {
        if (ev.name === "exit") {
          t.seq = ev.seq;
          continue;
        }
        await applySizes(t, sizes, ev.seq - 1);
        t.term.write(ev.value);
        t.seq = ev.seq;
      }
    }
    await applySizes(t, sizes, t.seq);
    await flushed(t.term);
    const buf = t.term.buffer.active;
    return {
      data: t.serializer.serialize({ scrollback: SCREEN_SCROLLBACK }),
      cols: t.term.cols,
      rows: t.term.rows,
      cursor: { x: buf.cursorX, y: buf.cursorY },
      seq: t.seq,
      partial: t.partial,
    };
  }

  private evict(): void {
    const now = Date.now();
    for (const [id, t] of this.trackers) {
      if (now - t.lastUsed > IDLE_MS) {
        t.term.dispose();
        this.trackers.delete(id);
      }
    }
    while (this.trackers.size > MAX_TERMINALS) {
      let oldest: [string, Tracker] | undefined;
      for (const e of this.trackers) if (!oldest || e[1].lastUsed < oldest[1].lastUsed) oldest = e;
      oldest![1].term.dispose();
      this.trackers.delete(oldest![0]);
    }
  }
}

function newTracker(rec: ExecRecord, pty: PtyState): Tracker {
  const first = pty.sizes[0] ?? pty;
  const term = new Terminal({
    cols: first.cols,
    rows: first.rows,
    scrollback: SCREEN_SCROLLBACK,
    allowProposedApi: true,
  });
  const serializer = new SerializeAddon();
  term.loadAddon(serializer as never);
  return {
    startedAt: rec.startedAt,
    term,
    serializer,
    seq: 0,
    sizeAfter: 0,
    partial: false,
    lastUsed: Date.now(),
    busy: Promise.resolve(),
  };
}

/**
 * Apply, in order, every recorded size that takes effect by `seq` (its
 * `after` ≤ seq) and was not applied yet. Sizing to the current size is a
 * no-op, so an entry seen twice does no harm. What was written so far is
 * parsed first: a resize must not overtake the bytes before it.
 */
export async function applySizes(
  t: { term: HeadlessTerminal; sizeAfter: number },
  sizes: PtyState["sizes"],
  seq: number,
): Promise<void> {
  for (const s of sizes) {
    if (s.after < t.sizeAfter || s.after > seq) continue;
    t.sizeAfter = s.after;
    if (s.cols === t.term.cols && s.rows === t.term.rows) continue;
    await flushed(t.term);
    t.term.resize(s.cols, s.rows);
  }
}

/** Resolves once everything written to the terminal so far is parsed. */
export function flushed(term: HeadlessTerminal): Promise<void> {
  return new Promise((resolve) => term.write("", resolve));
}
