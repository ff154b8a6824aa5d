// One A@UI relay channel: the commands agents publish (validated, numbered,
// retained and compacted), the pages following them, and the UI events pages
// send back. Pure domain logic: no HTTP, no sockets. The transports
// (sse.ts, ws.ts, poll.ts) and the routes only translate to and from it.
//
// Shape decisions (docs/ui.md, "The relay", has the user-facing rules):
// - Every command gets a seq (1, 2, 3, …). It is the SSE `id:`, the poll
//   cursor and the WebSocket position, so every transport resumes the same
//   way: "give me what comes after seq N".
// - Retained state is compacted so a page opened later replays the channel's
//   current state, not its history: updates to a widget are folded into one
//   update at the newest seq (shallow merge is associative, so the state a
//   page reaches is identical), and a destroy removes the widget's render and
//   update, leaving only the small destroy itself (a "tombstone", which a page
//   that never saw the widget treats as a no-op). Widgets are matched by the
//   id a relay page mints, `w<render seq>` (the runtime's `relayWidgetId`),
//   which publish returns at once.
// - The last commands are also kept exactly (uncompacted), so a page that
//   reconnects after a short drop gets precisely the commands it missed.
// - Bounded: when the retained log is full, tombstones and commands for ids
//   the relay did not mint are dropped oldest first and the channel's `floor`
//   rises; a resume from below the floor is ELOG_TRUNCATED and the page
//   starts over from a snapshot (after=0). If only live widgets remain, a new
//   render is refused with ELIMIT, never silently lost.
// - Persistence is outside this class (persist.ts): a `journal` hook sees
//   every accepted command and UI event in order, and `snapshot()` /
//   `UiChannel.restore()` carry the whole state (seqs, compaction, events)
//   across a server restart unchanged.

import type { Command, UiEvent } from "../../aui/types.js";
import { validateCommand, validateUiEvent } from "../../aui/validate.js";
import { ComputerError } from "../../wire/errors.js";

/** A channel's bounds. */
/** A channel counts as watched this long after a poll read it (a polling page polls more often). */
const POLL_WATCH_MS = 30_000;

export interface ChannelLimits {
  /** Retained (compacted) commands. */
  maxRetained: number;
  /** Retained command bytes (as JSON). */
  maxRetainedBytes: number;
  /** Exact recent commands kept for resumes. */
  maxRecent: number;
  /** Bytes of exact recent commands. */
  maxRecentBytes: number;
  /** UI events kept (oldest dropped). */
  maxEvents: number;
  /**
   * Bytes of UI events kept (as JSON; oldest dropped, the newest always
   * kept). A count alone does not bound memory: 10,000 events of 1 MiB each
   * would be 10 GiB.
   */
  maxEventBytes: number;
}

export const DEFAULT_CHANNEL_LIMITS: ChannelLimits = {
  maxRetained: 10_000,
  maxRetainedBytes: 32 * 1024 * 1024,
  maxRecent: 1000,
  maxRecentBytes: 4 * 1024 * 1024,
  maxEvents: 10_000,
  maxEventBytes: 8 * 1024 * 1024,
};

/** One retained or live command with its seq. */
export interface RelayEntry {
  seq: number;
  command: Command;
}

/** A UI event as logged, with its seq in the channel's event log. */
export type LoggedUiEvent = UiEvent & { seq: number };

/** How a channel ends: "done" (the channel is over: [DONE]) or "cut" (the server is going away: pages reconnect). */
export type EndMode = "done" | "cut";

/** A follower: every new entry, then at most one end. */
export type Subscriber = (entry: RelayEntry | EndMode) => void;

export interface Subscription {
  /** What the follower missed, sent before anything live. */
  replay: RelayEntry[];
  unsubscribe(): void;
}

/** What publish answers: the command's seq, and the widget id a relay page mints for a render. */
export interface Published {
  seq: number;
  widgetId?: string;
}

/** What the journal hook sees: an accepted command or a logged UI event, in channel order. */
export type JournalOp = { k: "c"; c: Command } | { k: "e"; e: LoggedUiEvent };

