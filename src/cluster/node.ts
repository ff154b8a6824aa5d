// One node of a cluster: the shared RedisEventLog, this node's liveness and
// sweeper, and control routing. It hands the runtime a `RemoteControl` (what
// to do with an execution that is in the shared log but runs on another node)
// and serves the same operations (kill, stdin write/end, dispose, terminal
// resize) for its own executions, by calling the local Computer.
//
//   const cluster = await ClusterNode.start({ redis: "redis://…", nodeId: "a" });
//   const computer = new Computer({ workspace, eventLog: cluster.eventLog, nodeId: "a", remote: cluster.remote });
//   cluster.serve(computer);
//   …
//   await computer.close(); await cluster.close();   // this order: see close()
//
// Operations on an execution whose owner is dead do not wait for a timeout:
// `kill` closes it as lost right away (that is what the sweeper would do a
// few seconds later), `dispose` deletes it from the log, `write`/`end`/`resize`
// fail with ENETWORK naming the node.

import type { Redis } from "ioredis";
import type { RedisSpec } from "../store/redis/connection.js";
import { RedisEventLog, type RedisEventLogOptions } from "../store/redis/log.js";
import type { ExecRecord } from "../store/types.js";
import { ComputerError } from "../wire/errors.js";
import { ControlChannel, type ControlHandler } from "./control.js";
import { type LivenessOptions, type NodeInfo, NodeLiveness } from "./liveness.js";

/** What the runtime calls for executions owned by another node (structurally the runtime's RemoteControl). */
export interface RemoteControl {
  kill(rec: ExecRecord, signal?: string): Promise<void>;
  write(rec: ExecRecord, chunk: Uint8Array | string): Promise<void>;
  end(rec: ExecRecord): Promise<void>;
  dispose(rec: ExecRecord): Promise<void>;
  resize(rec: ExecRecord, size: { cols: number; rows: number }): Promise<void>;
}

/** The slice of the Computer a node needs to serve control requests. */
export interface LocalComputer {
  /** Ids of executions running in this process (enables the orphan sweep). */
  running?(): string[];
  kill(id: string, signal?: string): Promise<void>;
  dispose(id: string): Promise<void>;
  /** Resize a pty execution's terminal (without it, resize requests answer EUNAVAILABLE). */
  resize?(id: string, size: { cols: number; rows: number }): Promise<void>;
  get(
    id: string,
  ): Promise<{ write(chunk: Uint8Array | string): Promise<void>; end(): Promise<void> }>;
}

export interface ClusterNodeOptions extends LivenessOptions {
  /** This node's id (unique in the cluster; stable across restarts of the same machine is fine). */
  nodeId: string;
  /** An existing event log to share, or connection settings to open one. */
  eventLog?: RedisEventLog;
  redis?: RedisSpec;
  eventLogOptions?: Omit<RedisEventLogOptions, "redis">;
  /** Caller's wait for a reply from the owning node (default 5000 ms). */
  controlTimeoutMs?: number;
  /** Give up starting when Redis cannot be reached for this long (default 10000 ms). */
  connectTimeoutMs?: number;
  /** Structured logger for cluster events (liveness, sweeps, control failures). */
  logger?: (event: string, fields: Record<string, unknown>) => void;
}

const enc = new TextEncoder();

export class ClusterNode {
  readonly nodeId: string;
  readonly eventLog: RedisEventLog;
  readonly liveness: NodeLiveness;
  readonly control: ControlChannel;
  readonly remote: RemoteControl;
  private readonly ownsEventLog: boolean;
  private readonly redis: Redis;
  private closed = false;

  private constructor(options: ClusterNodeOptions) {
    if (!options.nodeId || /[\s{}]/.test(options.nodeId)) {
      throw new ComputerError(
        "EINVAL",
        "a cluster node id must be non-empty without spaces or braces",
      );
    }
    this.nodeId = options.nodeId;
    this.ownsEventLog = !options.eventLog;
    this.eventLog =
      options.eventLog ?? new RedisEventLog({ ...options.eventLogOptions, redis: options.redis });
    // The cluster's own connection: liveness and control keep working while the
    // Computer closes the shared log during shutdown.
    this.redis = this.eventLog.duplicate(`ac-cluster-${this.nodeId}`);
    this.liveness = new NodeLiveness(this.eventLog, this.redis, this.nodeId, options);
    this.control = new ControlChannel(this.eventLog, this.redis, this.nodeId, {
      timeoutMs: options.controlTimeoutMs,
      logger: options.logger,
    });
    this.remote = {
      kill: (rec, signal) => this.routeKill(rec, signal),
      write: (rec, chunk) =>
        this.route(rec, "write", { data: typeof chunk === "string" ? enc.encode(chunk) : chunk }),
      end: (rec) => this.route(rec, "end"),
      resize: (rec, size) => this.route(rec, "resize", { size }),
      dispose: (rec) => this.routeDispose(rec),
    };
  }

