// Query and header values the relay transports share: where a page resumes
// (`after`, `Last-Event-ID`) and how long a long poll may wait. Positions go
// through the project's one position parser (wire/position.ts), so they
// accept exactly what the exec API accepts.

import { ComputerError } from "../../wire/errors.js";
import { type After, parseAfter } from "../../wire/position.js";

/**
 * A command stream's start: after this seq (absent = 0). The "tail" that
 * event logs accept is refused here: a page always needs the replay.
 */
export function parseChannelAfter(raw: string | null | undefined, where = "after"): number {
  let after: After | undefined;
  try {
    after = parseAfter(raw, where);
  } catch {
    // refused below, with a message that does not offer "tail"
  }
  if (typeof after !== "number")
    throw new ComputerError("EINVAL", `${where} must be a non-negative integer`);
  return after;
}

/** A long-poll wait in ms (absent = 0: answer at once), capped at `max`. */
export function parseWait(value: string | null, max: number): number {
  if (value === null || value === "") return 0;
  if (!/^\d{1,9}$/.test(value))
    throw new ComputerError("EINVAL", "wait must be milliseconds (integer)");
  return Math.min(Number(value), max);
}
