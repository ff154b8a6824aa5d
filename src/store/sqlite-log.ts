// EventLog on a SQLite file (better-sqlite3 v12), for a single node that must
// keep its history across restarts. Same semantics as the memory log (ring
// per execution, retention after exit), plus recovery: on open, executions
// that were still running when the previous process died are closed with an
// `exit` whose reason is "lost" (value -1: the exit status is unknown).
//
// Speed: better-sqlite3 is synchronous, and a transaction per chunk of output
// would cap throughput at the commit rate (measured: ~30-70 MB/s for one 64 KiB
// row per transaction, ~2-3x that with 16 rows). So append() only validates
// and queues; what is queued is written in ONE transaction (across all
// executions) after COMMIT_DELAY_MS, or on the next turn once COMMIT_BYTES
// pile up, and the append promises resolve after that commit (resolved =
// durable). Readers see only what is committed: each execution has a
// published copy of its record, replaced after each commit, and reads,
// waits and record lookups go by it. So no client is ever shown an event a
// crash of this process can take back, and the restart (which closes
// running executions with a "lost" exit after the last committed seq) never
// reuses a seq anyone saw. Committed events are served from a hot tail of
// each execution's latest events in memory (at most HOT_MAX_BYTES); only
// reads further back go to the file.
//
// Storage: 64 KiB pages (process output arrives in 64 KiB chunks) and a
// rollback journal in PERSIST mode with synchronous=OFF. A flood of output
// through the ring is constant insert + delete of 64 KiB blobs: with WAL,
// every page is written twice (to the WAL, then again by the checkpoint);
// with a rollback journal, pages reused from the freelist (the overflow
// pages that hold the blobs) are not journaled, so most bytes are written
// once, and there is no checkpoint. synchronous=OFF: a commit is in the OS
// before the append resolves, and the OS keeps the order of our writes (the
// journal before the pages it protects), so the file survives a crash of the
// process (the case this log is for: restart, then replay or "lost"; a
// commit cut in half is rolled back from the journal on the next open); an
// OS crash or power cut may lose the last commits or the file. Measured:
// fsync (synchronous=NORMAL with WAL) halved throughput on this machine.
// Trade-off of leaving WAL: a reader in another process would block commits;
// there is none (one process per file, below).
//
// The record cache (one small object per execution) lives in memory; the
// events live only in the file. One process owns a file at a time: opening
// the same file from two processes at once is not supported.

import Database from "better-sqlite3";
import { ComputerError } from "../wire/errors.js";
import type { ExitEvent, LoggedEvent } from "../wire/types.js";
import {
  busy,
  checkBatch,
  closedError,
  DEFAULT_LOG_MAX_BYTES,
  DEFAULT_RETENTION_MS,
  type EventLogOptions,
  eventSize,
  finishPatch,
  normalizeState,
  notFound,
  sameEvent,
  truncated,
  Waiters,
} from "./common.js";
import type { EventLog, ExecRecord, NewExecRecord, ReadOptions } from "./types.js";

const DEFAULT_READ_LIMIT = 256;
// The runtime awaits each append before it hands over the next batch, and
// stops reading the child's pipes once maxUnflushedBytes (4 MiB) are waiting.
// So a commit that waits for 4 MiB to pile up in THIS queue never sees them:
// the writer stalls first and the commit only happens when the timer fires
// (measured: ~40% of a 1 GiB run idle). Hence a short delay and a threshold
// well under the runtime's limit; a batch that big commits on the next turn.
// Smaller commits cost more per byte (~3x the CPU at 256 KiB per commit
// than at 1-4 MiB), so the delay is not zero: 2 ms lets ~1-2 MiB gather.
const COMMIT_DELAY_MS = 2;
const COMMIT_BYTES = 1024 * 1024;
const HOT_MAX_BYTES = 8 * 1024 * 1024;

interface Entry {
  /** The record as appended (ahead of the file until the next commit). */
  rec: ExecRecord;
  /** The record as committed: what readers see (undefined before the first commit). */
  pub: ExecRecord | undefined;
  ord: number;
  bytes: number;
  /** Sizes of retained events, oldest first (only for executions appended to in this process). */
  sizes: number[] | null;
  sizeHead: number;
  /** Latest events appended in this process (hot[hotHead] has seq hotFirst). */
  hot: LoggedEvent[];
  hotSizes: number[];
  hotHead: number;
  hotFirst: number;
  hotBytes: number;
  waiters: Waiters;
  sweep?: ReturnType<typeof setTimeout>;
}