  /** Open (or share) the log, claim the node id, and start liveness, sweeping and control. */
  static async start(options: ClusterNodeOptions): Promise<ClusterNode> {
    const node = new ClusterNode(options);
    try {
      // Commands wait through outages (by design, for appends), so a Redis
      // that is not there at all would hang startup silently: fail fast instead.
      await waitReady(node.redis, options.connectTimeoutMs ?? 10_000);
      await node.liveness.start();
      await node.control.start();
    } catch (err) {
      await node.close().catch(() => {});
      throw err;
    }
    return node;
  }

  /** Serve control requests for this node's executions with the local Computer. */
  serve(computer: LocalComputer | ControlHandler): void {
    const c = computer as Partial<LocalComputer & ControlHandler>;
    const handler: ControlHandler =
      typeof c.write === "function" && typeof c.end === "function"
        ? (computer as ControlHandler)
        : {
            kill: (id, signal) => (computer as LocalComputer).kill(id, signal),
            dispose: (id) => (computer as LocalComputer).dispose(id),
            write: async (id, chunk) => (await (computer as LocalComputer).get(id)).write(chunk),
            end: async (id) => (await (computer as LocalComputer).get(id)).end(),
            ...(typeof c.resize === "function"
              ? { resize: (id, size) => (computer as LocalComputer).resize!(id, size) }
              : {}),
          };
    this.control.setHandler(handler);
    const running = (computer as LocalComputer).running;
    if (typeof running === "function") {
      this.liveness.setLocalRunning(() => running.call(computer));
    }
  }

  /** Known nodes, alive or not yet forgotten. */
  nodes(): Promise<NodeInfo[]> {
    return this.liveness.nodes();
  }

  /**
   * False when the owner is dead, or is this very node (the record says the
   * execution runs here, but this process does not have it: a previous
   * incarnation's orphan). Routing such a request to ourselves would loop.
   */
  private async ownerAlive(rec: ExecRecord): Promise<boolean> {
    if (rec.node === this.nodeId) return false;
    return await this.liveness.isAlive(rec.node);
  }

  private async routeKill(rec: ExecRecord, signal?: string): Promise<void> {
    if (rec.state !== "running") return;
    if (!(await this.ownerAlive(rec))) {
      const seq = await this.eventLog.closeLost(rec.id, rec.node);
      if (seq > 0 && rec.node !== this.nodeId) {
        await this.eventLog
          .update(rec.id, {
            lostNote: `node ${rec.node} is down; node ${this.nodeId} closed this execution but could not kill its processes from there (node ${rec.node} kills them when it restarts with the same node id)`,
          })
          .catch(() => {});
      }
      return;
    }
    await this.control.request(rec.node, "kill", rec.id, signal ? { signal } : {});
  }

  private async routeDispose(rec: ExecRecord): Promise<void> {
    if (rec.state !== "running" || !(await this.ownerAlive(rec))) {
      // Nothing runs anywhere: deleting from the shared log is all there is.
      await this.eventLog.dispose(rec.id);
      return;
    }
    await this.control.request(rec.node, "dispose", rec.id);
  }

  private async route(
    rec: ExecRecord,
    op: "write" | "end" | "resize",
    extra: { data?: Uint8Array; size?: { cols: number; rows: number } } = {},
  ): Promise<void> {
    if (!(await this.ownerAlive(rec))) {
      throw new ComputerError(
        "ENETWORK",
        `execution ${rec.id} runs on node ${rec.node}, which is down; its ${op === "resize" ? "terminal" : "stdin"} is gone`,
      );
    }
    await this.control.request(rec.node, op, rec.id, extra);
  }

  /**
   * Stop control and liveness, and close the event log if this node opened it. Close
   * the Computer first: it ends its executions (reason killed) while this node
   * still counts as alive, so no other node closes them as lost meanwhile.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.control.close();
    await this.liveness.stop();
    this.redis.disconnect();
    if (this.ownsEventLog) await this.eventLog.close();
  }
}

function waitReady(redis: Redis, timeoutMs: number): Promise<void> {
  if (redis.status === "ready") return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    let lastError = "";
    const onError = (err: Error) => {
      lastError = err.message;
    };
    const onReady = () => {
      clearTimeout(timer);
      redis.off("error", onError);
      resolve();
    };
    const timer = setTimeout(() => {
      redis.off("ready", onReady);
      redis.off("error", onError);
      reject(
        new ComputerError(
          "ENETWORK",
          `cannot reach Redis within ${timeoutMs} ms${lastError ? ` (${lastError})` : ""}`,
        ),
      );
    }, timeoutMs);
    redis.once("ready", onReady);
    redis.on("error", onError);
  });
}
