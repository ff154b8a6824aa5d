// What `agent-computer serve` needs to run as a cluster node, in one call, so
// the CLI stays a thin layer: given `--log` / `--node-id` (or the env vars
// AGENT_COMPUTER_LOG / AGENT_COMPUTER_NODE_ID) it returns the event log, node
// id and RemoteControl to build the Computer with, a hook to serve control requests
// with that Computer, and a close() to call after the server has closed.
// For "memory" / "sqlite:PATH" it is a pass-through with no cluster at all.

import { hostname } from "node:os";
import type { EventLogSpec } from "../store/open-log.js";
import { isRedisUrl, parseRedisUrl } from "../store/redis/url.js";
import { ClusterNode, type LocalComputer, type RemoteControl } from "./node.js";

export interface ServeClusterOptions {
  /** `--log`: "memory", "sqlite:PATH" or "redis://HOST:PORT[/DB][?prefix=P]". */
  eventLog?: string;
  /** `--node-id`; default: env AGENT_COMPUTER_NODE_ID, else the host name. */
  nodeId?: string;
  logMaxBytes?: number;
  retentionMs?: number;
  env?: NodeJS.ProcessEnv;
  /** Structured logger for cluster events (liveness, lost executions). */
  logger?: (event: string, fields: Record<string, unknown>) => void;
}

export interface ServeCluster {
  /** Pass to `new Computer({ eventLog })`. */
  eventLog: EventLogSpec;
  /** Pass to `new Computer({ nodeId })`. */
  nodeId: string;
  /** Pass to `new Computer({ remote })` (undefined on a single node). */
  remote: RemoteControl | undefined;
  /** The cluster node, when `log` is a redis:// URL. */
  cluster: ClusterNode | undefined;
  /** Serve control requests from other nodes with this computer. */
  attach(computer: LocalComputer): void;
  /** Extra info advertised in this node's liveness key (e.g. its URL). */
  advertise(info: Record<string, unknown>): void;
  /** After the server (and so the Computer) has closed. */
  close(): Promise<void>;
}

/** The default node id: env AGENT_COMPUTER_NODE_ID, else the host name. */
export function defaultNodeId(env: NodeJS.ProcessEnv = process.env): string {
  return env.AGENT_COMPUTER_NODE_ID || hostname() || "node";
}

export async function openServeCluster(options: ServeClusterOptions = {}): Promise<ServeCluster> {
  const env = options.env ?? process.env;
  const spec = options.eventLog ?? env.AGENT_COMPUTER_LOG ?? "memory";
  if (!isRedisUrl(spec)) {
    return {
      eventLog: spec,
      nodeId: options.nodeId ?? env.AGENT_COMPUTER_NODE_ID ?? "local",
      remote: undefined,
      cluster: undefined,
      attach() {},
      advertise() {},
      async close() {},
    };
  }
  const nodeId = options.nodeId ?? defaultNodeId(env);
  const { redis, prefix } = parseRedisUrl(spec);
  const cluster = await ClusterNode.start({
    nodeId,
    redis,
    eventLogOptions: {
      ...(prefix !== undefined ? { prefix } : {}),
      ...(options.logMaxBytes !== undefined ? { logMaxBytes: options.logMaxBytes } : {}),
      ...(options.retentionMs !== undefined ? { retentionMs: options.retentionMs } : {}),
    },
    ...(options.logger ? { logger: options.logger } : {}),
  });
  return {
    eventLog: cluster.eventLog,
    nodeId,
    remote: cluster.remote,
    cluster,
    attach: (computer) => cluster.serve(computer),
    advertise: (info) => cluster.liveness.advertise(info),
    close: () => cluster.close(),
  };
}