/** A channel's whole state as JSON data (persist.ts stores it; `UiChannel.restore` reads it). */
export interface ChannelSnapshot {
  v: 1;
  lastSeq: number;
  floor: number;
  recent: RelayEntry[];
  /** [seq, command, droppable] in seq order. */
  retained: [number, Command, boolean][];
  /** [widget id, render seq, update seq or 0]. */
  widgets: [string, number, number][];
  events: LoggedUiEvent[];
  eventsLastSeq: number;
  /** Seqs a crashed server may have shown but not stored: resuming inside this range is ELOG_TRUNCATED. */
  lost?: [number, number];
  /** The same for UI event seqs. */
  lostEvents?: [number, number];
}

/** Size of a command as the bounds count it. */
function sizeOf(command: Command): number {
  return JSON.stringify(command).length;
}

export class UiChannel {
  readonly name: string;
  /** Last seq handed out. */
  lastSeq = 0;
  /** Resumes with 0 < after < floor cannot be served exactly (something was dropped). */
  floor = 0;
  closed = false;
  /** How the channel ended (set with `closed`). */
  endMode: EndMode = "done";
  /** The exact recent commands (uncompacted), oldest first. */
  private readonly recent: RelayEntry[] = [];
  private recentBytes = 0;
  /** The compacted state, by seq (insertion order is seq order). */
  private readonly retained = new Map<
    number,
    { command: Command; bytes: number; droppable: boolean }
  >();
  private retainedBytes = 0;
  /** relay-minted widget id -> seqs of its render and merged update */
  private readonly widgets = new Map<string, { render: number; update?: number }>();
  private readonly subscribers = new Set<Subscriber>();
  private readonly watchedHooks = new Set<() => void>();
  private polledAt = 0;
  private readonly events: LoggedUiEvent[] = [];
  /** JSON size of each entry of `events`, and their sum. */
  private readonly eventSizes: number[] = [];
  private eventBytes = 0;
  private eventsLastSeq = 0;
  private readonly eventWaiters = new Set<() => void>();
  private readonly eventListeners = new Set<(ev: LoggedUiEvent) => void>();
  /** Cursors in (lost[0], lost[1]] may have been seen before a crash but were not stored. */
  private lost?: [number, number];
  private lostEvents?: [number, number];
  /** Called with every accepted command and logged UI event, synchronously, in order (persistence). */
  journal?: (op: JournalOp) => void;

  constructor(
    name: string,
    private readonly limits: ChannelLimits,
  ) {
    this.name = name;
  }

  /** Validates, retains and fans out one command. Throws EINVAL / ELIMIT / ECLOSED. */
  publish(input: unknown): Published {
    if (this.closed) {
      // 410 rather than ECLOSED's usual 409: the channel is gone for good.
      throw new ComputerError("ECLOSED", `channel "${this.name}" is closed`, { status: 410 });
    }
    const checked = validateCommand(input);
    if (!checked.ok) throw new ComputerError("EINVAL", `invalid command: ${checked.reason}`);
    const command = checked.command;
    const bytes = sizeOf(command);
    if (command.type === "render" && !this.makeRoom(bytes)) {
      throw new ComputerError("ELIMIT", `channel "${this.name}" retains too many widgets`);
    }
    const seq = ++this.lastSeq;
    let widgetId: string | undefined;
    let retainedCommand: Command = command;
    let droppable = false;
    if (command.type === "render") {
      widgetId = `w${seq}`;
      this.widgets.set(widgetId, { render: seq });
    } else {
      const w = this.widgets.get(command.widgetId);
      if (!w) {
        droppable = true; // an id minted elsewhere: keep for resumes, drop first when full
      } else if (command.type === "update") {
        if (w.update !== undefined) {
          const prev = this.retained.get(w.update)!;
          const merged = {
            ...(prev.command as { params: Record<string, unknown> }).params,
            ...command.params,
          };
          retainedCommand = {
            type: "update",
            widgetId: command.widgetId,
            params: merged,
          } as Command;
          this.drop(w.update);
        }
        w.update = seq;
      } else {
        this.drop(w.render);
        if (w.update !== undefined) this.drop(w.update);
        this.widgets.delete(command.widgetId);
        droppable = true;
      }
    }
    this.retain(seq, retainedCommand, droppable);
    this.makeRoom(0);
    const entry = { seq, command };
    this.recent.push(entry);
    this.recentBytes += bytes;
    this.trimRecent();
    this.journal?.({ k: "c", c: command });
    for (const s of this.subscribers) s(entry);
    return widgetId === undefined ? { seq } : { seq, widgetId };
  }