interface Row {
  seq: number;
  name: string;
  data: Buffer | null;
  text: number;
  code: number | null;
  signal: string | null;
  reason: string | null;
}

export class SqliteEventLog implements EventLog {
  private readonly db: Database.Database;
  /** The ring's cap per execution (`logMaxBytes`); a trim goes down to 3/4 of it. */
  readonly capacityBytes: number;
  private readonly retentionMs: number;
  private readonly entries = new Map<string, Entry>();
  private nextOrd = 1;
  private closed = false;
  /** Queued writes for the next transaction. */
  private queue: Array<() => void> = [];
  private dirty = new Set<string>();
  private woken = new Set<Entry>();
  private cooling = new Set<Entry>();
  private settle: Array<{ resolve: () => void; reject: (e: unknown) => void }> = [];
  private scheduled: NodeJS.Immediate | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private queuedBytes = 0;
  private readonly st: {
    insertEvent: Database.Statement;
    upsertExec: Database.Statement;
    deleteBefore: Database.Statement;
    deleteEvents: Database.Statement;
    deleteExec: Database.Statement;
    read: Database.Statement;
    readOne: Database.Statement;
  };

  constructor(
    readonly file: string,
    options: EventLogOptions = {},
  ) {
    this.capacityBytes = options.logMaxBytes ?? DEFAULT_LOG_MAX_BYTES;
    this.retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    this.db = new Database(file);
    this.db.pragma("page_size = 65536"); // only takes effect on a new file
    // Rollback journal, kept between transactions (PERSIST: no create/unlink
    // per commit), not WAL: see the header comment for why.
    this.db.pragma("journal_mode = PERSIST");
    this.db.pragma(`journal_size_limit = ${8 * 1024 * 1024}`);
    this.db.pragma("synchronous = OFF");
    // 32 MiB of page cache: a 16 MiB ring plus a commit's worth of new pages
    // stay cached, so trimming does not read back the pages it frees and a
    // commit does not spill. The default (2 MB) is ~31 pages of 64 KiB.
    this.db.pragma(`cache_size = ${-32 * 1024}`);
    // events is a rowid table (not WITHOUT ROWID): a rowid table keeps ~8 KiB
    // of a 64 KiB blob in the leaf page and the rest in an overflow page, an
    // index-organized one ~16 KiB; leaf pages are journaled on every change,
    // overflow pages reused from the freelist are not. Measured ~1.7x faster
    // for the insert + trim cycle. Files made with the older WITHOUT ROWID
    // table keep it; the statements work on both.
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS execs (
        id TEXT PRIMARY KEY,
        ord INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        record TEXT NOT NULL
      );
      CREATE TABLE IF NOT EXISTS events (
        id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        name TEXT NOT NULL,
        data BLOB,
        text INTEGER NOT NULL DEFAULT 0,
        code INTEGER,
        signal TEXT,
        reason TEXT,
        PRIMARY KEY (id, seq)
      );
    `);
    this.st = {
      insertEvent: this.db.prepare(
        "INSERT INTO events (id, seq, name, data, text, code, signal, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      ),
      upsertExec: this.db.prepare(
        "INSERT INTO execs (id, ord, bytes, record) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET ord = excluded.ord, bytes = excluded.bytes, record = excluded.record",
      ),
      deleteBefore: this.db.prepare("DELETE FROM events WHERE id = ? AND seq < ?"),
      deleteEvents: this.db.prepare("DELETE FROM events WHERE id = ?"),
      deleteExec: this.db.prepare("DELETE FROM execs WHERE id = ?"),
      read: this.db.prepare(
        "SELECT seq, name, data, text, code, signal, reason FROM events WHERE id = ? AND seq > ? ORDER BY seq LIMIT ?",
      ),
      readOne: this.db.prepare(
        "SELECT seq, name, data, text, code, signal, reason FROM events WHERE id = ? AND seq = ?",
      ),
    };
    this.recover();
  }

  /** Load the records; close what was running (lost) and sweep what expired. */
  private recover(): void {
    const rows = this.db
      .prepare("SELECT id, ord, bytes, record FROM execs ORDER BY ord")
      .all() as Array<{ id: string; ord: number; bytes: number; record: string }>;
    const now = Date.now();
    const lost: string[] = [];
    for (const r of rows) {
      const rec = JSON.parse(r.record) as ExecRecord;
      rec.state = normalizeState(rec.state) ?? "running";
      const e: Entry = {
        rec,
        pub: undefined,
        ord: r.ord,
        bytes: r.bytes,
        sizes: null,
        sizeHead: 0,
        ...noHot(),
        waiters: new Waiters(),
      };
      this.entries.set(r.id, e);
      this.nextOrd = Math.max(this.nextOrd, r.ord + 1);
      if (rec.state === "running") lost.push(r.id);
    }
    this.db.transaction(() => {
      for (const id of lost) {
        const e = this.entries.get(id)!;
        const exit: ExitEvent = {
          id,
          seq: e.rec.lastSeq + 1,
          name: "exit",
          value: -1,
          reason: "lost",
        };
        this.insert(id, exit);
        e.rec.lastSeq = exit.seq;
        if (e.rec.earliestSeq > exit.seq) e.rec.earliestSeq = exit.seq;
        e.bytes += eventSize(exit);
        Object.assign(e.rec, finishPatch(exit, now));
        this.writeExec(id, e);
      }
    })();
    for (const [id, e] of this.entries) {
      e.pub = { ...e.rec };
      if (e.rec.state === "running") continue;
      const age = now - (e.rec.endedAt ?? now);
      if (age >= this.retentionMs) this.drop(id, e);
      else this.scheduleSweep(id, e, this.retentionMs - age);
    }
  }

  async create(record: NewExecRecord): Promise<void> {
    this.open();
    const old = this.entries.get(record.id);
    if (old) {
      if (old.rec.state === "running") throw busy(record.id);
      this.drop(record.id, old);
    }
    const e: Entry = {
      rec: { ...structuredClone(record), state: "running", lastSeq: 0, earliestSeq: 1 },
      pub: undefined,
      ord: this.nextOrd++,
      bytes: 0,
      sizes: [],
      sizeHead: 0,
      ...noHot(),
      waiters: new Waiters(),
    };
    this.entries.set(record.id, e);
    this.dirty.add(record.id);
    return this.commitSoon();
  }

  async append(id: string, events: LoggedEvent[]): Promise<void> {
    this.open();
    const e = this.entries.get(id);
    if (!e) throw notFound(id);
    const rec = e.rec;
    const first = checkBatch(id, rec.lastSeq, rec.state !== "running", events);
    if (first > 0) {
      this.flushNow();
      for (let i = 0; i < first; i++) {
        const old = events[i]!;
        if (old.seq < rec.earliestSeq) continue;
        const row = this.st.readOne.get(id, old.seq) as Row | undefined;
        if (row && !sameEvent(toEvent(id, row), old)) {
          throw new ComputerError(
            "EINVAL",
            `append to ${id}: seq ${old.seq} already holds different content`,
          );
        }
      }
    }
    if (first === events.length) return;
    if (!e.sizes) e.sizes = [];
    if (e.hotHead >= e.hot.length) e.hotFirst = events[first]!.seq;
    for (let i = first; i < events.length; i++) {
      const ev = { ...events[i]!, id } as LoggedEvent;
      this.queue.push(() => this.insert(id, ev));
      const size = eventSize(ev);
      this.queuedBytes += size;
      e.sizes.push(size);
      e.bytes += size;
      e.hot.push(ev);
      e.hotSizes.push(size);
      e.hotBytes += size;
      rec.lastSeq = ev.seq;
      if (ev.name === "exit") {
        Object.assign(rec, finishPatch(ev));
        this.scheduleSweep(id, e, this.retentionMs);
        // Once committed, a finished execution is read from the file: its hot
        // tail would otherwise hold up to HOT_MAX_BYTES per finished execution.
        this.cooling.add(e);
      }
    }
    this.evict(id, e);
    this.trimHot(e);
    this.dirty.add(id);
    // Readers are woken at the commit that publishes these events.
    return this.commitSoon(this.queuedBytes < COMMIT_BYTES);
  }

  async read(id: string, after: number, options?: ReadOptions): Promise<LoggedEvent[]> {
    this.open();
    const e = this.entries.get(id);
    const pub = e?.pub;
    if (!e || !pub) throw notFound(id);
    if (after + 1 < e.rec.earliestSeq) throw truncated(id, after, e.rec.earliestSeq);
    // Nothing past the last committed seq is shown.
    if (after >= pub.lastSeq) return [];
    const limit = Math.min(Math.max(1, options?.limit ?? DEFAULT_READ_LIMIT), pub.lastSeq - after);
    if (after + 1 >= e.hotFirst && e.hotHead < e.hot.length) {
      const start = e.hotHead + (after + 1 - e.hotFirst);
      return e.hot.slice(start, Math.min(start + limit, e.hot.length));
    }
    this.flushNow();
    const rows = this.st.read.all(id, after, limit) as Row[];
    return rows.map((r) => toEvent(id, r));
  }

  waitFor(id: string, after: number, signal?: AbortSignal): Promise<void> {
    if (this.closed) return Promise.reject(closedError());
    const e = this.entries.get(id);
    const pub = e?.pub;
    if (!e || (pub && (pub.lastSeq > after || pub.state !== "running"))) return Promise.resolve();
    return e.waiters.wait(signal);
  }

  async get(id: string): Promise<ExecRecord | undefined> {
    this.open();
    const pub = this.entries.get(id)?.pub;
    return pub ? structuredClone(pub) : undefined;
  }

  async list(): Promise<ExecRecord[]> {
    this.open();
    return [...this.entries.values()]
      .filter((e) => e.pub !== undefined)
      .sort((a, b) => a.ord - b.ord)
      .map((e) => structuredClone(e.pub!));
  }

  async update(id: string, patch: Partial<Omit<ExecRecord, "id">>): Promise<void> {
    this.open();
    const e = this.entries.get(id);
    if (!e) throw notFound(id);
    const wasRunning = e.rec.state === "running";
    Object.assign(e.rec, structuredClone(patch), { id });
    if (wasRunning && e.rec.state !== "running") {
      e.rec.endedAt ??= Date.now();
      this.scheduleSweep(id, e, this.retentionMs);
      this.woken.add(e);
    }
    this.dirty.add(id);
    return this.commitSoon();
  }

  async dispose(id: string): Promise<void> {
    this.open();
    const e = this.entries.get(id);
    if (e) this.drop(id, e);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.flushNow();
    this.closed = true;
    for (const e of this.entries.values()) {
      if (e.sweep) clearTimeout(e.sweep);
      e.waiters.wakeAll();
    }
    this.entries.clear();
    this.db.close();
  }

  // ---- internals ----------------------------------------------------------

  private open(): void {
    if (this.closed) throw closedError();
  }

  /** Commit on the next turn, or after COMMIT_DELAY_MS when `lazy` (batching output). */
  private commitSoon(lazy = false): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.settle.push({ resolve, reject });
      if (this.scheduled) return;
      if (lazy) {
        this.timer ??= setTimeout(() => {
          this.timer = null;
          this.flushNow();
        }, COMMIT_DELAY_MS);
        return;
      }
      if (this.timer) {
        clearTimeout(this.timer);
        this.timer = null;
      }
      this.scheduled = setImmediate(() => {
        this.scheduled = null;
        this.flushNow();
      });
    });
  }

  /** Write everything queued in one transaction, then settle appends and wake waiters. */
  private flushNow(): void {
    if (this.scheduled) {
      clearImmediate(this.scheduled);
      this.scheduled = null;
    }
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.queuedBytes = 0;
    if (this.queue.length === 0 && this.dirty.size === 0 && this.settle.length === 0) return;
    const queue = this.queue;
    const dirty = this.dirty;
    const settle = this.settle;
    const woken = this.woken;
    const cooling = this.cooling;
    this.cooling = new Set();
    this.queue = [];
    this.dirty = new Set();
    this.settle = [];
    this.woken = new Set();
    try {
      this.db.transaction(() => {
        for (const op of queue) op();
        for (const id of dirty) {
          const e = this.entries.get(id);
          if (e) this.writeExec(id, e);
        }
      })();
    } catch (err) {
      const failure = new ComputerError("EINTERNAL", `sqlite log write failed: ${String(err)}`, {
        cause: err,
      });
      for (const s of settle) s.reject(failure);
      return;
    }
    // Publish what this transaction made durable, then wake its readers.
    for (const id of dirty) {
      const e = this.entries.get(id);
      if (!e) continue;
      e.pub = { ...e.rec };
      e.waiters.wakeAll();
    }
    for (const s of settle) s.resolve();
    for (const e of woken) e.waiters.wakeAll();
    for (const e of cooling) Object.assign(e, noHot());
  }

  private insert(id: string, ev: LoggedEvent): void {
    if (ev.name === "exit") {
      this.st.insertEvent.run(
        id,
        ev.seq,
        "exit",
        null,
        0,
        ev.value,
        ev.signal ?? null,
        ev.reason ?? null,
      );
    } else {
      const v = ev.value;
      const isText = typeof v === "string";
      const data = isText ? Buffer.from(v) : Buffer.from(v.buffer, v.byteOffset, v.byteLength);
      this.st.insertEvent.run(id, ev.seq, ev.name, data, isText ? 1 : 0, null, null, null);
    }
  }

  private writeExec(id: string, e: Entry): void {
    this.st.upsertExec.run(id, e.ord, e.bytes, JSON.stringify(e.rec));
  }

  /**
   * Past the cap, drop the oldest events down to 3/4 of it (one DELETE per
   * trim instead of one per event); the last event always stays.
   */
  private evict(id: string, e: Entry): void {
    if (e.bytes <= this.capacityBytes || !e.sizes) return;
    const target = Math.floor((this.capacityBytes * 3) / 4);
    const rec = e.rec;
    const end = e.sizes.length - 1;
    while (e.bytes > target && e.sizeHead < end) {
      e.bytes -= e.sizes[e.sizeHead]!;
      e.sizeHead++;
      rec.earliestSeq++;
    }
    if (e.sizeHead > 1024 && e.sizeHead * 2 > e.sizes.length) {
      e.sizes = e.sizes.slice(e.sizeHead);
      e.sizeHead = 0;
    }
    const cut = rec.earliestSeq;
    this.queue.push(() => this.st.deleteBefore.run(id, cut));
  }

  /** Keep the hot tail within HOT_MAX_BYTES (and within what the ring retains). */
  private trimHot(e: Entry): void {
    const floor = e.rec.earliestSeq;
    while (e.hotHead < e.hot.length - 1 && (e.hotBytes > HOT_MAX_BYTES || e.hotFirst < floor)) {
      e.hotBytes -= e.hotSizes[e.hotHead]!;
      e.hot[e.hotHead] = undefined as unknown as LoggedEvent;
      e.hotHead++;
      e.hotFirst++;
    }
    if (e.hotHead > 1024 && e.hotHead * 2 > e.hot.length) {
      e.hot = e.hot.slice(e.hotHead);
      e.hotSizes = e.hotSizes.slice(e.hotHead);
      e.hotHead = 0;
    }
  }

  private drop(id: string, e: Entry): void {
    if (e.sweep) clearTimeout(e.sweep);
    this.flushNow();
    this.entries.delete(id);
    this.db.transaction(() => {
      this.st.deleteEvents.run(id);
      this.st.deleteExec.run(id);
    })();
    e.waiters.wakeAll();
  }

  private scheduleSweep(id: string, e: Entry, ms: number): void {
    if (e.sweep) clearTimeout(e.sweep);
    e.sweep = setTimeout(() => {
      if (!this.closed && this.entries.get(id) === e) this.drop(id, e);
    }, ms);
    e.sweep.unref?.();
  }
}

function noHot() {
  return {
    hot: [] as LoggedEvent[],
    hotSizes: [] as number[],
    hotHead: 0,
    hotFirst: 1,
    hotBytes: 0,
  };
}

function toEvent(id: string, r: Row): LoggedEvent {
  if (r.name === "exit") {
    const ev: ExitEvent = { id, seq: r.seq, name: "exit", value: r.code ?? 0 };
    if (r.signal !== null) ev.signal = r.signal;
    if (r.reason !== null) ev.reason = r.reason as ExitEvent["reason"];
    return ev;
  }
  const d = r.data ?? Buffer.alloc(0);
  return {
    id,
    seq: r.seq,
    name: r.name as "stdout" | "stderr",
    value: r.text ? d.toString("utf8") : new Uint8Array(d.buffer, d.byteOffset, d.byteLength),
  };
}
