// Connections to Redis for the event log and cluster mode, and what their
// failures mean as ComputerErrors. One factory so every connection (commands,
// pub/sub, the cluster's control reader) has the same outage behaviour, and
// one error mapping so a script's refusal reaches the caller with the same
// code the memory and SQLite logs use.

import { Redis, type RedisOptions } from "ioredis";
import { ComputerError, toErrorCode } from "../../wire/errors.js";

/** Where a log connects: `redis://[user:pass@]host:port[/db]` (also `rediss://`), or ioredis options. */
export type RedisSpec = string | RedisOptions;

export const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379";

/** Connection options tuned for a log: never give up on a command, reconnect fast. */
function connectionOptions(): RedisOptions {
  return {
    // Commands wait through an outage instead of failing after N retries: an
    // append that waits is backpressure, an append that fails is data loss.
    maxRetriesPerRequest: null,
    enableOfflineQueue: true,
    // Off on purpose: ioredis' auto-pipelining keeps one batch in flight per
    // connection, so with many concurrent followers every call waits for the
    // previous batch's round trip (measured: p50 30 ms instead of 2.5 ms with
    // 10 cross-node followers). The log pipelines by writing each command at
    // once instead (see "Writes" in log.ts).
    enableAutoPipelining: false,
    retryStrategy: (times) => Math.min(50 * times, 500),
    lazyConnect: false,
  };
}

/** How long an API call waits for a dropped connection to come back before EUNAVAILABLE. */
export const UNAVAILABLE_WAIT_MS = 1000;

/**
 * Undefined when `client` can serve a command now (or becomes ready within
 * `waitMs`), else why not. Commands on a log connection wait through an
 * outage (appends must not be dropped); callers that answer a user (API
 * calls, /healthz) ask this first and fail fast with `EUNAVAILABLE` instead.
 */
export async function unavailable(
  client: Redis,
  waitMs = UNAVAILABLE_WAIT_MS,
): Promise<string | undefined> {
  if (client.status === "ready") return undefined;
  if (client.status === "end") return "the connection to redis is closed";
  if (waitMs > 0) {
    const ready = await new Promise<boolean>((resolve) => {
      const onReady = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        client.off("ready", onReady);
        resolve(false);
      }, waitMs);
      client.once("ready", onReady);
    });
    if (ready) return undefined;
  }
  // The driver's error text (addresses, raw replies) is not for API answers.
  return `redis is unreachable (connection ${client.status})`;
}

/**
 * A new connection named `name` (visible in CLIENT LIST). Errors surface on
 * the commands; the emitter gets a no-op listener so a connection drop cannot
 * crash the process.
 */
export function createRedisClient(spec: RedisSpec, name: string): Redis {
  const base = { ...connectionOptions(), connectionName: name };
  const client = typeof spec === "string" ? new Redis(spec, base) : new Redis({ ...base, ...spec });
  client.on("error", () => {});
  return client;
}

/**
 * A Redis failure as a ComputerError. Scripts refuse with `error_reply("CODE
 * message")`: ENOENT, EINVAL and EEXEC_BUSY keep their code, ELOG_TRUNCATED
 * carries the earliest retained seq; an OOM refusal (maxmemory) is
 * EUNAVAILABLE; a closed connection is ECLOSED, anything else EINTERNAL.
 */
export function toComputerError(err: unknown, id?: string): ComputerError {
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
  if (/^OOM\b/.test(msg)) {
    // maxmemory reached with a no-eviction policy: Redis refuses writes until
    // memory is freed. Retryable, and its reply text is not for API answers.
    return new ComputerError("EUNAVAILABLE", "the event log (redis) is out of memory", {
      cause: err,
    });
  }
  if (/Connection is closed|closed/i.test(msg)) {
    return new ComputerError("ECLOSED", `redis connection closed: ${msg}`, { cause: err });
  }
  return new ComputerError("EINTERNAL", `redis: ${msg}`, { cause: err });
}