  /**
   * A batch: every command is validated before any is applied, so an invalid
   * one (EINVAL naming its index) leaves the channel untouched.
   */
  publishAll(inputs: readonly unknown[]): Published[] {
    for (const [i, c] of inputs.entries()) {
      const r = validateCommand(c);
      if (!r.ok) throw new ComputerError("EINVAL", `invalid command at index ${i}: ${r.reason}`);
    }
    return inputs.map((c) => this.publish(c));
  }

  /**
   * Trims the exact recent window in batches (down to the bound once it is
   * exceeded by a quarter): dropping one entry per publish from the front of
   * a 1,000-entry array was the relay's hottest line.
   */
  private trimRecent(): void {
    const { maxRecent, maxRecentBytes } = this.limits;
    if (this.recent.length <= maxRecent + (maxRecent >> 2) && this.recentBytes <= maxRecentBytes)
      return;
    let drop = Math.max(0, this.recent.length - maxRecent);
    for (let i = 0; i < drop; i++) this.recentBytes -= sizeOf(this.recent[i]!.command);
    while (this.recent.length - drop > 1 && this.recentBytes > maxRecentBytes) {
      this.recentBytes -= sizeOf(this.recent[drop]!.command);
      drop++;
    }
    if (drop > 0) this.recent.splice(0, drop);
  }

  private retain(seq: number, command: Command, droppable: boolean): void {
    const bytes = sizeOf(command);
    this.retained.set(seq, { command, bytes, droppable });
    this.retainedBytes += bytes;
  }

  private drop(seq: number): void {
    const r = this.retained.get(seq);
    if (!r) return;
    this.retained.delete(seq);
    this.retainedBytes -= r.bytes;
  }

  /** Drops droppable entries oldest first until `extra` more bytes and one more entry fit. */
  private makeRoom(extra: number): boolean {
    const fits = () =>
      this.retained.size + (extra > 0 ? 1 : 0) <= this.limits.maxRetained &&
      this.retainedBytes + extra <= this.limits.maxRetainedBytes;
    if (fits()) return true;
    for (const [seq, r] of this.retained) {
      if (!r.droppable) continue;
      this.drop(seq);
      this.floor = Math.max(this.floor, seq);
      if (fits()) return true;
    }
    return fits();
  }

  /**
   * What a page at `after` needs. after=0 (a new page): the compacted current
   * state. A resume inside the recent window: exactly the commands it missed.
   * An older resume: the compacted entries past it (same resulting state).
   * Throws ELOG_TRUNCATED when after is below the floor or beyond the last seq.
   */
  replay(after: number): RelayEntry[] {
    if (after > this.lastSeq) {
      // A seq from the future: the channel was recreated (server restart, memory relay).
      throw new ComputerError(
        "ELOG_TRUNCATED",
        `cursor ${after} is ahead of channel "${this.name}" (head ${this.lastSeq}); it was restarted: start over with after=0`,
        { earliestSeq: 0 },
      );
    }
    if (this.lost && after > this.lost[0] && after <= this.lost[1]) {
      throw new ComputerError(
        "ELOG_TRUNCATED",
        `cursor ${after} of channel "${this.name}" was not stored before the server restarted; start over with after=0`,
        { earliestSeq: 0 },
      );
    }
    if (after > 0 && after < this.floor) {
      throw new ComputerError(
        "ELOG_TRUNCATED",
        `cursor ${after} is older than what channel "${this.name}" retains; start over with after=0`,
        { earliestSeq: this.floor },
      );
    }
    const firstRecent = this.recent[0]?.seq ?? this.lastSeq + 1;
    if (after > 0 && after >= firstRecent - 1) {
      let i = this.recent.length;
      while (i > 0 && this.recent[i - 1]!.seq > after) i--;
      return this.recent.slice(i);
    }
    const out: RelayEntry[] = [];
    for (const [seq, r] of this.retained) if (seq > after) out.push({ seq, command: r.command });
    return out;
  }

