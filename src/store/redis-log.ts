// EventLog on Redis Streams, shared by every node of a cluster.
//
// Layout (prefix `ac:` by default; `{id}` is a hash tag, see docs/operations.md):
//   <p>{<id>}:m   hash    the ExecRecord plus `last`, `earliest`, `bytes`, `token`
//   <p>{<id>}:s   stream  one entry per event, entry id `<seq>-0`, so "replay
//                         after N" is one XRANGE from `N+1-0` and ids never
//                         need a lookup table
//   <p>execs      zset    index for cluster-wide listing, scored by a global
//                         creation counter (oldest first, stable across nodes)
//   <p>run:<node> set     running executions per owning node (the liveness
//                         sweeper closes these as `lost` when the node dies)
//   <p>n:<id>     channel notifications: last seq after an append, `x…` on
//                         finish, `d` on dispose, `c` on (re)create
//
// Every mutation is one Lua script, so it is atomic and retry-safe: `append`
// re-checks seq continuity inside Redis, skips seqs that are already stored
// (after comparing their content), trims to the byte cap, finishes the record
// on `exit` and publishes, all in one step. That makes a resend after a lost
// reply (ioredis re-sends unanswered commands on reconnect) harmless: no
// duplicates, no gaps. The scripts compute a few keys from the prefix (node
// running sets, channels), which is fine on one Redis primary (with replicas /
// Sentinel) but not on Redis Cluster; see docs/operations.md.
//
// Writes: appends for one execution go through a per-execution queue that
// coalesces whatever the caller queued while a script call was in flight into
// the next call; calls of many executions are pipelined on one connection
// (ioredis writes each command at once and matches replies in order). Not
// ioredis' "auto-pipelining": it keeps one batch in flight per connection, so
// with many concurrent followers every call waited for the previous batch's
// round trip (measured: p50 round trip 30 ms instead of 2.5 ms with 10
// cross-node followers). `append` resolves only once Redis has the events, so
// while Redis is slow or unreachable the promise stays pending (ioredis keeps
// the command queued and reconnects): a runtime that bounds what it has in
// flight then pauses the child. This log buffers nothing beyond what the
// caller handed in (see docs/operations.md for the runtime's side).
//
// Waiting: one subscriber connection per log instance, subscribed per
// execution only while someone waits on it (with a linger so a follower's
// repeated waits do not churn SUBSCRIBE), instead of one blocking XREAD
// connection per waiter. A waiter checks the record once, then sleeps until a
// notification; after the subscriber reconnects every waiter re-checks (pub/sub
// drops messages while disconnected), and a slow safety poll covers the rest.

import { Redis, type RedisOptions } from "ioredis";
import { ComputerError, toErrorCode } from "../wire/errors.js";
import type { LoggedEvent } from "../wire/types.js";
import {
  abortedError,
  closedError,
  DEFAULT_LOG_MAX_BYTES,
  DEFAULT_RETENTION_MS,
  EVENT_OVERHEAD_BYTES,
  type EventLogOptions,
  normalizeState,
} from "./common.js";
import type { EventLog, ExecRecord, NewExecRecord, ReadOptions } from "./types.js";

