// The execution API over HTTP (docs/api.md): start, inspect, list, kill,
// stdin, dispose, result, and the event stream (streaming/http-stream.ts
// writes it as exec-wire or SSE). This file validates requests and maps them
// onto the ComputerApi; it knows nothing about how events are encoded.

import type { ServerResponse } from "node:http";
import { checkPtySize } from "../../runtime/pty.js";
import type { ExecHandle, ExecOptions, ExecSpec } from "../../runtime/types.js";
import { encodeBase64 } from "../../wire/base64.js";
import { ComputerError } from "../../wire/errors.js";
import type { ServerDeps } from "../deps.js";
import { readJsonBody, rejectUnknownFields } from "../http/body.js";
import { sendJson } from "../http/errors.js";
import type { RouteContext, Router } from "../http/router.js";
import { negotiateFormat, streamEvents } from "../streaming/http-stream.js";
import { afterOfRequest } from "../streaming/subscribe.js";
import { ResultGate, waitForEnd } from "./result-gate.js";
import { SpawnPacer } from "./spawn-pacer.js";

/** The fields of an execution request (POST /v1/execs body, WebSocket "exec" message). */
export const EXEC_FIELDS = [
  "id",
  "command",
  "argv",
  "cwd",
  "env",
  "stdin",
  "timeoutMs",
  "encoding",
  "pty",
  "limits",
  "network",
];
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const SIGNAL_RE = /^SIG[A-Z0-9]{1,12}$/;

function bad(message: string): ComputerError {
  return new ComputerError("EINVAL", message);
}

/**
 * Validates an execution request (a POST /v1/execs body, or a WebSocket
 * "exec" message without its type) into the runtime's (spec, options).
 * Strict: unknown fields fail. The one validation both transports use.
 */
export function parseExecBody(body: Record<string, unknown>): {
  spec: ExecSpec;
  options: ExecOptions;
} {
  rejectUnknownFields(body, EXEC_FIELDS);
  const { command, argv, cwd, env, stdin, timeoutMs, encoding, id, pty, limits, network } = body;
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
  if (pty !== undefined) options.pty = checkPtySize(pty);
  // Checked in full by the sandbox (unknown limits, maxima: EINVAL; widening: EFORBIDDEN).
  if (limits !== undefined) {
    if (typeof limits !== "object" || limits === null || Array.isArray(limits)) {
      throw bad("limits must be an object of numbers");
    }
    options.limits = limits as ExecOptions["limits"];
  }
  if (network !== undefined) options.network = network as ExecOptions["network"];
  return { spec, options };
}

function getHandle(deps: ServerDeps, id: string): Promise<ExecHandle> {
  return deps.computer.get(id);
}

function refuseWhenClosing(deps: ServerDeps): void {
  if (deps.isClosing()) throw new ComputerError("EUNAVAILABLE", "server is shutting down");
}

/** Registers /v1/execs routes on `router`. */
export function registerExecRoutes(router: Router, deps: ServerDeps): void {
  const pacer = new SpawnPacer();
  router.post("/v1/execs", async (req, res, _params, ctx: RouteContext) => {
    refuseWhenClosing(deps);
    const streamParam = ctx.url.searchParams.get("stream");
    const wantStream = streamParam === "1" || streamParam === "true";
    // Negotiate before starting anything, so a 406 does not leave a command running.
    const format = wantStream ? negotiateFormat(req, ctx.url) : undefined;
    const body = await readJsonBody(req, { limit: deps.limits.maxJsonBytes });
    const { spec, options } = parseExecBody(body);
    await pacer.turn();
    refuseWhenClosing(deps);
    // Streaming: this request is the command's first reader, so hold the
    // command for it until it subscribes (nothing evicted in between).
    const handle = await deps.computer.exec(
      spec,
      format === undefined ? options : { ...options, awaitReader: true },
    );
    const location = `/v1/execs/${encodeURIComponent(handle.id)}`;
    if (format === undefined) {
      res.setHeader("location", location);
      sendJson(res, 201, { id: handle.id });
      return;
    }
    await streamEvents(deps, req, res, handle, {
      after: 0,
      format,
      heartbeats: true,
      headers: { location },
    });
  });

  router.get("/v1/execs", async (_req, res) => {
    const execs = await deps.computer.list();
    sendJson(res, 200, { execs });
  });

  router.get("/v1/execs/:id", async (_req, res, params) => {
    const handle = await getHandle(deps, params.id!);
    sendJson(res, 200, await handle.info());
  });

  router.get("/v1/execs/:id/events", async (req, res, params, ctx) => {
    const after = afterOfRequest(req, ctx.url);
    const format = negotiateFormat(req, ctx.url);
    const hb = ctx.url.searchParams.get("heartbeats");
    const handle = await getHandle(deps, params.id!);
    await streamEvents(deps, req, res, handle, {
      after,
      format,
      heartbeats: hb !== "0" && hb !== "false",
    });
  });

  const resultGate = new ResultGate(deps.limits.maxConcurrentResults);
  router.get("/v1/execs/:id/result", async (_req, res, params) => {
    const handle = await getHandle(deps, params.id!);
    const gone = new AbortController();
    res.once("close", () => gone.abort(new ComputerError("EUNAVAILABLE", "client went away")));
    await waitForEnd(handle, gone.signal);
    gone.signal.throwIfAborted();
    await resultGate.run(() => sendResult(res, handle, gone.signal), gone.signal);
  });

  async function sendResult(res: ServerResponse, handle: ExecHandle, signal: AbortSignal) {
    const r = await handle.result({ signal });
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
  }

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
    for await (const chunk of req as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (total > deps.limits.maxStdinBytes) {
        throw new ComputerError(
          "ETOOLARGE",
          `stdin body larger than ${deps.limits.maxStdinBytes} bytes`,
        );
      }
      // The runtime's ECLOSED (this command's stdin is closed: it exited or
      // closed it) is a 409 conflict with the execution's state, as thrown.
      await handle.write(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length));
    }
    if (endParam === "1" || endParam === "true") await handle.end();
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