  /** Replay then follow, atomically (nothing published in between is lost). */
  subscribe(after: number, fn: Subscriber): Subscription {
    const replay = this.replay(after);
    this.noteWatching(() => this.subscribers.add(fn));
    return { replay, unsubscribe: () => this.subscribers.delete(fn) };
  }

  /** A poll read the channel: a polling page watches it without a subscription. */
  polled(): void {
    this.noteWatching(() => {
      this.polledAt = Date.now();
    });
  }

  /** Applies `watch` (a page starts watching); tells the hooks if nobody watched before. */
  private noteWatching(watch: () => void): void {
    const was = this.watched;
    watch();
    if (!was) for (const hook of this.watchedHooks) hook();
  }

  /** Whether a page watches: a subscriber now, or a poll within the last POLL_WATCH_MS. */
  get watched(): boolean {
    return this.subscribers.size > 0 || Date.now() - this.polledAt < POLL_WATCH_MS;
  }

  /** Calls `fn` whenever the channel goes from unwatched to watched (a page started watching). */
  onWatched(fn: () => void): () => void {
    this.watchedHooks.add(fn);
    return () => this.watchedHooks.delete(fn);
  }

  get subscriberCount(): number {
    return this.subscribers.size;
  }

  /**
   * Ends every subscription and refuses further commands: with [DONE] (the
   * channel is over), or, for a server shutdown, by cutting the connections
   * so pages keep reconnecting and pick up whatever the next server has.
   */
  close(mode: EndMode = "done"): void {
    if (this.closed) return;
    this.closed = true;
    this.endMode = mode;
    for (const s of this.subscribers) s(mode);
    this.subscribers.clear();
    for (const w of this.eventWaiters) w();
  }

  // ---- persistence (persist.ts) ----

  /** The whole state as JSON data. */
  snapshot(): ChannelSnapshot {
    const snap: ChannelSnapshot = {
      v: 1,
      lastSeq: this.lastSeq,
      floor: this.floor,
      recent: [...this.recent],
      retained: [...this.retained].map(([seq, r]) => [seq, r.command, r.droppable]),
      widgets: [...this.widgets].map(([id, w]) => [id, w.render, w.update ?? 0]),
      events: [...this.events],
      eventsLastSeq: this.eventsLastSeq,
    };
    if (this.lost) snap.lost = this.lost;
    if (this.lostEvents) snap.lostEvents = this.lostEvents;
    return snap;
  }

  /** Replays what `journal` saw (a restart rebuilding the channel): same seqs, same compaction. */
  apply(op: JournalOp): void {
    if (op.k === "c") {
      this.publish(op.c);
      return;
    }
    const { seq, ...ev } = op.e;
    this.eventsLastSeq = seq - 1;
    this.postEvent(ev);
  }

  /**
   * After a crash the last commands and events a page or agent saw may not
   * have been stored: the seqs jump by `gap` so none is handed out twice, and
   * a cursor inside the skipped range is ELOG_TRUNCATED (start over).
   */
  skipAfterCrash(gap: number): void {
    this.lost = [this.lastSeq, this.lastSeq + gap];
    this.lastSeq += gap;
    this.lostEvents = [this.eventsLastSeq, this.eventsLastSeq + gap];
    this.eventsLastSeq += gap;
  }

  static restore(name: string, limits: ChannelLimits, snap: ChannelSnapshot): UiChannel {
    const ch = new UiChannel(name, limits);
    ch.lastSeq = snap.lastSeq;
    ch.floor = snap.floor;
    for (const e of snap.recent) {
      ch.recent.push(e);
      ch.recentBytes += sizeOf(e.command);
    }
    for (const [seq, command, droppable] of snap.retained) ch.retain(seq, command, droppable);
    for (const [id, render, update] of snap.widgets)
      ch.widgets.set(id, update > 0 ? { render, update } : { render });
    for (const e of snap.events) {
      const size = Buffer.byteLength(JSON.stringify(e));
      ch.events.push(e);
      ch.eventSizes.push(size);
      ch.eventBytes += size;
    }
    ch.eventsLastSeq = snap.eventsLastSeq;
    if (snap.lost) ch.lost = snap.lost;
    if (snap.lostEvents) ch.lostEvents = snap.lostEvents;
    return ch;
  }

