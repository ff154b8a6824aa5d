// Errors -> HTTP. Every failure the server reports is JSON
// `{ "error": { "code", "message", ...extra } }` with a status derived from the
// error's `code`, so clients branch on codes, never on text, and no input can
// turn into a bare 500 page. Only an error without a known code is a 500, and
// its message is not echoed (it may carry internals); it is logged instead.

import type { ServerResponse } from "node:http";
import {
  ComputerError,
  codeOf,
  ERROR_STATUS,
  type ErrorCode,
  isErrorCode,
  toErrorCode,
} from "../wire/errors.js";

/** A ComputerError that also fixes the HTTP status (e.g. 413 and 429 both carry `ELIMIT`). */
export class HttpError extends ComputerError {
  constructor(
    status: number,
    code: ErrorCode,
    message: string,
    extra?: { earliestSeq?: number; cause?: unknown },
  ) {
    super(code, message, { ...extra, status });
  }
}

/** Node's fs error codes that may surface from the files API, mapped to ours. */
const FS_CODES: Record<string, string> = {
  ENOENT: "ENOENT",
  EISDIR: "EISDIR",
  ENOTDIR: "ENOTDIR",
  EEXIST: "EEXIST",
  ENOTEMPTY: "ENOTEMPTY",
  EACCES: "EFORBIDDEN",
  EPERM: "EFORBIDDEN",
  ELOOP: "EFORBIDDEN",
  ENAMETOOLONG: "EINVAL",
  EFBIG: "ETOOLARGE",
  ENOSPC: "ELIMIT",
};

/**
 * 410 ELOG_TRUNCATED when a resume after `after` would miss events the log has
 * already dropped. One check for every transport (HTTP events, WebSocket).
 */
export function assertRetained(after: number, info: { earliestSeq: number }): void {
  if (after + 1 < info.earliestSeq && info.earliestSeq > 1) {
    throw new HttpError(
      410,
      "ELOG_TRUNCATED",
      `events after ${after} were dropped; the earliest retained seq is ${info.earliestSeq}`,
      { earliestSeq: info.earliestSeq },
    );
  }
}

export function statusForError(err: unknown): number {
  if (err instanceof HttpError) return err.status;
  const code = codeOf(err);
  return code === undefined ? 500 : ERROR_STATUS[code];
}

/** A code on a thrown value, ours or Node's (fs errors carry theirs). */
function rawCodeOf(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === "string" ? code : undefined;
}

/** The JSON body for an error: code, message, and `earliestSeq` for ELOG_TRUNCATED. */
export function errorBody(err: unknown): {
  error: { code: string; message: string; earliestSeq?: number };
} {
  const code = rawCodeOf(err);
  if (err instanceof ComputerError || isErrorCode(code)) {
    const e = err as { code: string; message?: string; earliestSeq?: number };
    const body: { code: string; message: string; earliestSeq?: number } = {
      code: e.code,
      message: String(e.message ?? e.code),
    };
    if (typeof e.earliestSeq === "number") body.earliestSeq = e.earliestSeq;
    return { error: body };
  }
  if (code !== undefined && FS_CODES[code]) {
    return { error: { code: FS_CODES[code], message: fsMessage(FS_CODES[code]) } };
  }
  return { error: { code: "EINTERNAL", message: "internal error" } };
}

function fsMessage(code: string): string {
  switch (code) {
    case "ENOENT":
      return "no such file or directory";
    case "EISDIR":
      return "is a directory";
    case "ENOTDIR":
      return "not a directory";
    case "EEXIST":
      return "already exists";
    case "ENOTEMPTY":
      return "directory not empty";
    case "EFORBIDDEN":
      return "permission denied";
    default:
      return code;
  }
}

/** Normalises any thrown value to a ComputerError with the status it will be sent with. */
export function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  const body = errorBody(err).error;
  const code = toErrorCode(body.code);
  const status = err instanceof ComputerError ? err.status : ERROR_STATUS[code];
  return new HttpError(status, code, body.message, {
    earliestSeq: body.earliestSeq,
    cause: err,
  });
}

/** Sends `err` as JSON. If headers already went out, the response is destroyed instead. */
export function sendError(
  res: ServerResponse,
  err: unknown,
  headers?: Record<string, string>,
): void {
  const e = toHttpError(err);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(errorBody(e));
  res.statusCode = e.status;
  res.setHeader("content-type", "application/json; charset=utf-8");
  res.setHeader("content-length", Buffer.byteLength(body));
  res.setHeader("cache-control", "no-store");
  if (headers) for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  if (e.status === 401) res.setHeader("www-authenticate", 'Bearer realm="agent-computer"');
  res.end(body);
}

/** Sends a JSON value with a status (default 200). */
export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.statusCode = status;
  res.setHeader("content-type", "application/json; charset=utf-8");
  res.setHeader("content-length", Buffer.byteLength(body));
  res.setHeader("cache-control", "no-store");
  res.end(body);
}
