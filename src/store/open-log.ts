// One place that turns a log specification into an EventLog, so the runtime,
// the server and the CLI accept the same spellings: "memory", "sqlite:PATH",
// { sqlite: PATH }, or a ready EventLog object (passed through untouched).
// Backends with native or network dependencies are imported lazily, so a
// memory-only user never loads better-sqlite3 (or ioredis).

import { ComputerError } from "../wire/errors.js";
import type { EventLogOptions } from "./common.js";
import { MemoryEventLog } from "./memory-log.js";
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
  if (typeof spec === "string" && /^rediss?:\/\//.test(spec)) {
    // Shared log for cluster mode (H6). `?prefix=NAME` picks the key prefix.
    const { RedisEventLog } = await import("./redis-log.js");
    const u = new URL(spec);
    const prefix = u.searchParams.get("prefix") ?? undefined;
    u.searchParams.delete("prefix");
    return new RedisEventLog({ ...options, redis: u.toString(), prefix });
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
