// Node liveness for cluster mode: each node keeps its liveness key (keys.alive
// in src/store/redis/keys.ts) alive with a TTL, and every node runs a sweeper
// that closes the running executions of nodes whose key has expired with an
// `exit` whose reason is `lost`, so a client never waits forever on a dead
// node.
//
// Timing (defaults): the key lives `ttlMs` = 5 s and is refreshed every
// `refreshMs` = 1.5 s; each node sweeps every `sweepMs` = 2 s (±25% jitter so
// nodes do not sweep in lock-step). A node that dies at t stops refreshing; its
// key expires by t + 5 s and the next sweep of any surviving node closes its
// executions by t + 5 s + 2.5 s + one sweep's run time, comfortably inside the
// documented bound of 15 s (docs/operations.md). Only one node writes each
// `lost` exit: the close is a Lua script conditional on "still running and
// still owned by that node" (RedisEventLog.closeLost).
//
// A node that was merely paused past its TTL (GC, VM freeze) finds its key gone
// on the next refresh: its executions may already be closed as lost, and their
// next append fails with EINVAL (the log refuses events after exit). It logs
// that loudly rather than resurrecting anything.

import { hostname } from "node:os";
import type { Redis } from "ioredis";
import type { RedisKeys } from "../store/redis/keys.js";
import type { RedisEventLog } from "../store/redis/log.js";
import { ComputerError } from "../wire/errors.js";

export interface LivenessOptions {
  /** Lifetime of the liveness key (default 5000 ms). */
  ttlMs?: number;
  /** Refresh period (default ttlMs / 3). */
  refreshMs?: number;
  /** Sweep period for dead nodes (default 2000 ms). */
  sweepMs?: number;
  /** Extra info stored in the key (e.g. the node's URL) for operators and `nodes()`. */
  info?: Record<string, unknown>;
  /** Structured logger (node lapsed, executions closed as lost, ...); defaults to stderr. */
  logger?: (event: string, fields: Record<string, unknown>) => void;
}

export interface NodeInfo {
  id: string;
  alive: boolean;
  /** Executions recorded as running on the node. */
  running: number;
  info?: Record<string, unknown>;
}

// KEYS: alive key, nodes set. ARGV: value, ttl, token, node id. 1: refreshed
// ours, 0: had lapsed (re-created), -1: another instance holds the id.
// Every refresh also (re-)registers the node in the nodes set: a Redis that
// lost its data (restarted without persistence) has an empty set, and a node
// missing from it would never be swept when it dies.
const LUA_REFRESH = `
local cur = redis.call('GET', KEYS[1])
if cur and not string.find(cur, ARGV[3], 1, true) then return -1 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[4])
if cur then return 1 end
return 0
`;

// KEYS: alive key, running set, nodes set. ARGV: node id. Forget a node once it
// is dead and has nothing left running.
const LUA_FORGET = `
if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('SCARD', KEYS[2]) == 0 then
  return redis.call('SREM', KEYS[3], ARGV[1])
end
return 0
`;

// KEYS: alive key. ARGV: token. Delete only our own key.
const LUA_RELEASE = `
local cur = redis.call('GET', KEYS[1])
if cur and string.find(cur, ARGV[1], 1, true) then return redis.call('DEL', KEYS[1]) end
return 0
`;

const defaultLogger = (event: string, fields: Record<string, unknown>) => {
  process.stderr.write(`${JSON.stringify({ t: new Date().toISOString(), event, ...fields })}\n`);
};

export class NodeLiveness {
  readonly ttlMs: number;
  readonly refreshMs: number;
  readonly sweepMs: number;
  private readonly startedAt = Date.now();
  private readonly token = `${process.pid}.${Date.now()}.${Math.random().toString(36).slice(2)}`;
  private readonly logger: (event: string, fields: Record<string, unknown>) => void;
  private readonly keys: RedisKeys;
  private refreshTimer?: ReturnType<typeof setInterval>;
  private sweepTimer?: ReturnType<typeof setTimeout>;
  private sweeping?: Promise<number>;
  private stopped = false;
  private info: Record<string, unknown>;
  /** When the cluster connection last became ready (sweeps wait a TTL after it). */
  private connectedAt = 0;

