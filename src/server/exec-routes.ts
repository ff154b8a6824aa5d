// The execution API over HTTP (docs/api.md): start, inspect, list, kill,
// stdin, dispose, result, and the event stream as exec-wire (NDJSON) or SSE.
//
// Both stream formats come from one code path (streamEvents + pumpEvents), so
// they cannot disagree: the difference is only the per-event encoder and how
// the end is announced (exec-wire: the exit frame then EOF; SSE: the exit event,
// then `event: end` / `data: [DONE]`). Failures before the first byte are JSON
// errors with a status (404, 410 with earliestSeq, ...); failures after it are
// an in-band error frame (exec-wire) or `event: error` (SSE), then the end.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { ExecHandle, ExecOptions, ExecSpec } from "../runtime/types.js";
import { encodeBase64 } from "../wire/base64.js";
import { hasCode } from "../wire/errors.js";
import { encodeErrorFrame } from "../wire/exec-wire/index.js";
import { formatSseEvent } from "../wire/sse.js";
import type { ErrorFrame } from "../wire/types.js";
import { readJsonBody, rejectUnknownFields } from "./body.js";
import type { ServerDeps } from "./deps.js";
import { openFrameEncoder, type StreamFormat } from "./encode-cache.js";
import { assertRetained, HttpError, sendJson, toHttpError } from "./http-errors.js";
import { type ByteSink, type Frame, pumpEvents } from "./pump.js";
import type { RouteContext, Router } from "./router.js";

export type { StreamFormat };

const EXEC_FIELDS = ["id", "command", "argv", "cwd", "env", "stdin", "timeoutMs", "encoding"];
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const SIGNAL_RE = /^SIG[A-Z0-9]{1,12}$/;

function bad(message: string): HttpError {
  return new HttpError(400, "EINVAL", message);
}

/** Validates a POST /v1/execs body into the runtime's (spec, options). Strict: unknown fields fail. */
export function parseExecBody(body: Record<string, unknown>): {
  spec: ExecSpec;
  options: ExecOptions;
} {
  rejectUnknownFields(body, EXEC_FIELDS);
  const { command, argv, cwd, env, stdin, timeoutMs, encoding, id } = body;
  let spec: ExecSpec;
  if (command !== undefined && argv !== undefined)
    throw bad("give either command or argv, not both");
  if (command !== undefined) {
    if (typeof command !== "string" || command.length === 0) {
      throw bad("command must be a non-empty string");
    }
    spec = { command };
  } else if (argv !== undefined) {
    if (
      !Array.isArray(argv) ||
      argv.length === 0 ||
      !argv.every((a) => typeof a === "string") ||
      (argv[0] as string).length === 0
    ) {
      throw bad("argv must be a non-empty array of strings");
    }
    spec = { argv: argv as string[] };
  } else {
    throw bad("command or argv is required");
  }
  const options: ExecOptions = {};
  if (id !== undefined) {
    if (typeof id !== "string" || !ID_RE.test(id)) {
      throw bad("id must match [A-Za-z0-9][A-Za-z0-9._:-]{0,127}");
    }
    options.id = id;
  }
  if (cwd !== undefined) {
    if (typeof cwd !== "string" || cwd.includes("\0")) throw bad("cwd must be a string");
    options.cwd = cwd;
  }
  if (env !== undefined) {
    if (typeof env !== "object" || env === null || Array.isArray(env)) {
      throw bad("env must be an object of strings");
    }
    for (const [k, v] of Object.entries(env)) {
      if (
        typeof v !== "string" ||
        k.length === 0 ||
        k.includes("=") ||
        k.includes("\0") ||
        v.includes("\0")
      ) {
        throw bad(`env.${k} must be a string (names without '=' or NUL)`);
      }
    }
    options.env = env as Record<string, string>;
  }
  if (stdin !== undefined) {
    if (typeof stdin === "string") options.stdin = stdin;
    else if (typeof stdin === "object" && stdin !== null && !Array.isArray(stdin)) {
      const s = stdin as Record<string, unknown>;
      if (Object.keys(s).length === 1 && s.pipe === true) options.stdin = "pipe";
      else if (Object.keys(s).length === 1 && typeof s.b64 === "string") {
        if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s.b64) || s.b64.length % 4 !== 0) {
          throw bad("stdin.b64 must be standard base64 with padding");
        }
        options.stdin = new Uint8Array(Buffer.from(s.b64, "base64"));
      } else throw bad('stdin must be a string, {"b64": "..."} or {"pipe": true}');
    } else throw bad('stdin must be a string, {"b64": "..."} or {"pipe": true}');
  }
  if (timeoutMs !== undefined) {
    if (typeof timeoutMs !== "number" || !Number.isInteger(timeoutMs) || timeoutMs <= 0) {
      throw bad("timeoutMs must be a positive integer");
    }
    options.timeoutMs = timeoutMs;
  }
  if (encoding !== undefined) {
    if (encoding !== "b64" && encoding !== "utf8") throw bad('encoding must be "b64" or "utf8"');
    options.encoding = encoding;
  }
  return { spec, options };
}