export interface RedisEventLogOptions extends EventLogOptions {
  /** `redis://[user:pass@]host:port[/db]` (also `rediss://`), or ioredis options. */
  redis?: string | RedisOptions;
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
/** Events per script call: bounds script run time (Redis is single-threaded). */
const MAX_BATCH_EVENTS = 1024;
const MAX_BATCH_BYTES = 4 * 1024 * 1024;
const LINGER_MS = 10_000;

// Lua snippet shared by `append` and `lost`: finish the record at seq `last`.
// Expects locals: meta, stream, prefix, id, node, retention, now.
const LUA_FINISH = `
local function finish(state, code, signal, last)
  local f = {'state', state, 'exitCode', code, 'endedAt', now, 'last', last}
  if signal ~= '' then f[#f + 1] = 'signal'; f[#f + 1] = signal end
  redis.call('HSET', meta, unpack(f))
  redis.call('SREM', prefix .. 'run:' .. node, id)
  if retention >= 0 then
    redis.call('PEXPIRE', meta, retention)
    redis.call('PEXPIRE', stream, retention)
  end
end
local function stateFor(reason)
  if reason == 'killed' or reason == 'timeout' or reason == 'lost' then return reason end
  return 'exited'
end
`;

// KEYS: meta, stream. ARGV: prefix, id, cap, retention, now, then 5 per event:
// seq, type (o/e bytes, O/E text, x exit), value, signal, reason.
const LUA_APPEND = `
local meta, stream = KEYS[1], KEYS[2]
local prefix, id = ARGV[1], ARGV[2]
local cap, retention, now = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local h = redis.call('HMGET', meta, 'state', 'last', 'earliest', 'bytes', 'node')
if not h[1] then return redis.error_reply('ENOENT no such execution: ' .. id) end
local last, earliest, bytes, node = tonumber(h[2]), tonumber(h[3]), tonumber(h[4]), h[5]
local finished = h[1] ~= 'running'
${LUA_FINISH}
local n = (#ARGV - 5) / 5
-- Pass 1 validates the whole batch: a script's writes are not rolled back on error.
local expect = last + 1
for i = 0, n - 1 do
  local b = 6 + i * 5
  local seq = tonumber(ARGV[b])
  if seq <= last then
    if seq >= earliest then
      local e = redis.call('XRANGE', stream, seq .. '-0', seq .. '-0')
      if #e == 1 then
        local f = e[1][2]
        local m = {}
        for j = 1, #f, 2 do m[f[j]] = f[j + 1] end
        if m.t ~= ARGV[b + 1] or m.v ~= ARGV[b + 2] or (m.s or '') ~= ARGV[b + 3] or (m.r or '') ~= ARGV[b + 4] then
          return redis.error_reply('EINVAL append to ' .. id .. ': seq ' .. seq .. ' already holds different content')
        end
      end
    end
  elseif seq == expect then
    if finished then return redis.error_reply('EINVAL append to ' .. id .. ': events after exit') end
    if ARGV[b + 1] == 'x' then finished = true end
    expect = expect + 1
  else
    return redis.error_reply('EINVAL append to ' .. id .. ': expected seq ' .. expect .. ', got ' .. seq)
  end
end
if expect == last + 1 then return last end
-- Pass 2 writes.
local exitb = nil
for i = 0, n - 1 do
  local b = 6 + i * 5
  local seq = tonumber(ARGV[b])
  if seq > last then
    if ARGV[b + 1] == 'x' then
      redis.call('XADD', stream, seq .. '-0', 't', 'x', 'v', ARGV[b + 2], 's', ARGV[b + 3], 'r', ARGV[b + 4])
      bytes = bytes + ${EVENT_OVERHEAD_BYTES}
      exitb = b
    else
      redis.call('XADD', stream, seq .. '-0', 't', ARGV[b + 1], 'v', ARGV[b + 2])
      bytes = bytes + ${EVENT_OVERHEAD_BYTES} + #ARGV[b + 2]
    end
    last = seq
  end
end
-- Ring: drop the oldest events past the cap; the last event always stays.
if bytes > cap and earliest < last then
  while bytes > cap and earliest < last do
    local e = redis.call('XRANGE', stream, earliest .. '-0', '+', 'COUNT', 128)
    if #e == 0 then break end
    for _, entry in ipairs(e) do
      if bytes <= cap or earliest >= last then break end
      local f = entry[2]
      local size = ${EVENT_OVERHEAD_BYTES}
      if f[2] ~= 'x' then size = size + #f[4] end
      bytes = bytes - size
      earliest = tonumber(string.match(entry[1], '^(%d+)')) + 1
    end
  end
  redis.call('XTRIM', stream, 'MINID', earliest .. '-0')
end
redis.call('HSET', meta, 'last', last, 'earliest', earliest, 'bytes', bytes)
if exitb then
  finish(stateFor(ARGV[exitb + 4]), ARGV[exitb + 2], ARGV[exitb + 3], last)
  redis.call('PUBLISH', prefix .. 'n:' .. id, 'x' .. last)
else
  redis.call('PUBLISH', prefix .. 'n:' .. id, last)
end
return last
`;

// KEYS: meta, stream. ARGV: after, limit, maxBytes. Returns entries, or {'F'}
// when there is nothing after `after` and the execution is finished.
const LUA_READ = `
local h = redis.call('HMGET', KEYS[1], 'earliest', 'last', 'state')
if not h[1] then return redis.error_reply('ENOENT no such execution') end
local after, earliest, last = tonumber(ARGV[1]), tonumber(h[1]), tonumber(h[2])
if after + 1 < earliest then return redis.error_reply('ELOG_TRUNCATED ' .. earliest) end
if after >= last then
  -- Nothing new: say whether it is finished, so a follower's next waitFor
  -- needs no round trip of its own (see RedisEventLog.waitFor).
  if h[3] ~= 'running' then return {'F'} end
  return {}
end
local e = redis.call('XRANGE', KEYS[2], (after + 1) .. '-0', '+', 'COUNT', ARGV[2])
local maxb, total = tonumber(ARGV[3]), 0
for i = 1, #e do
  local f = e[i][2]
  if f[2] ~= 'x' then total = total + #f[4] end
  if total > maxb and i > 1 then
    local out = {}
    for j = 1, i - 1 do out[j] = e[j] end
    return out
  end
end
return e
`;

// KEYS: meta, stream, index, counter. ARGV: prefix, id, token, node, then field/value pairs.
// The token makes a re-sent create (reply lost on a reconnect) succeed instead of EEXEC_BUSY.
const LUA_CREATE = `
local h = redis.call('HMGET', KEYS[1], 'state', 'token')
if h[1] == 'running' then
  if h[2] == ARGV[3] then return 0 end
  return redis.error_reply('EEXEC_BUSY execution ' .. ARGV[2] .. ' is still running')
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], 'token', ARGV[3], 'state', 'running', 'last', 0, 'earliest', 1, 'bytes', 0, unpack(ARGV, 5))
redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[4]), ARGV[2])
redis.call('SADD', ARGV[1] .. 'run:' .. ARGV[4], ARGV[2])
redis.call('PUBLISH', ARGV[1] .. 'n:' .. ARGV[2], 'c')
return 1
`;

// KEYS: meta, stream. ARGV: prefix, id, retention, now, then field/value pairs
// and a list of fields to delete after a lone '--' marker.
const LUA_UPDATE = `
local meta, stream, prefix, id = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local retention, now = tonumber(ARGV[3]), ARGV[4]
local h = redis.call('HMGET', meta, 'state', 'node')
if not h[1] then return redis.error_reply('ENOENT no such execution: ' .. id) end
local set, del, i = {}, {}, 5
while i <= #ARGV and ARGV[i] ~= '--' do set[#set + 1] = ARGV[i]; i = i + 1 end
for j = i + 1, #ARGV do del[#del + 1] = ARGV[j] end
if #set > 0 then redis.call('HSET', meta, unpack(set)) end
if #del > 0 then redis.call('HDEL', meta, unpack(del)) end
local s = redis.call('HMGET', meta, 'state', 'node', 'endedAt')
if h[1] == 'running' and (s[1] ~= 'running' or s[2] ~= h[2]) then
  redis.call('SREM', prefix .. 'run:' .. h[2], id)
end
if s[1] == 'running' and (h[1] ~= 'running' or s[2] ~= h[2]) then
  redis.call('SADD', prefix .. 'run:' .. s[2], id)
end
if h[1] == 'running' and s[1] ~= 'running' then
  if not s[3] then redis.call('HSET', meta, 'endedAt', now) end
  if retention >= 0 then
    redis.call('PEXPIRE', meta, retention)
    redis.call('PEXPIRE', stream, retention)
  end
  redis.call('PUBLISH', prefix .. 'n:' .. id, 'x')
end
return 1
`;

// KEYS: meta, stream, index. ARGV: prefix, id.
const LUA_DISPOSE = `
local node = redis.call('HGET', KEYS[1], 'node')
if node then redis.call('SREM', ARGV[1] .. 'run:' .. node, ARGV[2]) end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('PUBLISH', ARGV[1] .. 'n:' .. ARGV[2], 'd')
return 1
`;

// KEYS: meta, stream. ARGV: prefix, id, expected node, retention, now, exit value.
// Closes a running execution of a dead node with exit reason "lost". Conditional
// on state and owner, so when several sweepers race exactly one writes the exit,
// and an owner that is in fact alive loses its next append (EINVAL) instead of
// writing after the exit.
const LUA_LOST = `
local meta, stream, prefix, id = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local retention, now = tonumber(ARGV[4]), ARGV[5]
local h = redis.call('HMGET', meta, 'state', 'last', 'node')
local node = ARGV[3]
if h[1] ~= 'running' or h[3] ~= node then
  redis.call('SREM', prefix .. 'run:' .. node, id)
  return 0
end
${LUA_FINISH}
local seq = tonumber(h[2]) + 1
redis.call('XADD', stream, seq .. '-0', 't', 'x', 'v', ARGV[6], 's', '', 'r', 'lost')
redis.call('HINCRBY', meta, 'bytes', ${EVENT_OVERHEAD_BYTES})
finish('lost', ARGV[6], '', seq)
redis.call('PUBLISH', prefix .. 'n:' .. id, 'x' .. seq)
return seq
`;

type Arg = string | number | Buffer;
type ScriptFn = (...args: Arg[]) => Promise<unknown>;
interface Scripted {
  acAppend: ScriptFn;
  acReadBuffer: ScriptFn;
  acCreate: ScriptFn;
  acUpdate: ScriptFn;
  acDispose: ScriptFn;
  acLost: ScriptFn;
}

interface PendingAppend {
  events: LoggedEvent[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

interface AppendQueue {
  items: PendingAppend[];
  running: boolean;
}

/** Exit value written for executions closed as lost (matches the runtime's convention). */
export const LOST_EXIT_VALUE = -1;

/** Map a Redis error (script `error_reply` "CODE message") to a ComputerError. */
function mapError(err: unknown, id?: string): unknown {
  if (err instanceof ComputerError) return err;
  const msg = (err as Error)?.message ?? String(err);
  const m = /^(E[A-Z_]+) ?(.*)$/s.exec(msg);
  if (m && m[1] !== "ERR") {
    const code = m[1]!;
    if (code === "ELOG_TRUNCATED") {
      const earliestSeq = Number(m[2]);
      return new ComputerError(
        "ELOG_TRUNCATED",
        `events of ${id ?? "?"} were dropped; the earliest retained seq is ${earliestSeq}`,
        { earliestSeq },
      );
    }
    if (["ENOENT", "EINVAL", "EEXEC_BUSY"].includes(code)) {
      return new ComputerError(toErrorCode(code), m[2] || msg);
    }
  }
  if (/Connection is closed|closed/i.test(msg)) {
    return new ComputerError("ECLOSED", `redis connection closed: ${msg}`, { cause: err });
  }
  return new ComputerError("EINTERNAL", `redis: ${msg}`, { cause: err });
}

function toBuffer(v: Uint8Array): Buffer {
  return Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength);
}

/** Parse "<seq>-0" without allocating a string for the common case. */
function seqOf(id: Buffer | string): number {
  if (typeof id === "string") return Number.parseInt(id, 10);
  let n = 0;
  for (let i = 0; i < id.length; i++) {
    const c = id[i]!;
    if (c < 48 || c > 57) break;
    n = n * 10 + (c - 48);
  }
  return n;
}

type RawEntry = [Buffer, Buffer[]];

function decodeEntry(id: string, entry: RawEntry): LoggedEvent {
  const seq = seqOf(entry[0]);
  const f = entry[1];
  const t = f[1]!.toString("latin1");
  const v = f[3]!;
  switch (t) {
    case "o":
    case "e":
      return {
        id,
        seq,
        name: t === "o" ? "stdout" : "stderr",
        value: new Uint8Array(v.buffer, v.byteOffset, v.byteLength),
      };
    case "O":
    case "E":
      return { id, seq, name: t === "O" ? "stdout" : "stderr", value: v.toString("utf8") };
    default: {
      const ev: LoggedEvent = { id, seq, name: "exit", value: Number(v.toString("latin1")) };
      const s = f[5]?.toString("utf8");
      const r = f[7]?.toString("utf8");
      if (s) ev.signal = s;
      if (r) ev.reason = r as NonNullable<typeof ev.reason>;
      return ev;
    }
  }
}

function parseRecord(h: Record<string, string>): ExecRecord | undefined {
  if (!h || h.state === undefined || h.id === undefined) return undefined;
  const rec: ExecRecord = {
    id: h.id,
    command: JSON.parse(h.command ?? '""'),
    cwd: h.cwd ?? "",
    encoding: h.encoding === "utf8" ? "utf8" : "b64",
    node: h.node ?? "",
    state: normalizeState(h.state) ?? "running",
    startedAt: Number(h.startedAt ?? 0),
    lastSeq: Number(h.last ?? 0),
    earliestSeq: Number(h.earliest ?? 1),
  };
  if (h.pid !== undefined) rec.pid = Number(h.pid);
  if (h.endedAt !== undefined) rec.endedAt = Number(h.endedAt);
  if (h.exitCode !== undefined) rec.exitCode = Number(h.exitCode);
  if (h.signal !== undefined) rec.signal = h.signal;
  return rec;
}

/** Record fields as stored in the hash (record name → hash field). */
const FIELD: Record<string, string> = {
  command: "command",
  cwd: "cwd",
  encoding: "encoding",
  node: "node",
  pid: "pid",
  state: "state",
  startedAt: "startedAt",
  endedAt: "endedAt",
  exitCode: "exitCode",
  signal: "signal",
  lastSeq: "last",
  earliestSeq: "earliest",
};

function fieldValue(key: string, v: unknown): string {
  return key === "command" ? JSON.stringify(v) : String(v);
}

interface Watch {
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
class Notifier {
  private sub: Redis | undefined;
  private readonly watches = new Map<string, Watch>();
  private closed = false;

