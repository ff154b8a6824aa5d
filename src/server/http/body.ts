// Request bodies with hard limits, and strict validation of JSON bodies.
// Every route reads through these so an oversize body is a 413 (stopped at
// the limit, not buffered to the end), malformed JSON a 400, and a field the
// route does not know a 400 naming it: a typo such as `timeout` for
// `timeoutMs` must not be silently ignored.

import type { IncomingMessage } from "node:http";
import { ComputerError } from "../../wire/errors.js";

/** Default cap for JSON bodies (1 MiB). */
const DEFAULT_JSON_LIMIT = 1024 * 1024;

/** Reads the whole body, failing with 413 `ETOOLARGE` past `limit` bytes. */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"]);
    if (Number.isFinite(declared) && declared > limit) {
      req.resume();
      reject(new ComputerError("ETOOLARGE", `body larger than ${limit} bytes`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    req.on("data", (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > limit) {
        done = true;
        chunks.length = 0;
        req.resume(); // keep draining so the 413 can be delivered
        reject(new ComputerError("ETOOLARGE", `body larger than ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (done) return;
      done = true;
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    });
    req.on("error", (err) => {
      if (done) return;
      done = true;
      reject(new ComputerError("EINVAL", `request body failed: ${err.message}`));
    });
  });
}

/**
 * Reads a JSON object body. Empty body -> `{}` when `allowEmpty`. The content
 * type must be JSON when given (a form post from a foreign page cannot smuggle a
 * "simple" request past CORS as text/plain).
 */
export async function readJsonBody(
  req: IncomingMessage,
  options: { limit?: number; allowEmpty?: boolean } = {},
): Promise<Record<string, unknown>> {
  const type = String(req.headers["content-type"] ?? "").toLowerCase();
  const buf = await readBody(req, options.limit ?? DEFAULT_JSON_LIMIT);
  if (buf.length === 0) {
    if (options.allowEmpty) return {};
    throw new ComputerError("EINVAL", "request body required (JSON object)");
  }
  if (type !== "" && !/^application\/(?:[\w.+-]+\+)?json\b/.test(type)) {
    throw new ComputerError("EUNSUPPORTED_MEDIA", "content-type must be application/json");
  }
  let value: unknown;
  try {
    value = JSON.parse(buf.toString("utf8"));
  } catch (err) {
    throw new ComputerError("EINVAL", `malformed JSON body: ${(err as Error).message}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ComputerError("EINVAL", "body must be a JSON object");
  }
  return value as Record<string, unknown>;
}

/** Rejects fields outside `allowed` with a 400 naming them. */
export function rejectUnknownFields(
  body: Record<string, unknown>,
  allowed: readonly string[],
): void {
  const extra = Object.keys(body).filter((k) => !allowed.includes(k));
  if (extra.length > 0) {
    throw new ComputerError("EINVAL", `unknown field(s): ${extra.join(", ")}`);
  }
}
