// Keeps the relay's channels in the server's EventLog (SQLite or Redis), so a
// restarted server serves the same channels: same commands, same seqs, same
// compaction, same UI events. The relay itself stays in memory and
// synchronous; this is a write-behind journal beside it.
//
// Shape of what is stored (docs/ui.md, "Persistence"):
//   record id  `~aui/<node>/<channel>` — `~` cannot start an execution id,
//              so these records never collide with executions (and the
//              Computer leaves them out of its listing); the node id keeps
//              the relays of cluster nodes sharing one Redis log apart (each
//              node's relay is its own, and a restarted node takes back its
//              own channels only);
//   events     {name: "stdout", value: <JSON text>}, one per operation:
//              {k:"s", s: snapshot}   the channel's whole state (first event)
//              {k:"c", c: command}    an accepted command, in seq order
//              {k:"e", e: event}      a logged UI event, with its seq
//              {k:"end"}              the server shut down cleanly
// Each record starts with a snapshot: when the channel is created, when it is
// restored after a start (the old record is replaced, which also compacts
// it), and again whenever the operations after the snapshot grow past a
// quarter of the log's per-record capacity (so the log never trims the
// snapshot away). Rebuilding = restoring the snapshot, then re-applying the
// operations through the channel's own code, which is deterministic.
//
// Ordering: every write of a channel is chained after the one before, so the
// log holds the operations in the order the channel applied them. Writes are
// behind the answers (publish stays synchronous): after a crash (kill -9) the
// last operations may be missing. A record without the clean-shutdown marker
// is therefore restored with its seqs moved on by CRASH_GAP, so no seq a page
// or agent saw is handed out again for something else, and a cursor inside
// the skipped range is ELOG_TRUNCATED (the page starts over from the state).

import { MemoryEventLog } from "../../store/memory-log.js";
import type { EventLog } from "../../store/types.js";
import { type ChannelLimits, type ChannelSnapshot, type JournalOp, UiChannel } from "./channel.js";

/** Prefix of every record id the relay writes. */
export const RELAY_LOG_PREFIX = "~aui/";
/** Seqs skipped when a channel is restored after a crash (more than a server can publish unstored). */
export const CRASH_GAP = 10_000;
const READ_BATCH = 256;

type StoredOp = JournalOp | { k: "s"; s: ChannelSnapshot } | { k: "end" };

interface Record {
  logId: string;
  seq: number;
  /** Bytes written since the record's snapshot. */
  bytes: number;
  chain: Promise<void>;
  channel: UiChannel;
}

export interface RelayStoreOptions {
  /** Node id written in the records. */
  nodeId?: string;
  logger?: (entry: { [k: string]: unknown }) => void;
}

/** The relay's journal in `eventLog`. */
export class RelayStore {
  private readonly records = new Map<string, Record>();
  private loaded: Promise<unknown> = Promise.resolve();
  private failed = false;
  /** The log, once open; undefined for a memory log (the relay outlives nothing it could keep). */
  private log?: EventLog;
  private capacity = Number.POSITIVE_INFINITY;

  constructor(
    private readonly eventLogP: Promise<EventLog>,
    private readonly options: RelayStoreOptions = {},
  ) {}

  /** Rebuilds every stored channel (call once, at start). */
  load(limits: ChannelLimits): Promise<Map<string, UiChannel>> {
    const p = this.loadAll(limits);
    this.loaded = p.catch(() => {});
    return p;
  }

  private get prefix(): string {
    return `${RELAY_LOG_PREFIX}${this.options.nodeId ?? "local"}/`;
  }

  private get eventLog(): EventLog {
    return this.log!;
  }

  private async loadAll(limits: ChannelLimits): Promise<Map<string, UiChannel>> {
    const out = new Map<string, UiChannel>();
    const log = await this.eventLogP;
    if (log instanceof MemoryEventLog) return out;
    this.log = log;
    this.capacity = log.capacityBytes;
    const prefix = this.prefix;
    const recs = (await this.eventLog.list()).filter((r) => r.id.startsWith(prefix));
    for (const rec of recs) {
      const name = rec.id.slice(prefix.length);
      try {
        const ch = await this.rebuild(rec.id, name, limits);
        if (ch) out.set(name, ch);
      } catch (err) {
        this.options.logger?.({
          msg: "ui channel could not be restored",
          channel: name,
          error: String(err),
        });
      }
    }
    return out;
  }

