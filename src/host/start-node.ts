// startNode(): one call that runs a complete agent-computer node — workspace,
// event log, the in-process Computer, the HTTP/WebSocket server and, when the
// event log is a redis:// URL, membership of a cluster (liveness, sweeping of
// dead nodes, routing of kill/stdin to the node that runs a command). It is
// the composition root: `agent-computer serve` is flag parsing around it, and
// an embedder gets exactly what the CLI runs, cluster mode included.
//
// Every execution goes through the node's sandbox (confine.ts: `auto` by
// default, which confines when the host allows it).
//
// Order matters on the way down: close() stops the server first (running
// commands end as `killed` while this node is still alive in the cluster, so
// their exits are recorded as such), then leaves the cluster, then releases
// the sandbox.

import { mkdirSync } from "node:fs";
import path from "node:path";
import { registerClusterRoutes } from "../cluster/routes.js";
import { openServeCluster } from "../cluster/serve.js";
import { Computer } from "../runtime/computer.js";
import type { Sandbox } from "../sandbox/types.js";
import {
  type ComputerServer,
  type ComputerServerOptions,
  createComputerServer,
} from "../server/app.js";
import type { ServerLimits } from "../server/deps.js";
import { registerInfoRoute } from "../server/routes/meta.js";
import type { SpillOptions } from "../store/spill.js";
import { ComputerError } from "../wire/errors.js";
import {
  type ConfinementInfo,
  type ConfineOptions,
  confinementInfo,
  confinementLine,
  openNodeSandbox,
} from "./confine.js";
import {
  DEFAULT_EVENT_LOG,
  DEFAULT_HOST,
  DEFAULT_PORT,
  DEFAULT_WORKSPACE,
  ENV,
} from "./defaults.js";

export interface NodeOptions extends ConfineOptions {
  /** Workspace folder (created when missing). Default `./workspace`. */
  workspace?: string;
  /** Interface to bind. Default 127.0.0.1 (loopback). */
  host?: string;
  /** Port; 0 picks a free one. Default 8787. */
  port?: number;
  /** Bearer token; generated when undefined; `null` turns auth off (not recommended). */
  token?: string | null;
  /** "memory" (default), "sqlite:PATH", or "redis://HOST:PORT[/DB][?prefix=P]" for cluster mode. */
  eventLog?: string;
  /** This node's id in cluster mode. Default: env AGENT_COMPUTER_NODE_ID, else the host name. */
  nodeId?: string;
  /** Extra Host names accepted besides loopback ("*" for any). */
  allowedHosts?: string[];
  /** Foreign origins allowed (CORS and WebSocket). */
  corsOrigins?: string[];
  /** Server limits (request bodies, uploads, subscribers). */
  limits?: Partial<ServerLimits>;
  /** Running executions at once (then 429 ELIMIT). */
  maxConcurrent?: number;
  /** Per-execution event log ring size in bytes. */
  logMaxBytes?: number;
  /** How long finished executions are kept. */
  retentionMs?: number;
  /** Memory log: disk retention beyond the ring (budgets and directory; docs/operations.md). */
  spill?: SpillOptions;
  /** Heartbeat interval on live streams (0: off). */
  heartbeatMs?: number;
  /** Where unconfined commands are forked (Computer option `spawner`; default "helper"). */
  spawner?: "helper" | "inline";
  /** Helper processes forking commands (Computer option `spawnHelpers`; default 2). */
  spawnHelpers?: number;
  /** Structured logger (one JSON object per call); default stdout; false silences. */
  logger?: ComputerServerOptions["logger"];
  /** Environment to read AGENT_COMPUTER_* from (default process.env). */
  env?: NodeJS.ProcessEnv;
}

export interface RunningNode {
  /** Base URL without token. */
  readonly url: string;
  /** The URL to open in a browser (carries the token once). */
  readonly loginUrl: string;
  readonly token: string | null;
  /** This node's id ("local" on a single node). */
  readonly nodeId: string;
  /** True when the node joined a cluster (redis:// event log). */
  readonly clustered: boolean;
  readonly server: ComputerServer;
  /** The sandbox every execution is spawned through. */
  readonly sandbox: Sandbox;
  /** What is confined and enforced (the same object GET /v1/info shows). */
  readonly confinement: ConfinementInfo;
  /** The startup line about confinement (a loud warning when `auto` could not confine). */
  readonly confinementLine: string;
  /** Graceful stop: server first, then the cluster. Idempotent. */
  close(): Promise<void>;
}

