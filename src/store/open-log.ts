// One place that turns a log specification into an EventLog, so the runtime,
// the server and the CLI accept the same spellings: "memory", "sqlite:PATH",
// { sqlite: PATH }, or a ready EventLog object (passed through untouched).
// Backends with native or network dependencies are imported lazily, so a
// memory-only user never loads better-sqlite3 (or ioredis).

import { ComputerError } from "../wire/errors.js";
import type { EventLogOptions } from "./common.js";
import { MemoryEventLog } from "./memory-log.js";
import { isRedisUrl, parseRedisUrl } from "./redis/url.js";
import type { EventLog } from "./types.js";

export type EventLogSpec = "memory" | `sqlite:${string}` | { sqlite: string } | EventLog | string;

export function isEventLog(x: unknown): x is EventLog {
  return (
    typeof x === "object" &&
    x !== null &&
    typeof (x as EventLog).append === "function" &&
    typeof (x as EventLog).read === "function" &&
    typeof (x as EventLog).waitFor === "function"
  );
}

export async function openEventLog(
  spec: EventLogSpec = "memory",
  options: EventLogOptions = {},
): Promise<EventLog> {
  if (isEventLog(spec)) return spec;
  if (spec === "memory") return new MemoryEventLog(options);
  let sqlitePath: string | undefined;
  if (typeof spec === "string" && spec.startsWith("sqlite:")) sqlitePath = spec.slice(7);
  else if (typeof spec === "object" && spec !== null && typeof spec.sqlite === "string") {
    sqlitePath = spec.sqlite;
  }
  if (typeof spec === "string" && isRedisUrl(spec)) {
    // The log shared by the nodes of a cluster (docs/operations.md).
    const { RedisEventLog } = await import("./redis/log.js");
    return new RedisEventLog({ ...options, ...parseRedisUrl(spec) });
  }
  if (sqlitePath !== undefined) {
    if (sqlitePath === "") throw new ComputerError("EINVAL", "sqlite log needs a file path");
    const { SqliteEventLog } = await import("./sqlite-log.js");
    return new SqliteEventLog(sqlitePath, options);
  }
  throw new ComputerError(
    "EINVAL",
    `unknown event log ${JSON.stringify(spec)}: use "memory", "sqlite:PATH", "redis://HOST:PORT" or an EventLog`,
  );
}