/** `after` from Last-Event-ID (wins: it is the client's latest truth) or `?after=N|tail`. */
export function parseAfter(req: IncomingMessage, url: URL): number | "tail" {
  const lastEventId = req.headers["last-event-id"];
  if (typeof lastEventId === "string" && lastEventId.trim() !== "") {
    const n = Number(lastEventId.trim());
    if (!Number.isSafeInteger(n) || n < 0)
      throw bad("Last-Event-ID must be a non-negative integer");
    return n;
  }
  const after = url.searchParams.get("after");
  if (after === null || after === "") return 0;
  if (after === "tail") return "tail";
  if (!/^\d{1,15}$/.test(after)) throw bad('after must be a non-negative integer or "tail"');
  return Number(after);
}

/** Content negotiation for event streams; `?format=` overrides Accept (for curl and EventSource). */
export function negotiateFormat(req: IncomingMessage, url: URL): StreamFormat {
  const q = url.searchParams.get("format");
  if (q === "sse") return "sse";
  if (q === "ndjson" || q === "jsonl") return "ndjson";
  if (q !== null) throw bad('format must be "ndjson" or "sse"');
  const accept = String(req.headers.accept ?? "").toLowerCase();
  if (
    accept === "" ||
    accept.includes("application/x-ndjson") ||
    accept.includes("application/jsonl")
  ) {
    return "ndjson";
  }
  if (accept.includes("text/event-stream")) return "sse";
  if (accept.includes("*/*") || accept.includes("application/*")) return "ndjson";
  throw new HttpError(
    406,
    "ENOTACCEPTABLE",
    "event streams are application/x-ndjson or text/event-stream",
  );
}

function errorFrameOf(id: string, err: unknown): ErrorFrame {
  const e = toHttpError(err);
  const frame: ErrorFrame = { id, name: "error", code: e.code, message: e.message };
  if (e.earliestSeq !== undefined) frame.earliestSeq = e.earliestSeq;
  return frame;
}

function writeFrame(res: ServerResponse, frame: Frame): boolean {
  return typeof frame === "string" ? res.write(frame, "latin1") : res.write(frame);
}

