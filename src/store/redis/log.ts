// EventLog on Redis Streams, shared by every node of a cluster. Key names are
// in keys.ts, the record/event layout in codec.ts, the atomic mutations in
// scripts.ts, wake-ups in notifier.ts; this file is the EventLog itself: when
// to call which script, how appends are queued and how a waiter waits.
//
// Writes: appends for one execution go through a per-execution queue that
// coalesces whatever the caller queued while a script call was in flight into
// the next call; calls of many executions are pipelined on one connection
// (ioredis writes each command at once and matches replies in order), not
// with ioredis' auto-pipelining (connection.ts says why). `append` resolves
// only once Redis has the events, so while Redis is slow or unreachable the
// promise stays pending (ioredis keeps the command queued and reconnects): a
// runtime that bounds what it has in flight then pauses the child. This log
// buffers nothing beyond what the caller handed in (docs/operations.md).
//
// Waiting: a waiter checks the record once, then sleeps until the notifier
// wakes it. A read that found nothing new remembers the notification version
// it saw, so a follower's waitFor right after it can sleep without asking
// Redis again.

import type { Redis } from "ioredis";
import { ComputerError } from "../../wire/errors.js";
import type { LoggedEvent } from "../../wire/types.js";
import {
  abortedError,
  closedError,
  DEFAULT_LOG_MAX_BYTES,
  DEFAULT_RETENTION_MS,
  type EventLogOptions,
  eventSize,
} from "../common.js";
import type { EventLog, ExecRecord, NewExecRecord, ReadOptions } from "../types.js";
import {
  decodeEntry,
  eventArgs,
  parseRecord,
  patchFields,
  type RawEntry,
  recordFields,
} from "./codec.js";
import {
  createRedisClient,
  DEFAULT_REDIS_URL,
  type RedisSpec,
  toComputerError,
  unavailable,
} from "./connection.js";
import { DEFAULT_PREFIX, RedisKeys } from "./keys.js";
import { Notifier, type Watch } from "./notifier.js";
import { LogScripts } from "./scripts.js";

export interface RedisEventLogOptions extends EventLogOptions {
  /** `redis://[user:pass@]host:port[/db]` (also `rediss://`), or ioredis options. */
  redis?: RedisSpec;
  /** Key prefix, so several deployments can share one Redis. Default `ac:`. */
  prefix?: string;
  /** Default and maximum events per `read` (default 512). */
  readLimit?: number;
  /** Cap on payload bytes returned by one `read` (default 1 MiB; at least one event). */
  readMaxBytes?: number;
  /** Safety re-check interval for parked waiters (default 5 s). */
  waitPollMs?: number;
}

const DEFAULT_READ_LIMIT = 512;
const DEFAULT_READ_MAX_BYTES = 1024 * 1024;
const DEFAULT_WAIT_POLL_MS = 5000;
/** Events per script call: bounds script run time (Redis is single-threaded). */
const MAX_BATCH_EVENTS = 1024;
const MAX_BATCH_BYTES = 4 * 1024 * 1024;

/** Exit value written for executions closed as lost: there is no real exit code. */
const LOST_EXIT_VALUE = -1;

