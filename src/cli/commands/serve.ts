// `agent-computer serve`: flags → startNode(), one line saying what is
// confined (a loud warning when it is not), one URL line with the token,
// JSON log lines, and a graceful stop on SIGINT/SIGTERM (a second signal
// forces the exit). The server code is imported lazily so that client
// commands start fast (no SQLite, no ws, no prom-client).

import { type Command, Option } from "commander";
import {
  DEFAULT_EVENT_LOG,
  DEFAULT_HOST,
  DEFAULT_PORT,
  DEFAULT_WORKSPACE,
  ENV,
} from "../../host/defaults.js";
import { MAX_SPAWN_HELPERS } from "../../runtime/spawner.js";
import { act, CliError, collectList, describeError, EXIT_ERROR, intOption } from "../options.js";
import { flushAndExit } from "../output.js";
import { addConfineFlags, type ConfineFlags, confineOptions } from "./confine-flags.js";

export function registerServe(program: Command): void {
  const cmd = program
    .command("serve")
    .description("run the server (HTTP + SSE + WebSocket API, dashboard)")
    .option("--host <host>", "interface to bind (loopback by default)", DEFAULT_HOST)
    .option("--port <port>", "port (0 picks a free one)", intOption("--port"), DEFAULT_PORT)
    .option("--workspace <dir>", "workspace folder (created if missing)", DEFAULT_WORKSPACE)
    .option(
      "--log <spec>",
      `event log: "memory", "sqlite:PATH", or "redis://HOST:PORT" for cluster mode (env ${ENV.eventLog})`,
      process.env[ENV.eventLog] || DEFAULT_EVENT_LOG,
    )
    .option(
      "--node-id <name>",
      `this node's id in cluster mode (env ${ENV.nodeId}; default: host name)`,
    )
    .option("--token <token>", `bearer token (env ${ENV.token}; generated if unset)`)
    .option(
      "--max-concurrent <n>",
      "running executions at once (then 429 ELIMIT)",
      intOption("--max-concurrent", 1),
    )
    .option(
      "--log-max-bytes <n>",
      "per-execution event log ring size",
      intOption("--log-max-bytes", 1024),
    )
    .option("--retention-ms <n>", "keep finished executions this long", intOption("--retention-ms"))
    .option(
      "--spill-max-bytes <n>",
      "memory log: disk kept per execution beyond the ring (default 1 GiB; 0: no spill)",
      intOption("--spill-max-bytes"),
    )
    .option(
      "--spill-total-bytes <n>",
      "memory log: disk kept for all executions together (default 8 GiB)",
      intOption("--spill-total-bytes"),
    )
    .option("--spill-dir <dir>", "memory log: where spill segments go (default: the temp dir)")
    .option(
      "--heartbeat-ms <n>",
      "heartbeat interval for live streams (0: off)",
      intOption("--heartbeat-ms"),
    )
    .option("--max-body-bytes <n>", "max JSON request body", intOption("--max-body-bytes", 1024))
    .option(
      "--max-file-bytes <n>",
      "max upload through the files API",
      intOption("--max-file-bytes", 1),
    )
    .option(
      "--allowed-host <name>",
      "extra Host name to accept (repeatable; * for any)",
      collectList,
      [],
    )
    .option(
      "--cors-origin <origin>",
      "foreign origin allowed to call the API (repeatable)",
      collectList,
      [],
    )
    .addOption(
      new Option(
        "--spawner <mode>",
        "where unconfined commands are forked: helper (a small helper process, default) or inline",
      ).choices(["helper", "inline"]),
    )
    .option(
      "--spawn-helpers <n>",
      "helper processes forking commands with --spawner helper (default 2, at most 16)",
      intOption("--spawn-helpers", 1, MAX_SPAWN_HELPERS),
    )
    .option("--quiet", "no per-request log lines");
  addConfineFlags(cmd).action(act(serve));
}

interface ServeFlags extends ConfineFlags {
  host: string;
  port: number;
  workspace: string;
  log: string;
  nodeId?: string;
  token?: string;
  maxConcurrent?: number;
  logMaxBytes?: number;
  retentionMs?: number;
  spillMaxBytes?: number;
  spillTotalBytes?: number;
  spillDir?: string;
  heartbeatMs?: number;
  maxBodyBytes?: number;
  maxFileBytes?: number;
  allowedHost: string[];
  corsOrigin: string[];
  spawner?: "helper" | "inline";
  spawnHelpers?: number;
  quiet?: boolean;
}

async function serve(o: ServeFlags): Promise<never> {
  const confine = confineOptions(o);
  const { startNode } = await import("../../host/start-node.js");
  const logger = (entry: Record<string, unknown>) => {
    if (o.quiet && entry.msg === "request") return;
    process.stdout.write(`${JSON.stringify({ ts: new Date().toISOString(), ...entry })}\n`);
  };
  const node = await startNode({
    workspace: o.workspace,
    host: o.host,
    port: o.port,
    eventLog: o.log,
    nodeId: o.nodeId,
    ...(o.token !== undefined ? { token: o.token } : {}),
    allowedHosts: o.allowedHost,
    corsOrigins: o.corsOrigin,
    logger,
    limits: {
      ...(o.maxBodyBytes !== undefined ? { maxJsonBytes: o.maxBodyBytes } : {}),
      ...(o.maxFileBytes !== undefined ? { maxFileBytes: o.maxFileBytes } : {}),
    },
    maxConcurrent: o.maxConcurrent,
    logMaxBytes: o.logMaxBytes,
    retentionMs: o.retentionMs,
    spill: {
      ...(o.spillMaxBytes !== undefined ? { spillMaxBytes: o.spillMaxBytes } : {}),
      ...(o.spillTotalBytes !== undefined ? { spillTotalBytes: o.spillTotalBytes } : {}),
      ...(o.spillDir !== undefined ? { spillDir: o.spillDir } : {}),
    },
    heartbeatMs: o.heartbeatMs,
    ...(o.spawner !== undefined ? { spawner: o.spawner } : {}),
    ...(o.spawnHelpers !== undefined ? { spawnHelpers: o.spawnHelpers } : {}),
    ...confine,
  }).catch((err: unknown) => {
    const code = (err as { code?: string }).code;
    if (code === "EADDRINUSE") {
      throw new CliError(`port ${o.port} is in use (try --port 0 or another port)`);
    }
    if (code === "EUNAVAILABLE" || code === "EINVAL") throw new CliError((err as Error).message);
    throw new CliError(`cannot listen on ${o.host}:${o.port}: ${(err as Error).message}`);
  });
  if (node.confinement.mode === "auto" && !node.confinement.confined) {
    process.stderr.write(`${node.confinementLine}\n`);
  } else process.stdout.write(`${node.confinementLine}\n`);
  process.stdout.write(`agent-computer listening: ${node.loginUrl}\n`);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      process.stderr.write("agent-computer: forced exit\n");
      process.exit(EXIT_ERROR);
    }
    stopping = true;
    logger({ msg: "shutdown", signal });
    node.close().then(
      () => {
        logger({ msg: "stopped" });
        flushAndExit(0);
      },
      (err) => {
        process.stderr.write(`agent-computer: shutdown failed: ${describeError(err)}\n`);
        flushAndExit(EXIT_ERROR);
      },
    );
  };
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGTERM", () => stop("SIGTERM"));
  // Keep running until a signal.
  return new Promise<never>(() => {});
}