/** A ByteSink over an HTTP response: res.write() backpressure, 'close' ends it. */
export function responseSink(res: ServerResponse): ByteSink & { dispose(): void } {
  let closed = false;
  let waiters: (() => void)[] = [];
  const wake = () => {
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  const onClose = () => {
    closed = true;
    wake();
  };
  res.on("close", onClose);
  res.on("drain", wake);
  return {
    get closed() {
      return closed || res.destroyed;
    },
    write: (parts) => {
      // Text frames are ASCII (see Frame in pump.ts): latin1 is a plain copy.
      if (parts.length === 1) return writeFrame(res, parts[0]!);
      // cork + writes + uncork = one writev of all parts, without copying them together
      res.cork();
      let ok = true;
      for (const p of parts) ok = writeFrame(res, p);
      res.uncork();
      return ok;
    },
    drained: () =>
      closed || !res.writableNeedDrain
        ? Promise.resolve()
        : new Promise<void>((resolve) => waiters.push(resolve)),
    dispose: () => {
      res.off("close", onClose);
      res.off("drain", wake);
    },
  };
}

/**
 * Streams `handle`'s events after `after` into `res` in `format`. Checks
 * truncation up front so a resume from a dropped seq is a 410 with earliestSeq,
 * not a stream that errors at once.
 */
export async function streamEvents(
  deps: ServerDeps,
  req: IncomingMessage,
  res: ServerResponse,
  handle: ExecHandle,
  after: number | "tail",
  format: StreamFormat,
  extraHeaders: Record<string, string> = {},
  heartbeats = true,
): Promise<void> {
  if (deps.subscriptions.count >= deps.limits.maxSubscribers) {
    throw new HttpError(429, "ELIMIT", `too many subscribers (max ${deps.limits.maxSubscribers})`);
  }
  if (typeof after === "number") {
    const info = await handle.info();
    if (after > info.lastSeq && info.state !== "running") {
      throw bad(`after ${after} is beyond the last seq ${info.lastSeq}`);
    }
    assertRetained(after, info);
  }
  const ac = new AbortController();
  const stream = handle.events({
    after,
    heartbeats: heartbeats && deps.heartbeats,
    signal: ac.signal,
  });
  res.statusCode = 200;
  res.setHeader(
    "content-type",
    format === "sse" ? "text/event-stream; charset=utf-8" : "application/x-ndjson",
  );
  res.setHeader("cache-control", "no-store");
  res.setHeader("x-accel-buffering", "no"); // proxies: do not buffer a live stream
  res.setHeader("x-exec-id", handle.id);
  for (const [k, v] of Object.entries(extraHeaders)) res.setHeader(k, v);
  res.flushHeaders();
  // Latency over batching at the TCP layer: our own batching already merges frames.
  req.socket.setNoDelay(true);
  const sink = responseSink(res);
  const transport = format;
  deps.subscriptions.count++;
  deps.metrics.subscribers.inc({ transport });
  const onClose = () => ac.abort();
  res.once("close", onClose);
  const encoder = openFrameEncoder(format, handle.id);
  try {
    if (format === "sse") res.write("retry: 1000\n\n");
    const end = await pumpEvents(stream, sink, {
      encode: encoder.encode,
      onBytes: (n) => deps.metrics.bytesStreamed.inc({ transport }, n),
    });
    if (end.kind === "closed" || sink.closed) return;
    if (end.kind === "exit" || end.kind === "eof") {
      // eof without exit: nothing more will come (a "tail" of a finished
      // execution, or it was disposed). SSE still says end so an EventSource
      // does not reconnect forever; exec-wire clients check the record.
      if (format === "sse") res.write("event: end\ndata: [DONE]\n\n");
    } else {
      const frame = errorFrameOf(handle.id, end.error);
      deps.metrics.errors.inc({ code: frame.code });
      if (format === "sse") {
        res.write(formatSseEvent({ event: "error", data: JSON.stringify(frame) }));
      } else {
        res.write(encodeErrorFrame(frame));
      }
    }
    res.end();
  } finally {
    encoder.close();
    res.off("close", onClose);
    sink.dispose();
    deps.subscriptions.count--;
    deps.metrics.subscribers.dec({ transport });
  }
}

function recordJson(rec: unknown): unknown {
  return rec;
}

async function getHandle(deps: ServerDeps, id: string): Promise<ExecHandle> {
  return deps.computer.get(id);
}

function refuseWhenClosing(deps: ServerDeps): void {
  if (deps.isClosing()) throw new HttpError(503, "EUNAVAILABLE", "server is shutting down");
}

/** Registers /v1/execs routes on `router`. */
export function registerExecRoutes(router: Router, deps: ServerDeps): void {
  router.post("/v1/execs", async (req, res, _params, ctx: RouteContext) => {
    refuseWhenClosing(deps);
    const streamParam = ctx.url.searchParams.get("stream");
    const wantStream = streamParam === "1" || streamParam === "true";
    // Negotiate before starting anything, so a 406 does not leave a command running.
    const format = wantStream ? negotiateFormat(req, ctx.url) : undefined;
    const body = await readJsonBody(req, { limit: deps.limits.maxJsonBytes });
    const { spec, options } = parseExecBody(body);
    const handle = await deps.computer.exec(spec, options);
    const location = `/v1/execs/${encodeURIComponent(handle.id)}`;
    if (format === undefined) {
      res.setHeader("location", location);
      sendJson(res, 201, { id: handle.id });
      return;
    }
    await streamEvents(deps, req, res, handle, 0, format, { location });
  });

  router.get("/v1/execs", async (_req, res) => {
    const execs = await deps.computer.list();
    sendJson(res, 200, { execs: execs.map(recordJson) });
  });

  router.get("/v1/execs/:id", async (_req, res, params) => {
    const handle = await getHandle(deps, params.id!);
    sendJson(res, 200, recordJson(await handle.info()));
  });

  router.get("/v1/execs/:id/events", async (req, res, params, ctx) => {
    const after = parseAfter(req, ctx.url);
    const format = negotiateFormat(req, ctx.url);
    const hb = ctx.url.searchParams.get("heartbeats");
    const handle = await getHandle(deps, params.id!);
    await streamEvents(deps, req, res, handle, after, format, {}, hb !== "0" && hb !== "false");
  });

  router.get("/v1/execs/:id/result", async (_req, res, params) => {
    const handle = await getHandle(deps, params.id!);
    const r = await handle.result();
    const bytes = typeof r.stdout !== "string";
    sendJson(res, 200, {
      id: r.id,
      status: r.status,
      exitCode: r.exitCode,
      ...(r.signal ? { signal: r.signal } : {}),
      encoding: bytes ? "b64" : "utf8",
      stdout: bytes ? encodeBase64(r.stdout as Uint8Array) : r.stdout,
      stderr: bytes ? encodeBase64(r.stderr as Uint8Array) : r.stderr,
      truncated: r.truncated,
    });
  });

  router.post("/v1/execs/:id/kill", async (req, res, params) => {
    const body = await readJsonBody(req, { limit: deps.limits.maxJsonBytes, allowEmpty: true });
    rejectUnknownFields(body, ["signal"]);
    let signal: string | undefined;
    if (body.signal !== undefined) {
      if (typeof body.signal !== "string" || !SIGNAL_RE.test(body.signal)) {
        throw bad('signal must be a signal name such as "SIGTERM"');
      }
      signal = body.signal;
    }
    const handle = await getHandle(deps, params.id!);
    await handle.kill(signal);
    res.statusCode = 204;
    res.end();
  });

  router.post("/v1/execs/:id/stdin", async (req, res, params, ctx) => {
    const handle = await getHandle(deps, params.id!);
    const endParam = ctx.url.searchParams.get("end");
    let total = 0;
    try {
      for await (const chunk of req as AsyncIterable<Buffer>) {
        total += chunk.length;
        if (total > deps.limits.maxStdinBytes) {
          throw new HttpError(
            413,
            "ETOOLARGE",
            `stdin body larger than ${deps.limits.maxStdinBytes} bytes`,
          );
        }
        await handle.write(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length));
      }
      if (endParam === "1" || endParam === "true") await handle.end();
    } catch (err) {
      // The runtime's ECLOSED here means this command's stdin is closed (it
      // exited, or closed it): a conflict with the execution's state, not
      // the server shutting down (which ECLOSED means elsewhere: 503).
      if (!(err instanceof HttpError) && hasCode(err, "ECLOSED")) {
        throw new HttpError(409, "ECLOSED", (err as Error).message);
      }
      throw err;
    }
    res.statusCode = 204;
    res.end();
  });

  router.delete("/v1/execs/:id", async (_req, res, params) => {
    // 404 for unknown ids: get() checks existence; dispose itself is a no-op for unknown ids.
    await getHandle(deps, params.id!);
    await deps.computer.dispose(params.id!);
    res.statusCode = 204;
    res.end();
  });
}
