// One error type for the whole project: every failure carries a machine-readable
// `code` (WIRE.md / DESIGN.md error codes) so callers branch on codes, not text,
// and the server can map it to an HTTP status without guessing.

export type ErrorCode =
  | "ENOENT"
  | "EEXEC_BUSY"
  | "ELOG_TRUNCATED"
  | "EINVAL"
  | "EUNAUTHORIZED"
  | "EFORBIDDEN"
  | "ELIMIT"
  | "ELAGGING"
  | "ECLOSED"
  | "EABORTED"
  | "ENETWORK"
  | "EINTERNAL"
  | (string & {});

export class ComputerError extends Error {
  readonly code: ErrorCode;
  /** Earliest retained seq, set with `ELOG_TRUNCATED`. */
  readonly earliestSeq?: number;

  constructor(code: ErrorCode, message: string, extra?: { earliestSeq?: number; cause?: unknown }) {
    super(message, extra?.cause === undefined ? undefined : { cause: extra.cause });
    this.name = "ComputerError";
    this.code = code;
    if (extra?.earliestSeq !== undefined) this.earliestSeq = extra.earliestSeq;
  }
}

/** True when `err` is an Error carrying the given code (works across realms and subclasses). */
export function hasCode(err: unknown, code: ErrorCode): boolean {
  return typeof err === "object" && err !== null && (err as { code?: unknown }).code === code;
}