/** Starts a node and resolves once it is listening. */
export async function startNode(options: NodeOptions = {}): Promise<RunningNode> {
  const env = options.env ?? process.env;
  const workspace = path.resolve(options.workspace ?? DEFAULT_WORKSPACE);
  mkdirSync(workspace, { recursive: true });
  const logger = options.logger;
  const emit = typeof logger === "function" ? logger : undefined;
  const eventLogSpec = options.eventLog ?? env[ENV.eventLog] ?? DEFAULT_EVENT_LOG;
  const { sandbox, mode, why } = await openNodeSandbox(workspace, options, eventLogSpec, env);
  const confinement = confinementInfo(sandbox, mode, why);
  const cluster = await openServeCluster({
    eventLog: eventLogSpec,
    env,
    ...(options.nodeId !== undefined ? { nodeId: options.nodeId } : {}),
    ...(options.logMaxBytes !== undefined ? { logMaxBytes: options.logMaxBytes } : {}),
    ...(options.retentionMs !== undefined ? { retentionMs: options.retentionMs } : {}),
    ...(emit ? { logger: (event, fields) => emit({ msg: event, ...fields }) } : {}),
  }).catch(async (err: unknown) => {
    await sandbox.dispose().catch(() => {});
    throw new ComputerError(
      "EUNAVAILABLE",
      `cannot join the cluster: ${(err as Error)?.message ?? String(err)}`,
      { cause: err },
    );
  });
  const server = createComputerServer({
    workspace,
    host: options.host ?? DEFAULT_HOST,
    port: options.port ?? DEFAULT_PORT,
    token: options.token === undefined ? (env[ENV.token] ?? undefined) : options.token,
    ...(options.allowedHosts?.length ? { allowedHosts: options.allowedHosts } : {}),
    ...(options.corsOrigins ? { corsOrigins: options.corsOrigins } : {}),
    ...(logger !== undefined ? { logger } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
    ...(sandbox.identity ? { adopt: (abs: string) => sandbox.adopt(abs) } : {}),
    computer: (observer) => {
      const computer = new Computer({
        workspace,
        eventLog: cluster.eventLog,
        nodeId: cluster.nodeId,
        remote: cluster.remote,
        observer,
        sandbox,
        ...(options.maxConcurrent !== undefined ? { maxConcurrent: options.maxConcurrent } : {}),
        ...(options.logMaxBytes !== undefined ? { logMaxBytes: options.logMaxBytes } : {}),
        ...(options.retentionMs !== undefined ? { retentionMs: options.retentionMs } : {}),
        ...(options.spill ? { spill: options.spill } : {}),
        ...(options.heartbeatMs !== undefined ? { heartbeatMs: options.heartbeatMs } : {}),
        ...(options.spawner !== undefined ? { spawner: options.spawner } : {}),
        ...(options.spawnHelpers !== undefined ? { spawnHelpers: options.spawnHelpers } : {}),
      });
      cluster.attach(computer);
      return computer;
    },
  });
  if (cluster.cluster) registerClusterRoutes(server.router, cluster.cluster);
  registerInfoRoute(server.router, () => ({
    nodeId: cluster.nodeId,
    clustered: cluster.cluster !== undefined,
    confinement,
  }));
  try {
    await server.listen();
  } catch (err) {
    await server.close().catch(() => {});
    await cluster.close().catch(() => {});
    await sandbox.dispose().catch(() => {});
    throw err;
  }
  cluster.advertise({ url: server.url });
  if (cluster.cluster) emit?.({ msg: "cluster", node: cluster.nodeId });
  let closing: Promise<void> | undefined;
  return {
    url: server.url,
    loginUrl: server.loginUrl,
    token: server.token,
    nodeId: cluster.nodeId,
    clustered: cluster.cluster !== undefined,
    server,
    sandbox,
    confinement,
    confinementLine: confinementLine(sandbox, mode, why),
    close() {
      closing ??= server
        .close()
        .then(() => cluster.close())
        .finally(() => sandbox.dispose());
      return closing;
    },
  };
}
