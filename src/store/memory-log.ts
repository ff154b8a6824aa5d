// In-process EventLog: one ring of events per execution, bounded by
// `logMaxBytes`, swept `retentionMs` after exit. Events the ring evicts spill
// to segment files on local disk (spill.ts) within a per-execution and a total
// disk budget, so a cut-off client can resume past the ring; only events past
// the disk budget are dropped (ELOG_TRUNCATED). `capacityBytes` stays the
// ring: it is what is retained whatever the disk budget, so the runtime's
// backpressure keeps live subscribers within memory and never depends on disk.
// It is the default log and the one the runtime's hot path is tuned against,
// so every operation is O(1) or O(events returned): seqs are contiguous, so
// the event with seq s sits at index head + (s - ringSeq) of the array.
// It keeps no reference to anything the caller owns: records are copied in
// and out, so it behaves like a remote log (the contract suite relies on it).
//
// Output bytes are not kept as the caller's chunks: append copies them into
// the execution's OutputRing (output-ring.ts: a few pooled segments, reused
// once evicted), so a pipe chunk dies young instead of being promoted and
// freed only by full GCs. A stored byte event keeps its (offset, length) in
// the ring; read() copies the batch's bytes out into ONE fresh buffer and
// hands out views of it, so what a reader holds is its own and is never
// overwritten when the ring reuses a segment (holding one chunk keeps its
// batch's buffer alive). Text values (utf8 executions) are kept as strings.

import { ComputerError } from "../wire/errors.js";
import type { LoggedEvent } from "../wire/types.js";
import {
  busy,
  checkBatch,
  closedError,
  DEFAULT_LOG_MAX_BYTES,
  DEFAULT_RETENTION_MS,
  EVENT_OVERHEAD_BYTES,
  type EventLogOptions,
  eventSize,
  finishPatch,
  notFound,
  sameEvent,
  truncated,
  Waiters,
} from "./common.js";
import { OutputRing, SegmentPool } from "./output-ring.js";
import { type ExecSpill, SPILL_BACKLOG_BYTES, SpillStore } from "./spill.js";
import type { EventLog, ExecRecord, NewExecRecord, ReadOptions } from "./types.js";

const DEFAULT_READ_LIMIT = 256;
/** The value a stored byte event carries; its bytes are in the ring. */
const EMPTY = new Uint8Array(0);

interface Entry {
  record: ExecRecord;
  /** events[head..] are retained; earlier slots are dead and compacted lazily. */
  events: LoggedEvent[];
  sizes: number[];
  /** Ring offset of each byte event's value (events[i].value is then EMPTY); -1 for text and exit. */
  offsets: number[];
  ring: OutputRing;
  head: number;
  /** Seq of events[head] (the oldest event in memory). */
  ringSeq: number;
  /** Evicted events on disk (undefined when spilling is off). */
  spill: ExecSpill | undefined;
  bytes: number;
  waiters: Waiters;
  sweep?: ReturnType<typeof setTimeout>;
}

export class MemoryEventLog implements EventLog {
  private readonly entries = new Map<string, Entry>();
  /** The ring's cap per execution (`logMaxBytes`). */
  readonly capacityBytes: number;
  private readonly retentionMs: number;
  private readonly spillStore: SpillStore;
  private readonly pool = new SegmentPool();
  private closed = false;

  constructor(options: EventLogOptions = {}) {
    this.capacityBytes = options.logMaxBytes ?? DEFAULT_LOG_MAX_BYTES;
    this.retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    this.spillStore = new SpillStore(options);
  }

  /** Disk bytes spilled now, all executions together (for tests and metrics). */
  get spilledBytes(): number {
    return this.spillStore.usedBytes;
  }

  async create(record: NewExecRecord): Promise<void> {
    this.open();
    const old = this.entries.get(record.id);
    if (old) {
      if (old.record.state === "running") throw busy(record.id);
      this.drop(record.id, old);
    }
    this.entries.set(record.id, {
      record: { ...copy(record), state: "running", lastSeq: 0, earliestSeq: 1 },
      events: [],
      sizes: [],
      offsets: [],
      ring: new OutputRing(this.pool),
      head: 0,
      ringSeq: 1,
      spill: this.spillStore.enabled ? this.spillStore.open(record.id) : undefined,
      bytes: 0,
      waiters: new Waiters(),
    });
  }