  /**
   * `redis` is the cluster's own connection (not the log's), so liveness can
   * still release its key after the Computer has closed the shared log.
   */
  constructor(
    private readonly eventLog: RedisEventLog,
    private readonly redis: Redis,
    readonly nodeId: string,
    options: LivenessOptions = {},
  ) {
    this.ttlMs = options.ttlMs ?? 5000;
    this.refreshMs = options.refreshMs ?? Math.max(50, Math.floor(this.ttlMs / 3));
    this.sweepMs = options.sweepMs ?? 2000;
    this.keys = eventLog.keys;
    this.logger = options.logger ?? defaultLogger;
    this.info = { ...options.info };
  }

  /** Merge into the info advertised in the liveness key (takes effect on the next refresh). */
  advertise(info: Record<string, unknown>): void {
    Object.assign(this.info, info);
    void this.refresh();
  }

  private value(): string {
    return JSON.stringify({
      token: this.token,
      pid: process.pid,
      host: hostname(),
      startedAt: this.startedAt,
      ...this.info,
    });
  }

  /**
   * Claim the node id (waiting out a stale key of a crashed predecessor for up
   * to one TTL), close executions a previous incarnation left running, then
   * start refreshing and sweeping.
   */
  async start(): Promise<void> {
    const r = this.redis;
    // The first connect counts too: a node that has just joined (or a Redis
    // that has just come back) has not seen anyone's refresh yet.
    this.connectedAt = Date.now();
    r.on("ready", () => {
      this.connectedAt = Date.now();
      void this.refresh();
    });
    const deadline = Date.now() + this.ttlMs + 1000;
    for (;;) {
      const ok = await r.set(this.keys.alive(this.nodeId), this.value(), "PX", this.ttlMs, "NX");
      if (ok === "OK") break;
      if (Date.now() > deadline) {
        throw new ComputerError(
          "EEXEC_BUSY",
          `node id ${this.nodeId} is in use by another live node (its liveness key keeps being refreshed); pick another --node-id`,
        );
      }
      await new Promise((res) => setTimeout(res, 200));
    }
    await r.sadd(this.keys.nodes, this.nodeId);
    // A previous process with this node id died with executions running: they
    // are not in this process, so they are lost.
    for (const id of await this.eventLog.runningOn(this.nodeId)) {
      const seq = await this.eventLog.closeLost(id, this.nodeId);
      if (seq > 0) this.logger("exec.lost", { id, node: this.nodeId, by: this.nodeId, seq });
    }
    this.refreshTimer = setInterval(() => void this.refresh(), this.refreshMs);
    this.refreshTimer.unref?.();
    this.scheduleSweep();
  }

  private async refresh(): Promise<void> {
    if (this.stopped) return;
    try {
      const res = Number(
        await this.redis.eval(
          LUA_REFRESH,
          2,
          this.keys.alive(this.nodeId),
          this.keys.nodes,
          this.value(),
          this.ttlMs,
          this.token,
          this.nodeId,
        ),
      );
      if (res === 0) {
        this.logger("node.lapsed", {
          node: this.nodeId,
          message:
            "liveness key had expired (process paused or Redis unreachable longer than the TTL); running executions may have been closed as lost by another node",
        });
      } else if (res === -1) {
        this.logger("node.conflict", {
          node: this.nodeId,
          message: "another process holds this node id",
        });
      }
    } catch (err) {
      this.logger("node.refresh_failed", { node: this.nodeId, error: (err as Error).message });
    }
  }

  private scheduleSweep(): void {
    if (this.stopped) return;
    const delay = this.sweepMs * (0.75 + Math.random() * 0.5);
    this.sweepTimer = setTimeout(async () => {
      try {
        await this.sweep();
      } catch (err) {
        this.logger("node.sweep_failed", { node: this.nodeId, error: (err as Error).message });
      }
      this.scheduleSweep();
    }, delay);
    this.sweepTimer.unref?.();
  }

  /** Close the running executions of every dead node; returns how many this call closed. */
  sweep(): Promise<number> {
    this.sweeping ??= this.doSweep().finally(() => {
      this.sweeping = undefined;
    });
    return this.sweeping;
  }

  /**
   * Which executions this process really runs (the Computer's `running()`).
   * With it, the sweep also closes this node's orphans: records that say
   * "running here" although no process here has them, e.g. after the runtime
   * gave up on an execution whose appends Redis refused (failover lost
   * acknowledged writes). An id must look orphaned on two sweeps in a row,
   * because exec() creates the record a moment before it registers the process.
   */
  setLocalRunning(fn: () => Iterable<string>): void {
    this.localRunning = fn;
  }
  private localRunning: (() => Iterable<string>) | undefined;
  private suspects = new Set<string>();