  // ---- UI events (UI -> agent) ----

  /** Validates and logs one UI event, then tells in-process listeners and waiting readers. */
  postEvent(input: unknown): LoggedUiEvent {
    const ev = checkUiEvent(input);
    const logged = { ...ev, seq: ++this.eventsLastSeq } as LoggedUiEvent;
    const size = Buffer.byteLength(JSON.stringify(logged));
    this.events.push(logged);
    this.journal?.({ k: "e", e: logged });
    this.eventSizes.push(size);
    this.eventBytes += size;
    let drop = Math.max(0, this.events.length - this.limits.maxEvents);
    let bytes = this.eventBytes;
    for (let i = 0; i < drop; i++) bytes -= this.eventSizes[i]!;
    while (drop < this.events.length - 1 && bytes > this.limits.maxEventBytes) {
      bytes -= this.eventSizes[drop]!;
      drop++;
    }
    if (drop > 0) {
      this.events.splice(0, drop);
      this.eventSizes.splice(0, drop);
      this.eventBytes = bytes;
    }
    for (const l of this.eventListeners) {
      try {
        l(logged);
      } catch (err) {
        console.error(
          JSON.stringify({
            msg: "ui event listener failed",
            channel: this.name,
            error: String(err),
          }),
        );
      }
    }
    for (const w of this.eventWaiters) w();
    this.eventWaiters.clear();
    return logged;
  }

  /** Seq of the last UI event logged (0 before any). */
  get lastEventSeq(): number {
    return this.eventsLastSeq;
  }

  /** Events with seq > after. Throws ELOG_TRUNCATED when some were dropped. */
  readEvents(after: number, limit = 1000): LoggedUiEvent[] {
    if (this.lostEvents && after > this.lostEvents[0] && after <= this.lostEvents[1]) {
      throw new ComputerError(
        "ELOG_TRUNCATED",
        `event cursor ${after} of channel "${this.name}" was not stored before the server restarted`,
        { earliestSeq: 0 },
      );
    }
    if (after > this.eventsLastSeq) {
      throw new ComputerError(
        "ELOG_TRUNCATED",
        `event cursor ${after} is ahead of channel "${this.name}" (${this.eventsLastSeq}); it was restarted`,
        { earliestSeq: 0 },
      );
    }
    const first = this.events[0]?.seq ?? this.eventsLastSeq + 1;
    if (after + 1 < first) {
      throw new ComputerError("ELOG_TRUNCATED", `UI events after ${after} were dropped`, {
        earliestSeq: first,
      });
    }
    // Binary search: seqs increase but may jump once (skipAfterCrash).
    let lo = 0;
    let hi = this.events.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.events[mid]!.seq <= after) lo = mid + 1;
      else hi = mid;
    }
    const start = lo;
    return this.events.slice(start, start + limit);
  }

  /** Resolves when an event with seq > after exists, the channel closes, the wait ends or the signal aborts. */
  waitForEvents(after: number, ms: number, signal?: AbortSignal): Promise<void> {
    if (this.eventsLastSeq > after || this.closed || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.eventWaiters.delete(done);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.eventWaiters.add(done);
      signal?.addEventListener("abort", done, { once: true });
    });
  }

  /** In-process listener (the dashboard driver). Returns an unsubscribe function. */
  onEvent(fn: (ev: LoggedUiEvent) => void): () => void {
    this.eventListeners.add(fn);
    return () => this.eventListeners.delete(fn);
  }
}

/** UI events are untrusted page input: the protocol's validator, plus no unknown fields. */
function checkUiEvent(input: unknown): UiEvent {
  const r = validateUiEvent(input);
  if (!r.ok) throw new ComputerError("EINVAL", `invalid UI event: ${r.reason}`);
  for (const k of Object.keys(r.event)) {
    if (k !== "type" && k !== "widgetId" && k !== "payload" && k !== "timestamp") {
      throw new ComputerError("EINVAL", `invalid UI event: unknown field "${k}"`);
    }
  }
  const ev: UiEvent = {
    type: r.event.type,
    widgetId: r.event.widgetId,
    timestamp: r.event.timestamp,
  };
  if (r.event.payload !== undefined) ev.payload = r.event.payload;
  return ev;
}
