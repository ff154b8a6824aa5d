// The Redis key schema: every key and channel name that the event log and
// cluster mode use, built from one prefix. It lives in one place so the log,
// its Lua scripts and the cluster can never disagree about where something is,
// and so a change of layout is a visible change of this file (data written by
// a running deployment must stay readable). The table for operators is in
// docs/operations.md ("Redis").
//
// `{<id>}` in an execution's keys is a hash tag: both keys of one execution
// hash to the same slot. The scripts still touch keys outside that slot (the
// per-node running set, the index, channels), so one primary is required, not
// Redis Cluster (docs/operations.md).

/** Prefix used when none is given, so several deployments can share one Redis. */
export const DEFAULT_PREFIX = "ac:";

/**
 * Name segments the Lua scripts append to the prefix themselves: the running
 * set of a node whose id they read from the record, and the notification
 * channel. Interpolated into the script text (scripts.ts), never spelled there.
 */
export const RUNNING_SET_SEGMENT = "run:";
export const NOTIFY_CHANNEL_SEGMENT = "n:";

/**
 * Key and channel names under one prefix. Messages on a notification channel:
 * the last seq after an append, `x…` on finish, `d` on dispose, `c` on
 * (re)create.
 */
export class RedisKeys {
  constructor(readonly prefix: string = DEFAULT_PREFIX) {}

  /** Hash: the ExecRecord plus `last`, `earliest`, `bytes`, `token` (see codec.ts). */
  meta(id: string): string {
    return `${this.prefix}{${id}}:m`;
  }
  /** Stream: one entry per event, entry id `<seq>-0`, so "after N" is one XRANGE from `N+1-0`. */
  stream(id: string): string {
    return `${this.prefix}{${id}}:s`;
  }
  /** Sorted set of execution ids for cluster-wide listing, scored by `counter` (oldest first). */
  get index(): string {
    return `${this.prefix}execs`;
  }
  /** Global creation counter that scores the index (stable order across nodes). */
  get counter(): string {
    return `${this.prefix}ctr`;
  }
  /** Set of execution ids running on `node` (what the liveness sweeper closes as lost). */
  running(node: string): string {
    return `${this.prefix}${RUNNING_SET_SEGMENT}${node}`;
  }
  /** Pub/sub channel announcing changes of one execution. */
  notifyChannel(id: string): string {
    return `${this.notifyChannelPrefix}${id}`;
  }
  /** What every notification channel starts with (the execution id follows). */
  get notifyChannelPrefix(): string {
    return `${this.prefix}${NOTIFY_CHANNEL_SEGMENT}`;
  }
  /** String with a TTL kept alive by a live node (JSON: token, pid, host, advertised info). */
  alive(node: string): string {
    return `${this.prefix}node:${node}`;
  }
  /** Set of known node ids (a dead node is forgotten once nothing runs on it). */
  get nodes(): string {
    return `${this.prefix}nodes`;
  }
  /** Stream of control requests addressed to `node` (capped, read by the owner). */
  controlStream(node: string): string {
    return `${this.prefix}ctl:${node}`;
  }
  /** Pub/sub channel carrying control replies back to the requesting `node`. */
  replyChannel(node: string): string {
    return `${this.prefix}reply:${node}`;
  }
}