  private async sweepOwnOrphans(): Promise<number> {
    if (!this.localRunning || this.stopped) return 0;
    const recorded = await this.eventLog.runningOn(this.nodeId);
    const local = new Set(this.localRunning());
    const orphans = new Set(recorded.filter((id) => !local.has(id)));
    let closed = 0;
    for (const id of orphans) {
      if (!this.suspects.has(id)) continue;
      const seq = await this.eventLog.closeLost(id, this.nodeId);
      if (seq > 0) {
        closed++;
        this.logger("exec.lost", { id, node: this.nodeId, by: this.nodeId, seq, orphan: true });
      }
    }
    this.suspects = orphans;
    return closed;
  }

  private async doSweep(): Promise<number> {
    const r = this.redis;
    const own = await this.sweepOwnOrphans();
    // After our connection to Redis was (re)established, give every node one
    // TTL to refresh before judging it: when Redis itself was down or
    // restarted longer than a TTL, all keys look expired at once, and nodes
    // that are alive would otherwise be declared dead.
    // Checked after the reads: a sweep that started before an outage has its
    // commands queued and answered only after the reconnect.
    const nodes = (await r.smembers(this.keys.nodes)).filter((n) => n !== this.nodeId);
    if (nodes.length === 0) return own;
    const pipe = r.pipeline();
    for (const n of nodes) pipe.exists(this.keys.alive(n));
    const alive = ((await pipe.exec()) ?? []).map(([, v]) => Number(v) === 1);
    if (Date.now() - this.connectedAt < this.ttlMs + this.refreshMs) return own;
    let closed = own;
    for (let i = 0; i < nodes.length; i++) {
      if (alive[i] || this.stopped) continue;
      const node = nodes[i]!;
      for (const id of await this.eventLog.runningOn(node)) {
        const seq = await this.eventLog.closeLost(id, node);
        if (seq > 0) {
          closed++;
          this.logger("exec.lost", { id, node, by: this.nodeId, seq });
          // Its processes run (if at all) on the dead node's host: nothing
          // here can signal them. Say so; that node kills them if it restarts.
          await this.eventLog
            .update(id, {
              lostNote: `node ${node} stopped answering; node ${this.nodeId} closed this execution but could not kill its processes from there (node ${node} kills them when it restarts with the same node id)`,
            })
            .catch(() => {});
        }
      }
      await r.eval(
        LUA_FORGET,
        3,
        this.keys.alive(node),
        this.keys.running(node),
        this.keys.nodes,
        node,
      );
    }
    return closed;
  }

  async isAlive(node: string): Promise<boolean> {
    if (node === this.nodeId) return !this.stopped;
    return (await this.redis.exists(this.keys.alive(node))) === 1;
  }

  /** Known nodes with liveness and running counts (for `ps`/dashboards/ops). */
  async nodes(): Promise<NodeInfo[]> {
    const r = this.redis;
    const ids = (await r.smembers(this.keys.nodes)).sort();
    const pipe = r.pipeline();
    for (const n of ids) {
      pipe.get(this.keys.alive(n));
      pipe.scard(this.keys.running(n));
    }
    const res = (await pipe.exec()) ?? [];
    return ids.map((id, i) => {
      const raw = res[2 * i]?.[1] as string | null;
      const out: NodeInfo = { id, alive: raw !== null, running: Number(res[2 * i + 1]?.[1] ?? 0) };
      if (raw) {
        try {
          const { token: _t, ...info } = JSON.parse(raw) as Record<string, unknown>;
          out.info = info;
        } catch {
          /* foreign value: ignore */
        }
      }
      return out;
    });
  }

  /** Stop refreshing and give up the node id at once (graceful shutdown). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.refreshTimer) clearInterval(this.refreshTimer);
    if (this.sweepTimer) clearTimeout(this.sweepTimer);
    await this.sweeping?.catch(() => {});
    // Bounded: with Redis unreachable the command would wait for a reconnect;
    // the key expires on its own after one TTL anyway.
    await Promise.race([
      this.redis.eval(LUA_RELEASE, 1, this.keys.alive(this.nodeId), this.token).catch(() => {}),
      new Promise((r) => setTimeout(r, 1000)),
    ]);
  }
}
