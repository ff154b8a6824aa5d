// Errors -> HTTP. Every failure the server reports is JSON
// `{ "error": { "code", "message", "earliestSeq"? } }` with the status the
// error carries (ComputerError.status: its code's usual status from
// ERROR_STATUS, unless the throw site chose another), so clients branch on
// codes, never on text, and no input can turn into a bare 500 page. Only an
// error without a known code is a 500, and its message is not echoed (it may
// carry internals); the router logs it instead. After the first byte of an
// event stream the same mapping gives the in-band error frame.

import type { ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { ComputerError, isErrorCode, toErrorCode } from "../../wire/errors.js";
import type { ErrorFrame } from "../../wire/types.js";

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
      message: publicMessage(e.code, e.message),
    };
    if (typeof e.earliestSeq === "number") body.earliestSeq = e.earliestSeq;
    return { error: body };
  }
  if (code !== undefined && FS_CODES[code]) {
    return { error: { code: FS_CODES[code], message: fsMessage(FS_CODES[code]) } };
  }
  return { error: { code: "EINTERNAL", message: "internal error" } };
}

/**
 * The message a client may see. An EINTERNAL error wraps a failure of the
 * server or its backend (a Redis reply such as "OOM command not allowed", a
 * SQLite error, a path): its text is logged with the request id, never sent.
 */
function publicMessage(code: string, message: string | undefined): string {
  if (code === "EINTERNAL") return "internal error";
  return String(message ?? code);
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

/**
 * Normalises any thrown value to the ComputerError it will be sent as: ours
 * pass unchanged (with their status), fs errors get our code, anything else
 * becomes a 500 EINTERNAL that keeps the original as `cause`.
 */
export function toComputerError(err: unknown): ComputerError {
  if (err instanceof ComputerError) return err;
  const body = errorBody(err).error;
  return new ComputerError(toErrorCode(body.code), body.message, {
    earliestSeq: body.earliestSeq,
    cause: err,
  });
}

/** The in-band form of `err` on an event stream, for execution `id` (none: about the request). */
export function errorFrame(id: string | undefined, err: unknown): ErrorFrame {
  const e = toComputerError(err);
  const frame: ErrorFrame = {
    ...(id !== undefined ? { id } : {}),
    name: "error",
    code: e.code,
    message: publicMessage(e.code, e.message),
  };
  if (e.earliestSeq !== undefined) frame.earliestSeq = e.earliestSeq;
  return frame;
}

/** Sends `err` as JSON. If headers already went out, the response is destroyed instead. */
export function sendError(
  res: ServerResponse,
  err: unknown,
  headers?: Record<string, string>,
): void {
  const e = toComputerError(err);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(errorBody(e));
  res.statusCode = e.status;
  res.setHeader("content-type", "application/json; charset=utf-8");
  res.setHeader("content-length", Buffer.byteLength(body));
  res.setHeader("cache-control", "no-store");
  res.setHeader("x-content-type-options", "nosniff");
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
  res.setHeader("x-content-type-options", "nosniff");
  res.end(body);
}

/** Answers a failed upgrade with a plain HTTP error response on the raw socket, then closes it. */
export function rejectUpgrade(socket: Duplex, err: unknown): void {
  if (socket.destroyed) return;
  const e = toComputerError(err);
  const body = JSON.stringify(errorBody(e));
  socket.end(
    `HTTP/1.1 ${e.status} ${statusText(e.status)}\r\n` +
      "Connection: close\r\n" +
      "Content-Type: application/json; charset=utf-8\r\n" +
      "X-Content-Type-Options: nosniff\r\n" +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

function statusText(status: number): string {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}