  async append(id: string, events: LoggedEvent[]): Promise<void> {
    this.open();
    const e = this.entries.get(id);
    if (!e) throw notFound(id);
    const rec = e.record;
    const first = checkBatch(id, rec.lastSeq, rec.state !== "running", events);
    for (let i = 0; i < first; i++) {
      const old = events[i]!;
      if (old.seq < e.ringSeq) continue; // evicted: not compared
      const stored = materialize(e, e.head + (old.seq - e.ringSeq));
      if (!sameEvent(stored, old)) {
        throw new ComputerError(
          "EINVAL",
          `append to ${id}: seq ${old.seq} already holds different content`,
        );
      }
    }
    if (first === events.length) return;
    for (let i = first; i < events.length; i++) {
      const ev = events[i]!;
      // Store a copy carrying the execution id, so later changes by the caller
      // to its objects cannot alter the log; bytes go into the ring.
      const size = eventSize(ev);
      if (ev.name !== "exit" && typeof ev.value !== "string") {
        e.offsets.push(e.ring.put(ev.value));
        e.events.push({ ...ev, id, value: EMPTY });
      } else {
        e.offsets.push(-1);
        e.events.push({ ...ev, id } as LoggedEvent);
      }
      e.sizes.push(size);
      e.bytes += size;
      rec.lastSeq = ev.seq;
      if (ev.name === "exit") {
        e.ring.trim();
        Object.assign(rec, finishPatch(ev));
        this.scheduleSweep(id, e);
      }
    }
    this.evict(e);
    e.waiters.wakeAll();
    // A disk slower than the command: accept more only once the spill caught
    // up (the runtime pauses the pipes meanwhile), so memory stays bounded.
    if (e.spill && e.spill.backlog > SPILL_BACKLOG_BYTES) {
      await e.spill.settled(SPILL_BACKLOG_BYTES / 2);
    }
  }

  async read(id: string, after: number, options?: ReadOptions): Promise<LoggedEvent[]> {
    this.open();
    const limit = Math.max(1, options?.limit ?? DEFAULT_READ_LIMIT);
    for (;;) {
      const e = this.entries.get(id);
      if (!e) throw notFound(id);
      const rec = e.record;
      const earliest = earliestOf(e);
      if (after + 1 < earliest) throw truncated(id, after, earliest);
      if (after >= rec.lastSeq) return [];
      if (after + 1 >= e.ringSeq) {
        const start = e.head + (after + 1 - e.ringSeq);
        return copyOut(e, start, Math.min(start + limit, e.events.length));
      }
      // On disk. Empty means the segment was dropped meanwhile: look again.
      const got = await e.spill!.read(after, limit);
      if (got.length > 0) return got;
      this.open();
    }
  }

  waitFor(id: string, after: number, signal?: AbortSignal): Promise<void> {
    if (this.closed) return Promise.reject(closedError());
    const e = this.entries.get(id);
    if (!e || e.record.lastSeq > after || e.record.state !== "running") {
      return Promise.resolve();
    }
    return e.waiters.wait(signal);
  }

  async get(id: string): Promise<ExecRecord | undefined> {
    this.open();
    const e = this.entries.get(id);
    return e ? recordOf(e) : undefined;
  }

  async list(): Promise<ExecRecord[]> {
    this.open();
    return [...this.entries.values()].map(recordOf);
  }

  async update(id: string, patch: Partial<Omit<ExecRecord, "id">>): Promise<void> {
    this.open();
    const e = this.entries.get(id);
    if (!e) throw notFound(id);
    const wasRunning = e.record.state === "running";
    Object.assign(e.record, copy(patch), { id });
    if (wasRunning && e.record.state !== "running") {
      e.record.endedAt ??= Date.now();
      this.scheduleSweep(id, e);
      e.waiters.wakeAll();
    }
  }