  private async rebuild(
    logId: string,
    name: string,
    limits: ChannelLimits,
  ): Promise<UiChannel | undefined> {
    let ch: UiChannel | undefined;
    let clean = false;
    let after = 0;
    for (;;) {
      const events = await this.eventLog.read(logId, after, { limit: READ_BATCH });
      if (events.length === 0) break;
      for (const ev of events) {
        after = ev.seq;
        if (ev.name === "exit") continue;
        const op = JSON.parse(String(ev.value)) as StoredOp;
        clean = op.k === "end";
        if (op.k === "s") ch = UiChannel.restore(name, limits, op.s);
        else if (op.k === "c" || op.k === "e") ch?.apply(op);
      }
    }
    if (ch && !clean) ch.skipAfterCrash(CRASH_GAP);
    return ch;
  }

  /**
   * Journals `channel` from now on: replaces its record with one that starts
   * with the channel's current state, then appends each operation.
   */
  attach(channel: UiChannel): void {
    const logId = this.prefix + channel.name;
    const prev = this.records.get(channel.name);
    const r: Record = {
      logId,
      seq: 0,
      bytes: 0,
      chain: prev ? prev.chain : this.loaded.then(() => {}),
      channel,
    };
    this.records.set(channel.name, r);
    this.startRecord(r);
    channel.journal = (op) => {
      const value = JSON.stringify(op);
      r.bytes += value.length;
      if (r.bytes > this.capacity / 4) this.startRecord(r);
      else this.write(r, value);
    };
  }

  /** The channel was deleted: its record goes (after the writes before it). */
  remove(name: string): void {
    const r = this.records.get(name);
    if (!r) return;
    this.records.delete(name);
    r.channel.journal = undefined;
    r.chain = r.chain.then(() => this.log?.dispose(r.logId)).catch((e) => this.fail(e));
  }

  /** Shutdown: marks every record clean and waits for every write. */
  async flush(): Promise<void> {
    for (const r of this.records.values()) {
      r.channel.journal = undefined;
      this.write(r, JSON.stringify({ k: "end" }));
    }
    await Promise.all([...this.records.values()].map((r) => r.chain));
  }

  /** Resolves once every write so far is in the log (no clean-shutdown marker: what a crash leaves). */
  async settled(): Promise<void> {
    await this.loaded;
    await Promise.all([...this.records.values()].map((r) => r.chain));
  }

  /** A fresh record holding the channel's state now (taken synchronously, so it is in order). */
  private startRecord(r: Record): void {
    const snapshot = JSON.stringify({ k: "s", s: r.channel.snapshot() });
    r.bytes = 0;
    r.chain = r.chain
      .then(async () => {
        if (!this.log) return;
        await this.eventLog.dispose(r.logId);
        await this.eventLog.create({
          id: r.logId,
          command: "ui channel",
          cwd: "",
          encoding: "utf8",
          node: this.options.nodeId ?? "local",
          startedAt: Date.now(),
        });
        r.seq = 0;
      })
      .catch((e) => this.fail(e));
    this.write(r, snapshot);
  }

  private write(r: Record, value: string): void {
    r.chain = r.chain
      .then(() => {
        if (!this.log) return;
        const seq = r.seq + 1;
        return this.eventLog
          .append(r.logId, [{ id: r.logId, seq, name: "stdout", value }])
          .then(() => {
            r.seq = seq;
          });
      })
      .catch((e) => this.fail(e));
  }

  private fail(err: unknown): void {
    if (this.failed) return;
    this.failed = true; // logged once: a backend outage would repeat it per write
    this.options.logger?.({ msg: "ui channel journal write failed", error: String(err) });
  }
}