  constructor(
    private readonly makeSub: () => Redis,
    private readonly channelPrefix: string,
  ) {}

  private connection(): Redis {
    if (this.sub) return this.sub;
    const sub = this.makeSub();
    sub.on("message", (channel: string, message: string) => {
      const w = this.watches.get(channel.slice(this.channelPrefix.length));
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
      watch.subscribed = sub.subscribe(this.channelPrefix + id).then(
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
      this.sub?.unsubscribe(this.channelPrefix + w.id).catch(() => {});
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

/** Connection options tuned for a log: never give up on a command, reconnect fast. */
export function redisConnectionOptions(): RedisOptions {
  return {
    // Commands wait through an outage instead of failing after N retries: an
    // append that waits is backpressure, an append that fails is data loss.
    maxRetriesPerRequest: null,
    enableOfflineQueue: true,
    // Off on purpose: see "Writes" at the top of this file.
    enableAutoPipelining: false,
    retryStrategy: (times) => Math.min(50 * times, 500),
    lazyConnect: false,
  };
}

export function createRedisClient(spec: string | RedisOptions | undefined, name: string): Redis {
  const base = { ...redisConnectionOptions(), connectionName: name };
  if (typeof spec === "string") return new Redis(spec, base);
  return new Redis({ ...base, ...(spec ?? {}) });
}

export class RedisEventLog implements EventLog {
  /** The command connection (shared with the cluster module of the same node). */
  readonly redis: Redis;
  readonly prefix: string;
  private readonly maxBytes: number;
  /** The stream's byte cap per execution (`logMaxBytes`). */
  get capacityBytes(): number {
    return this.maxBytes;
  }
  private readonly retentionMs: number;
  private readonly readLimit: number;
  private readonly readMaxBytes: number;
  private readonly waitPollMs: number;
  private readonly scripts: Scripted;
  private readonly notifier: Notifier;
  private readonly queues = new Map<string, AppendQueue>();
  private readonly pumps = new Set<Promise<void>>();
  /** Per id: the last read that found nothing new (lets waitFor skip a round trip). */
  private readonly quiet = new Map<
    string,
    { after: number; watch: Watch | undefined; version: number; finished: boolean }
  >();
  private readonly spec: string | RedisOptions | undefined;
  private closed = false;

  constructor(options: RedisEventLogOptions = {}) {
    this.spec = options.redis ?? "redis://127.0.0.1:6379";
    this.prefix = options.prefix ?? "ac:";
    this.maxBytes = options.logMaxBytes ?? DEFAULT_LOG_MAX_BYTES;
    this.retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    this.readLimit = options.readLimit ?? DEFAULT_READ_LIMIT;
    this.readMaxBytes = options.readMaxBytes ?? DEFAULT_READ_MAX_BYTES;
    this.waitPollMs = options.waitPollMs ?? 5000;
    this.redis = createRedisClient(this.spec, "ac-log");
    // Errors surface on commands; the emitter must not crash the process.
    this.redis.on("error", () => {});
    this.redis.defineCommand("acAppend", { numberOfKeys: 2, lua: LUA_APPEND });
    this.redis.defineCommand("acRead", { numberOfKeys: 2, lua: LUA_READ, readOnly: true });
    this.redis.defineCommand("acCreate", { numberOfKeys: 4, lua: LUA_CREATE });
    this.redis.defineCommand("acUpdate", { numberOfKeys: 2, lua: LUA_UPDATE });
    this.redis.defineCommand("acDispose", { numberOfKeys: 3, lua: LUA_DISPOSE });
    this.redis.defineCommand("acLost", { numberOfKeys: 2, lua: LUA_LOST });
    this.scripts = this.redis as unknown as Scripted;
    this.notifier = new Notifier(() => this.duplicate("ac-log-sub"), `${this.prefix}n:`);
  }

  /** A new connection to the same Redis with the same options (for blocking reads, pub/sub). */
  duplicate(name: string): Redis {
    const c = createRedisClient(this.spec, name);
    c.on("error", () => {});
    return c;
  }

  metaKey(id: string): string {
    return `${this.prefix}{${id}}:m`;
  }
  streamKey(id: string): string {
    return `${this.prefix}{${id}}:s`;
  }
  private get indexKey(): string {
    return `${this.prefix}execs`;
  }

  async create(record: NewExecRecord): Promise<void> {
    this.open();
    const args: Arg[] = [];
    for (const [k, v] of Object.entries(record)) {
      if (v === undefined || k === "state") continue;
      const f = k === "id" ? "id" : FIELD[k];
      if (!f) continue;
      args.push(f, fieldValue(k, v));
    }
    const token = `${process.pid}-${Math.random().toString(36).slice(2)}-${Date.now()}`;
    try {
      await this.scripts.acCreate(
        this.metaKey(record.id),
        this.streamKey(record.id),
        this.indexKey,
        `${this.prefix}ctr`,
        this.prefix,
        record.id,
        token,
        record.node,
        ...args,
      );
    } catch (err) {
      throw mapError(err, record.id);
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
    const args: Arg[] = [
      this.prefix,
      id,
      this.maxBytes,
      Number.isFinite(this.retentionMs) ? Math.max(0, Math.round(this.retentionMs)) : -1,
      Date.now(),
    ];
    for (const ev of events) {
      if (ev.name === "exit") {
        args.push(ev.seq, "x", String(ev.value), ev.signal ?? "", ev.reason ?? "");
      } else if (typeof ev.value === "string") {
        args.push(ev.seq, ev.name === "stdout" ? "O" : "E", ev.value, "", "");
      } else {
        args.push(ev.seq, ev.name === "stdout" ? "o" : "e", toBuffer(ev.value), "", "");
      }
    }
    let last: unknown;
    try {
      last = await this.scripts.acAppend(this.metaKey(id), this.streamKey(id), ...args);
    } catch (err) {
      throw mapError(err, id);
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
      raw = (await this.scripts.acReadBuffer(
        this.metaKey(id),
        this.streamKey(id),
        after,
        limit,
        this.readMaxBytes,
      )) as RawEntry[];
    } catch (err) {
      throw mapError(err, id);
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
          st = await this.redis.hmget(this.metaKey(id), "state", "last");
        } catch (err) {
          throw mapError(err, id);
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
      return parseRecord(await this.redis.hgetall(this.metaKey(id)));
    } catch (err) {
      throw mapError(err, id);
    }
  }

  async list(): Promise<ExecRecord[]> {
    this.open();
    try {
      const ids = await this.redis.zrange(this.indexKey, "0", "-1");
      if (ids.length === 0) return [];
      const pipe = this.redis.pipeline();
      for (const id of ids) pipe.hgetall(this.metaKey(id));
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
      throw mapError(err);
    }
  }

  private async pruneIndex(ids: string[]): Promise<void> {
    try {
      const pipe = this.redis.pipeline();
      for (const id of ids) {
        pipe.eval(
          "if redis.call('EXISTS', KEYS[1]) == 0 then return redis.call('ZREM', KEYS[2], ARGV[1]) end return 0",
          2,
          this.metaKey(id),
          this.indexKey,
          id,
        );
      }
      await pipe.exec();
    } catch {
      /* best effort */
    }
  }

  async update(id: string, patch: Partial<Omit<ExecRecord, "id">>): Promise<void> {
    this.open();
    const set: Arg[] = [];
    const del: Arg[] = [];
    for (const [k, v] of Object.entries(patch)) {
      const f = FIELD[k];
      if (!f) continue;
      if (v === undefined) del.push(f);
      else set.push(f, fieldValue(k, v));
    }
    try {
      await this.scripts.acUpdate(
        this.metaKey(id),
        this.streamKey(id),
        this.prefix,
        id,
        Number.isFinite(this.retentionMs) ? Math.max(0, Math.round(this.retentionMs)) : -1,
        Date.now(),
        ...set,
        "--",
        ...del,
      );
    } catch (err) {
      throw mapError(err, id);
    }
    if (patch.state && patch.state !== "running") this.notifier.local(id, "x");
  }

  async dispose(id: string): Promise<void> {
    this.open();
    try {
      await this.scripts.acDispose(
        this.metaKey(id),
        this.streamKey(id),
        this.indexKey,
        this.prefix,
        id,
      );
    } catch (err) {
      throw mapError(err, id);
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
        await this.scripts.acLost(
          this.metaKey(id),
          this.streamKey(id),
          this.prefix,
          id,
          node,
          Number.isFinite(this.retentionMs) ? Math.max(0, Math.round(this.retentionMs)) : -1,
          Date.now(),
          LOST_EXIT_VALUE,
        ),
      );
      if (seq > 0) this.notifier.local(id, "x");
      return seq;
    } catch (err) {
      throw mapError(err, id);
    }
  }

  /** Ids of executions recorded as running on `node`. */
  async runningOn(node: string): Promise<string[]> {
    this.open();
    return await this.redis.smembers(`${this.prefix}run:${node}`);
  }

  /** Retained bytes of one execution as counted against the cap (tests, metrics). */
  async retainedBytes(id: string): Promise<number> {
    return Number((await this.redis.hget(this.metaKey(id), "bytes")) ?? 0);
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