  async dispose(id: string): Promise<void> {
    this.open();
    const e = this.entries.get(id);
    if (e) this.drop(id, e);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const [id, e] of this.entries) this.drop(id, e);
    this.spillStore.close();
  }

  /** Full-size output segments this log ever allocated (reuse keeps it near the rings' size). */
  get segmentsAllocated(): number {
    return this.pool.allocated;
  }

  /** Bytes of one execution queued for disk and not written yet (for tests and metrics). */
  spillBacklogBytes(id: string): number {
    return this.entries.get(id)?.spill?.backlog ?? 0;
  }

  /** Retained bytes of one execution (for tests and metrics). */
  retainedBytes(id: string): number {
    return this.entries.get(id)?.bytes ?? 0;
  }

  private open(): void {
    if (this.closed) throw closedError();
  }

  private drop(id: string, e: Entry): void {
    if (e.sweep) clearTimeout(e.sweep);
    e.spill?.dispose();
    e.ring.dispose();
    this.entries.delete(id);
    e.waiters.wakeAll();
  }

  private scheduleSweep(id: string, e: Entry): void {
    if (e.sweep) clearTimeout(e.sweep);
    e.sweep = setTimeout(() => {
      if (this.entries.get(id) === e) this.drop(id, e);
    }, this.retentionMs);
    e.sweep.unref?.();
  }

  /** Move oldest events out of the ring (to disk, or dropped) until it fits its cap; the last event always stays. */
  private evict(e: Entry): void {
    if (e.bytes <= this.capacityBytes) return;
    const end = e.events.length - 1;
    const from = e.head;
    /** End (ring offset) of the last evicted byte event: nothing before it is needed after this. */
    let releaseTo = -1;
    while (e.bytes > this.capacityBytes && e.head < end) {
      const at = e.offsets[e.head]!;
      if (at >= 0) releaseTo = at + (e.sizes[e.head]! - EVENT_OVERHEAD_BYTES);
      e.bytes -= e.sizes[e.head]!;
      e.head++;
      e.ringSeq++;
    }
    // A disk that refuses (full, gone) ends spilling for this execution: it
    // drops, as without a disk. The write is queued with views of the ring:
    // their segments go back to the pool only once it is done.
    const release = releaseTo >= 0 ? () => e.ring.release(releaseTo) : undefined;
    let queued = false;
    if (e.spill) {
      // Stored byte events (value EMPTY) go with their bytes as views of the ring.
      const evicted = e.events.slice(from, e.head);
      const parts: (Uint8Array[] | undefined)[] = new Array(evicted.length);
      for (let i = from; i < e.head; i++) {
        const at = e.offsets[i]!;
        if (at >= 0) parts[i - from] = e.ring.views(at, e.sizes[i]! - EVENT_OVERHEAD_BYTES);
      }
      queued = e.spill.write(evicted, release, parts);
      if (!queued) e.spill = undefined;
    }
    if (!queued) release?.();
    e.events.fill(undefined as unknown as LoggedEvent, from, e.head);
    // Compact once the dead prefix dominates: amortised O(1) per event.
    if (e.head > 1024 && e.head * 2 > e.events.length) {
      e.events = e.events.slice(e.head);
      e.sizes = e.sizes.slice(e.head);
      e.offsets = e.offsets.slice(e.head);
      e.head = 0;
    }
  }
}

/** Stored event i with a copy of its bytes. */
function materialize(e: Entry, i: number): LoggedEvent {
  const ev = e.events[i]!;
  const at = e.offsets[i]!;
  if (at < 0) return ev;
  const len = e.sizes[i]! - EVENT_OVERHEAD_BYTES;
  const value = new Uint8Array(len);
  e.ring.copyOut(at, len, value, 0);
  return { ...ev, value } as LoggedEvent;
}

/** Stored events [start, end) for a reader: byte values copied out into one fresh buffer for the batch. */
function copyOut(e: Entry, start: number, end: number): LoggedEvent[] {
  let total = 0;
  for (let i = start; i < end; i++) {
    if (e.offsets[i]! >= 0) total += e.sizes[i]! - EVENT_OVERHEAD_BYTES;
  }
  if (total === 0) return e.events.slice(start, end);
  // Every byte of it is written below: no need to zero it first.
  const buf = Buffer.allocUnsafeSlow(total);
  const out: LoggedEvent[] = new Array(end - start);
  let pos = 0;
  for (let i = start; i < end; i++) {
    const ev = e.events[i]!;
    const at = e.offsets[i]!;
    if (at < 0) {
      out[i - start] = ev;
      continue;
    }
    const len = e.sizes[i]! - EVENT_OVERHEAD_BYTES;
    e.ring.copyOut(at, len, buf, pos);
    out[i - start] = {
      ...ev,
      value: new Uint8Array(buf.buffer, buf.byteOffset + pos, len),
    } as LoggedEvent;
    pos += len;
  }
  return out;
}

/** The oldest retained seq: on disk if anything is, else in the ring. */
function earliestOf(e: Entry): number {
  return e.spill?.firstSeq ?? e.ringSeq;
}

function recordOf(e: Entry): ExecRecord {
  return { ...copy(e.record), earliestSeq: earliestOf(e) };
}

function copy<T extends object>(o: T): T {
  const c = { ...o };
  const cmd = (c as { command?: unknown }).command;
  if (Array.isArray(cmd)) (c as { command?: unknown }).command = [...cmd];
  return c;
}
