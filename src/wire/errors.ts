// One error type for the whole project. Every failure carries a machine-readable
// `code` from one closed list, so callers branch on codes, never on text, and
// the server maps a code to an HTTP status through one table. Every error class
// in the project extends ComputerError; a subclass only adds context (the line
// of a malformed frame, for example), never a second way to say what failed.
//
// The list is closed on purpose: a code that is not here cannot be thrown, so
// docs/api.md's error table and this file cannot drift apart. A code received
// from a peer that this version does not know (a newer server) is kept as the
// message and surfaces as `EINTERNAL` (see `toErrorCode`).

/** Every error code, with the HTTP status it is sent with unless a throw site says otherwise. */
export const ERROR_STATUS = {
  /** Bad input: a malformed request, frame, path or option. */
  EINVAL: 400,
  /** A JSON document could not be parsed (A@UI stream payloads). */
  EJSON: 400,
  /** Bytes after the end of an A@UI stream. */
  ETRAILING: 400,
  /** A path names a directory where a file was expected. */
  EISDIR: 400,
  /** A path goes through something that is not a directory. */
  ENOTDIR: 400,
  /** No credentials, or wrong ones. */
  EUNAUTHORIZED: 401,
  /** Credentials are fine but the request is not allowed (Origin, Host, confinement). */
  EFORBIDDEN: 403,
  /** No such execution, file, channel or route. */
  ENOENT: 404,
  /** The route exists but not with this method. */
  EMETHOD: 405,
  /** The client accepts no format the route can answer with. */
  ENOTACCEPTABLE: 406,
  /** An execution with this id exists already. */
  EEXEC_BUSY: 409,
  /** A file exists already. */
  EEXIST: 409,
  /** A directory is not empty. */
  ENOTEMPTY: 409,
  /** The thing written to is closed (stdin, a channel, a server shutting down). */
  ECLOSED: 409,
  /** Events after the requested position were dropped; carries `earliestSeq`. */
  ELOG_TRUNCATED: 410,
  /** A body, line or file is over its size limit. */
  ETOOLARGE: 413,
  /** The request's Content-Type is not one the route takes. */
  EUNSUPPORTED_MEDIA: 415,
  /** A count or rate limit was hit; retry later. */
  ELIMIT: 429,
  /** A subscriber read too slowly and was cut off; resume from its last seq. */
  ELAGGING: 429,
  /** The server or its event-log backend cannot serve now; retry later. */
  EUNAVAILABLE: 503,
  /** The server failed; the message says no more than is safe to say. */
  EINTERNAL: 500,
  /** The client could not reach the server, or the connection broke. */
  ENETWORK: 502,
  /** A resumed stream skipped a seq: data was lost between two connections. */
  EGAP: 502,
  /** The caller aborted (AbortSignal). */
  EABORTED: 499,
  /** The platform lacks what this call needs (no WebSocket implementation, …). */
  EUNSUPPORTED: 501,
  /** A@UI widget runtime: a component name that is not in the manifest. */
  EUNKNOWN_COMPONENT: 400,
  /** A@UI widget runtime: a widget id that is rendered already. */
  EDUPLICATE: 409,
  /** A@UI widget runtime: a component's mount failed. */
  EMOUNT: 500,
  /** A@UI widget runtime: a component's update failed. */
  EUPDATE: 500,
  /** A@UI widget runtime: a component's destroy failed. */
  EDESTROY: 500,
  /** A@UI widget runtime: a command for a widget in the wrong state. */
  ELIFECYCLE: 409,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** True when `value` is one of the project's error codes. */
export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === "string" && Object.hasOwn(ERROR_STATUS, value);
}

/** A peer's code as ours: known codes pass, anything else becomes `EINTERNAL`. */
export function toErrorCode(value: unknown): ErrorCode {
  return isErrorCode(value) ? value : "EINTERNAL";
}

export interface ComputerErrorExtra {
  /** Earliest retained seq, with `ELOG_TRUNCATED`. */
  earliestSeq?: number;
  /** HTTP status, when it is not the code's usual one (received, or to be sent). */
  status?: number;
  cause?: unknown;
}

export class ComputerError extends Error {
  readonly code: ErrorCode;
  /** Earliest retained seq, set with `ELOG_TRUNCATED`. */
  readonly earliestSeq?: number;
  /** The HTTP status this error was received with, or is to be sent with. */
  readonly status: number;

  constructor(code: ErrorCode, message: string, extra?: ComputerErrorExtra) {
    super(message, extra?.cause === undefined ? undefined : { cause: extra.cause });
    this.name = "ComputerError";
    this.code = code;
    this.status = extra?.status ?? ERROR_STATUS[code] ?? 500;
    if (extra?.earliestSeq !== undefined) this.earliestSeq = extra.earliestSeq;
  }
}

/** True when `err` is an Error carrying the given code (works across realms and subclasses). */
export function hasCode(err: unknown, code: ErrorCode): boolean {
  return typeof err === "object" && err !== null && (err as { code?: unknown }).code === code;
}

/** The code on any thrown value, when it is one of ours. */
export function codeOf(err: unknown): ErrorCode | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  return isErrorCode(code) ? code : undefined;
}

/** Code for an HTTP error answer whose body is not our JSON (a proxy's page, say). */
const CODE_BY_STATUS: Record<number, ErrorCode> = {
  400: "EINVAL",
  401: "EUNAUTHORIZED",
  403: "EFORBIDDEN",
  404: "ENOENT",
  405: "EMETHOD",
  406: "ENOTACCEPTABLE",
  409: "ECLOSED",
  410: "ELOG_TRUNCATED",
  413: "ETOOLARGE",
  415: "EUNSUPPORTED_MEDIA",
  429: "ELIMIT",
  503: "EUNAVAILABLE",
};

/**
 * The one parser of an error answer (`{ error: { code, message, earliestSeq? } }`)
 * for every client in the project: SDK, UI client, A@UI pages. The received
 * status is kept on the error. A body that is not ours keeps a code derived
 * from the status; other 5xx answers (a proxy between us) read as ENETWORK,
 * which clients retry.
 */
export async function errorFromResponse(res: Response): Promise<ComputerError> {
  let code: ErrorCode = CODE_BY_STATUS[res.status] ?? (res.status >= 500 ? "ENETWORK" : "EINVAL");
  let message = `HTTP ${res.status}`;
  let earliestSeq: number | undefined;
  try {
    const body = (await res.json()) as {
      error?: { code?: unknown; message?: unknown; earliestSeq?: unknown };
    };
    const e = body?.error;
    if (e && typeof e === "object") {
      const remote = typeof e.code === "string" ? e.code : undefined;
      if (remote !== undefined) code = toErrorCode(remote);
      if (typeof e.message === "string") message = e.message;
      // A code this version does not know stays visible in the message.
      if (remote !== undefined && remote !== code) message = `${remote}: ${message}`;
      if (typeof e.earliestSeq === "number") earliestSeq = e.earliestSeq;
    }
  } catch {
    // not our JSON: keep the status-derived code
  }
  return new ComputerError(code, message, { earliestSeq, status: res.status });
}
