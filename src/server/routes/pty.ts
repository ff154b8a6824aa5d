// The terminal routes of pty executions (docs/api.md, "Terminals"): resize and
// the screen snapshot. Input goes through the stdin route like any other
// execution's; output is its ordinary event stream.

import { checkPtySize } from "../../runtime/pty.js";
import { ComputerError } from "../../wire/errors.js";
import type { ServerDeps } from "../deps.js";
import { readJsonBody } from "../http/body.js";
import { sendJson } from "../http/errors.js";
import type { Router } from "../http/router.js";

/** Registers POST /v1/execs/:id/resize and GET /v1/execs/:id/screen on `router`. */
export function registerPtyRoutes(router: Router, deps: ServerDeps): void {
  router.post("/v1/execs/:id/resize", async (req, res, params) => {
    const body = await readJsonBody(req, { limit: deps.limits.maxJsonBytes });
    const size = checkPtySize(body, "body");
    const handle = await deps.computer.get(params.id!);
    await handle.resize(size);
    res.statusCode = 204;
    res.end();
  });

  router.get("/v1/execs/:id/screen", async (_req, res, params) => {
    const handle = await deps.computer.get(params.id!);
    sendJson(res, 200, await handle.screen());
  });
}

/** A WebSocket message that types into or resizes a terminal. */
export type TerminalMessage =
  | { type: "stdin"; id: string; chunk: Uint8Array | string }
  | { type: "resize"; id: string; size: { cols: number; rows: number } };

/** Fields a terminal message may carry besides type and id. */
export const TERMINAL_MESSAGE_FIELDS = ["data", "b64", "cols", "rows"];

/**
 * The terminal message in `msg` (`{"type":"stdin","id","data"|"b64"}` or
 * `{"type":"resize","id","cols","rows"}`), undefined for other types; EINVAL
 * when malformed.
 */
export function parseTerminalMessage(
  msg: Record<string, unknown> & { id: string },
): TerminalMessage | undefined {
  if (msg.type === "stdin") {
    const { data, b64 } = msg;
    if (typeof data === "string" && b64 === undefined) {
      return { type: "stdin", id: msg.id, chunk: data };
    }
    if (typeof b64 === "string" && data === undefined && /^[A-Za-z0-9+/]*={0,2}$/.test(b64)) {
      return { type: "stdin", id: msg.id, chunk: new Uint8Array(Buffer.from(b64, "base64")) };
    }
    throw new ComputerError("EINVAL", "stdin takes either data (text) or b64 (bytes)");
  }
  if (msg.type === "resize") {
    return {
      type: "resize",
      id: msg.id,
      size: checkPtySize({ cols: msg.cols, rows: msg.rows }, "resize"),
    };
  }
  return undefined;
}

/** Carry out a terminal message. */
export async function applyTerminalMessage(deps: ServerDeps, m: TerminalMessage): Promise<void> {
  const handle = await deps.computer.get(m.id);
  if (m.type === "stdin") await handle.write(m.chunk);
  else await handle.resize(m.size);
}
