// Stream positions. A logged event's position is its `seq` (1, 2, 3, … with no
// gaps); a reader asks for everything `after` a seq (0 = from the start) or for
// the "tail" (only what comes next). These two functions are the only places
// that parse an `after` and decide whether a log can serve it, so the HTTP
// query, Last-Event-ID, a WebSocket message and the in-process API accept the
// same values and refuse with the same codes and messages.

import { ComputerError } from "./errors.js";

/** Where a reader starts: after this seq, or at the tail. */
export type After = number | "tail";

/**
 * Parses an `after` from a query string, a header or a JSON message. Absent
 * (undefined, null, "") means 0. `where` names the field in the error.
 */
export function parseAfter(raw: unknown, where = "after"): After {
  if (raw === undefined || raw === null || raw === "") return 0;
  if (raw === "tail") return "tail";
  if (typeof raw === "number" && Number.isSafeInteger(raw) && raw >= 0) return raw;
  if (typeof raw === "string" && /^\d{1,15}$/.test(raw)) return Number(raw);
  throw new ComputerError("EINVAL", `${where} must be a non-negative integer or "tail"`);
}

/** What a log knows about one execution's positions. */
export interface LogBounds {
  /** Last seq assigned (0 before the first event): a reader cannot have seen more. */
  lastSeq: number;
  /** Earliest seq still retained (1 when nothing was dropped). */
  earliestSeq: number;
}

/**
 * Checks that a log can serve a reader starting after `after` and returns
 * the seq the reader starts after (the tail resolves to `lastSeq`). Throws
 * EINVAL for a position past the last seq (no reader can have seen it), and
 * ELOG_TRUNCATED (with `earliestSeq`) when events after `after` were dropped.
 */
export function resolveAfter(id: string, after: After, bounds: LogBounds): number {
  if (after === "tail") return bounds.lastSeq;
  if (after > bounds.lastSeq) {
    throw new ComputerError("EINVAL", `after ${after} is beyond the last seq ${bounds.lastSeq}`);
  }
  if (after + 1 < bounds.earliestSeq) {
    throw new ComputerError(
      "ELOG_TRUNCATED",
      `events of ${id} after seq ${after} were dropped; the earliest retained seq is ${bounds.earliestSeq}`,
      { earliestSeq: bounds.earliestSeq },
    );
  }
  return after;
}
