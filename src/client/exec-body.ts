// What the SDK sends to start an execution: the POST /v1/execs body, which is
// also the fields of the WebSocket `exec` message, and a fresh id for the
// latter (over HTTP the server names executions; a WebSocket `exec` names its
// own). Kept apart from client.ts so both transports build the same body.

import type { ExecOptions, ExecSpec } from "../runtime/types.js";
import { encodeBase64 } from "../wire/base64.js";

/** The POST /v1/execs body (also the fields of a WebSocket `exec` message). */
export function execBody(spec: ExecSpec, options: ExecOptions): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (typeof spec === "string") body.command = spec;
  else if ("argv" in spec) body.argv = spec.argv;
  else body.command = spec.command;
  if (options.id !== undefined) body.id = options.id;
  if (options.cwd !== undefined) body.cwd = options.cwd;
  if (options.env !== undefined) body.env = options.env;
  if (options.timeoutMs !== undefined) body.timeoutMs = options.timeoutMs;
  if (options.encoding !== undefined) body.encoding = options.encoding;
  if (options.pty !== undefined) body.pty = { cols: options.pty.cols, rows: options.pty.rows };
  if (options.limits !== undefined) body.limits = options.limits;
  if (options.network !== undefined) body.network = options.network;
  if (options.stdin !== undefined) {
    body.stdin =
      options.stdin === "pipe"
        ? { pipe: true }
        : typeof options.stdin === "string"
          ? options.stdin
          : { b64: encodeBase64(options.stdin) };
  }
  return body;
}

/** A fresh execution id for the websocket `exec` message (the server names executions only over HTTP). */
export function newExecId(): string {
  const c = globalThis.crypto;
  if (typeof c.randomUUID === "function") return c.randomUUID();
  const b = c.getRandomValues(new Uint8Array(16));
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