interface PendingAppend {
  events: LoggedEvent[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

interface AppendQueue {
  items: PendingAppend[];
  running: boolean;
}

export class RedisEventLog implements EventLog {
  /** The command connection (shared with the cluster module of the same node). */
  readonly redis: Redis;
  /** Key names under this log's prefix (the cluster derives its keys from the same object). */
  readonly keys: RedisKeys;
  private readonly maxBytes: number;
  /** The stream's byte cap per execution (`logMaxBytes`). */
  get capacityBytes(): number {
    return this.maxBytes;
  }
  private readonly retentionMs: number;
  private readonly readLimit: number;
  private readonly readMaxBytes: number;
  private readonly waitPollMs: number;
  private readonly scripts: LogScripts;
  private readonly notifier: Notifier;
  private readonly queues = new Map<string, AppendQueue>();
  private readonly pumps = new Set<Promise<void>>();
  /** Per id: the last read that found nothing new (lets waitFor skip a round trip). */
  private readonly quiet = new Map<
    string,
    { after: number; watch: Watch | undefined; version: number; finished: boolean }
  >();
  private readonly spec: RedisSpec;
  private closed = false;

  constructor(options: RedisEventLogOptions = {}) {
    this.spec = options.redis ?? DEFAULT_REDIS_URL;
    this.keys = new RedisKeys(options.prefix ?? DEFAULT_PREFIX);
    this.maxBytes = options.logMaxBytes ?? DEFAULT_LOG_MAX_BYTES;
    this.retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    this.readLimit = options.readLimit ?? DEFAULT_READ_LIMIT;
    this.readMaxBytes = options.readMaxBytes ?? DEFAULT_READ_MAX_BYTES;
    this.waitPollMs = options.waitPollMs ?? DEFAULT_WAIT_POLL_MS;
    this.redis = createRedisClient(this.spec, "ac-log");
    this.scripts = new LogScripts(this.redis, this.keys);
    this.notifier = new Notifier(() => this.duplicate("ac-log-sub"), this.keys);
  }

  unavailable(waitMs?: number): Promise<string | undefined> {
    return this.closed
      ? Promise.resolve("the event log is closed")
      : unavailable(this.redis, waitMs);
  }

  /** A new connection to the same Redis with the same options (for blocking reads, pub/sub). */
  duplicate(name: string): Redis {
    return createRedisClient(this.spec, name);
  }

  async create(record: NewExecRecord): Promise<void> {
    this.open();
    const token = `${process.pid}-${Math.random().toString(36).slice(2)}-${Date.now()}`;
    try {
      await this.scripts.create(record.id, token, record.node, recordFields(record));
    } catch (err) {
      throw toComputerError(err, record.id);
    }
  }

  append(id: string, events: LoggedEvent[]): Promise<void> {
    if (this.closed) return Promise.reject(closedError());
    if (events.length === 0) return Promise.resolve();
    for (let i = 0; i < events.length; i++) {
      const ev = events[i]!;
      if (ev.id !== undefined && ev.id !== id) {
        return Promise.reject(
          new ComputerError("EINVAL", `append to ${id}: event carries id ${ev.id}`),
        );
      }
      if (!Number.isSafeInteger(ev.seq) || (i > 0 && ev.seq !== events[i - 1]!.seq + 1)) {
        return Promise.reject(
          new ComputerError("EINVAL", `append to ${id}: seqs are not consecutive`),
        );
      }
    }
    return new Promise<void>((resolve, reject) => {
      let q = this.queues.get(id);
      if (!q) {
        q = { items: [], running: false };
        this.queues.set(id, q);
      }
      q.items.push({ events, resolve, reject });
      if (!q.running) {
        const p = this.pump(id, q);
        this.pumps.add(p);
        void p.finally(() => this.pumps.delete(p));
      }
    });
  }

  /** Drain one execution's queue in order, coalescing queued appends into one script call. */
  private async pump(id: string, q: AppendQueue): Promise<void> {
    q.running = true;
    try {
      while (q.items.length > 0) {
        // Take consecutive appends up to the batch bounds (at least one).
        const batch: PendingAppend[] = [q.items.shift()!];
        let count = batch[0]!.events.length;
        let bytes = sizeOf(batch[0]!.events);
        while (q.items.length > 0) {
          const nx = q.items[0]!;
          const prevLast = batch[batch.length - 1]!.events.at(-1)!.seq;
          if (nx.events[0]!.seq !== prevLast + 1) break;
          const b = sizeOf(nx.events);
          if (count + nx.events.length > MAX_BATCH_EVENTS || bytes + b > MAX_BATCH_BYTES) break;
          batch.push(q.items.shift()!);
          count += nx.events.length;
          bytes += b;
        }
        const events = batch.length === 1 ? batch[0]!.events : batch.flatMap((p) => p.events);
        try {
          await this.sendAppend(id, events);
          for (const p of batch) p.resolve();
        } catch (err) {
          if (batch.length === 1) {
            batch[0]!.reject(err);
          } else {
            // Retry one by one so only the offending append fails.
            for (const p of batch) {
              try {
                await this.sendAppend(id, p.events);
                p.resolve();
              } catch (e) {
                p.reject(e);
              }
            }
          }
        }
      }
    } finally {
      q.running = false;
      if (this.queues.get(id) === q && q.items.length === 0) this.queues.delete(id);
    }
  }

  private async sendAppend(id: string, events: LoggedEvent[]): Promise<void> {
    let last: unknown;
    const args = eventArgs(events);
    const send = (overMemory: boolean) =>
      this.scripts.append(id, this.maxBytes, this.retentionArg(), Date.now(), args, overMemory);
    try {
      last = await send(false);
    } catch (err) {
      // A Redis over its maxmemory (noeviction) refuses every write. The few
      // bytes that finish an execution (its exit, after a notice) go in
      // anyway, so the record never stays `running` because memory is full.
      if (!(isOomReply(err) && finishesSmall(events))) throw toComputerError(err, id);
      try {
        last = await send(true);
      } catch {
        throw toComputerError(err, id);
      }
    }
    const tail = events[events.length - 1]!;
    this.notifier.local(id, tail.name === "exit" ? "x" : String(last));
  }

  async read(id: string, after: number, options?: ReadOptions): Promise<LoggedEvent[]> {
    this.open();
    if (!Number.isSafeInteger(after) || after < 0) {
      throw new ComputerError("EINVAL", `read ${id}: after must be a non-negative integer`);
    }
    const limit = Math.max(1, Math.min(options?.limit ?? this.readLimit, 100_000));
    // Snapshot the notification version before the read: if the read finds
    // nothing new and no notification arrives afterwards, a waitFor right
    // after it can sleep without asking Redis again.
    const w = this.notifier.peek(id);
    const version = w?.version ?? -1;
    let raw: RawEntry[] | [Buffer];
    try {
      raw = await this.scripts.read(id, after, limit, this.readMaxBytes);
    } catch (err) {
      throw toComputerError(err, id);
    }
    if (raw.length === 0 || (raw.length === 1 && Buffer.isBuffer(raw[0]))) {
      const finished = raw.length === 1;
      if (w || finished) {
        if (this.quiet.size > 10_000) this.quiet.clear();
        this.quiet.set(id, { after, watch: w, version, finished });
      }
      return [];
    }
    const entries = raw as RawEntry[];
    const out: LoggedEvent[] = new Array(entries.length);
    for (let i = 0; i < entries.length; i++) out[i] = decodeEntry(id, entries[i]!);
    return out;
  }

  async waitFor(id: string, after: number, signal?: AbortSignal): Promise<void> {
    this.open();
    if (signal?.aborted) throw abortedError(signal);
    // What the last empty read of this id found (see read()).
    const q = this.quiet.get(id);
    if (q) this.quiet.delete(id);
    if (q?.finished && q.after === after) return;
    const w = await this.notifier.acquire(id);
    try {
      let trusted = q !== undefined && q.after === after && q.watch === w;
      for (;;) {
        if (this.closed) return;
        const v = w.version;
        if (w.maxSeq > after) return;
        if (trusted && v === q!.version) {
          // Nothing was published since before that read saw nothing new.
          trusted = false;
          const recheck = await this.notifier.next(w, signal, this.waitPollMs);
          if (!recheck && w.maxSeq > after) return;
          continue;
        }
        trusted = false;
        let st: (string | null)[];
        try {
          st = await this.redis.hmget(this.keys.meta(id), "state", "last");
        } catch (err) {
          throw toComputerError(err, id);
        }
        if (st[0] === null || st[0] !== "running" || Number(st[1]) > after) return;
        if (signal?.aborted) throw abortedError(signal);
        if (w.version !== v) continue; // something happened during the check
        const recheck = await this.notifier.next(w, signal, this.waitPollMs);
        if (!recheck && w.maxSeq > after) return;
      }
    } finally {
      this.notifier.release(w);
    }
  }

  async get(id: string): Promise<ExecRecord | undefined> {
    this.open();
    try {
      return parseRecord(await this.redis.hgetall(this.keys.meta(id)));
    } catch (err) {
      throw toComputerError(err, id);
    }
  }

  async list(): Promise<ExecRecord[]> {
    this.open();
    try {
      const ids = await this.redis.zrange(this.keys.index, "0", "-1");
      if (ids.length === 0) return [];
      const pipe = this.redis.pipeline();
      for (const id of ids) pipe.hgetall(this.keys.meta(id));
      const res = (await pipe.exec()) ?? [];
      const out: ExecRecord[] = [];
      const gone: string[] = [];
      res.forEach(([err, h], i) => {
        const rec = err ? undefined : parseRecord(h as Record<string, string>);
        if (rec) out.push(rec);
        else if (!err) gone.push(ids[i]!);
      });
      // Expired by retention: drop from the index lazily (ZREM of a re-created
      // id is prevented by checking existence in the same step).
      if (gone.length > 0) void this.pruneIndex(gone);
      return out;
    } catch (err) {
      throw toComputerError(err);
    }
  }

  private async pruneIndex(ids: string[]): Promise<void> {
    try {
      await this.scripts.pruneIndex(ids);
    } catch {
      /* best effort */
    }
  }

  async update(id: string, patch: Partial<Omit<ExecRecord, "id">>): Promise<void> {
    this.open();
    const { set, del } = patchFields(patch);
    try {
      await this.scripts.update(id, this.retentionArg(), Date.now(), set, del);
    } catch (err) {
      throw toComputerError(err, id);
    }
    if (patch.state && patch.state !== "running") this.notifier.local(id, "x");
  }

  async dispose(id: string): Promise<void> {
    this.open();
    try {
      await this.scripts.dispose(id);
    } catch (err) {
      throw toComputerError(err, id);
    }
    this.notifier.local(id, "d");
  }

  /**
   * Close a running execution owned by `node` with an `exit` whose reason is
   * `lost`. Returns the exit's seq, or 0 when it was not running on that node
   * (already finished, disposed, or re-owned): safe to race from many nodes.
   */
  async closeLost(id: string, node: string): Promise<number> {
    this.open();
    try {
      const seq = Number(
        await this.scripts.lost(id, node, this.retentionArg(), Date.now(), LOST_EXIT_VALUE),
      );
      if (seq > 0) this.notifier.local(id, "x");
      return seq;
    } catch (err) {
      throw toComputerError(err, id);
    }
  }

  /** Ids of executions recorded as running on `node`. */
  async runningOn(node: string): Promise<string[]> {
    this.open();
    return await this.redis.smembers(this.keys.running(node));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Let queued appends finish (bounded: Redis may be down), then disconnect.
    if (this.pumps.size > 0) {
      await Promise.race([
        Promise.allSettled([...this.pumps]),
        new Promise((r) => setTimeout(r, 2000)),
      ]);
    }
    this.notifier.close();
    // disconnect() rejects whatever is still queued ("Connection is closed").
    this.redis.disconnect();
  }

  private open(): void {
    if (this.closed) throw closedError();
  }

  /** Retention as the scripts take it: whole ms, or -1 for "keep forever". */
  private retentionArg(): number {
    return Number.isFinite(this.retentionMs) ? Math.max(0, Math.round(this.retentionMs)) : -1;
  }
}

function sizeOf(events: LoggedEvent[]): number {
  let n = 0;
  for (const ev of events) {
    if (ev.name !== "exit") {
      n += typeof ev.value === "string" ? ev.value.length * 3 : ev.value.byteLength;
    }
  }
  return n;
}

/** Most bytes of a batch that may be written past maxmemory to finish an execution. */
const FINISH_OVER_MEMORY_BYTES = 4096;

function isOomReply(err: unknown): boolean {
  return /^OOM\b/.test((err as Error)?.message ?? "");
}

/** A batch that ends the execution and is small: what may be written past maxmemory. */
function finishesSmall(events: LoggedEvent[]): boolean {
  if (events[events.length - 1]?.name !== "exit") return false;
  let bytes = 0;
  for (const e of events) bytes += eventSize(e);
  return bytes <= FINISH_OVER_MEMORY_BYTES;
}
