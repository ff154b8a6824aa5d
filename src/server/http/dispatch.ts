// The request pipeline every HTTP request and WebSocket upgrade goes through:
// a request id, the auth check (auth.ts), CORS headers (cors.ts), the route
// (router.ts), error mapping (errors.ts) and one structured log line per
// request. It lives apart from the route table so that matching stays a pure
// function of the path and this file holds everything a request must pass.

import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { ComputerError } from "../../wire/errors.js";
import type { AuthResult } from "./auth.js";
import { applyCors } from "./cors.js";
import { rejectUpgrade, sendError, toComputerError } from "./errors.js";
import type { RouteContext, Router, RouterOptions } from "./router.js";

/** One line of the structured request log. */
export interface RequestLogEntry {
  msg: "request";
  requestId: string;
  method: string;
  path: string;
  status: number;
  ms: number;
  code?: string;
}

/**
 * The request path exactly as sent (no dot-segment normalisation, unlike
 * URL.pathname): `/v1/files/a/../b` must reach the files API as written so it
 * can be refused, not silently become `/v1/files/b`.
 */
function rawPathOf(req: IncomingMessage, url: URL): string {
  const target = req.url ?? "/";
  if (!target.startsWith("/")) return url.pathname; // absolute-form (proxies)
  const q = target.indexOf("?");
  return q < 0 ? target : target.slice(0, q);
}

/** The CORS origin of an allowed foreign Origin, or undefined (also when the request is refused). */
function corsOriginOf(router: Router, req: IncomingMessage): string | undefined {
  try {
    return router.auth.checkHostAndOrigin(req).corsOrigin;
  } catch {
    return undefined;
  }
}

function isPromise(value: unknown): value is Promise<void> {
  return typeof (value as Promise<void> | undefined)?.then === "function";
}

/** Serves one HTTP request through `router`. Never throws; every failure is a JSON error. */
export function dispatchRequest(
  router: Router,
  hooks: RouterOptions,
  req: IncomingMessage,
  res: ServerResponse,
): void {
  const started = performance.now();
  const requestId = randomUUID();
  let errorCode: string | undefined;
  res.setHeader("x-request-id", requestId);
  res.once("close", () => {
    hooks.onRequest?.({
      msg: "request",
      requestId,
      method: req.method ?? "",
      path: (req.url ?? "").split("?")[0]!,
      status: res.statusCode,
      ms: Math.round((performance.now() - started) * 1000) / 1000,
      ...(errorCode ? { code: errorCode } : {}),
    });
  });
  const fail = (err: unknown, corsOrigin?: string) => {
    const e = toComputerError(err);
    errorCode = e.code;
    hooks.onError?.(e.code);
    if (e.status >= 500 && e.code !== "EUNAVAILABLE")
      console.error(
        JSON.stringify({
          msg: "internal error",
          requestId,
          error: String((err as Error)?.stack ?? err),
        }),
      );
    if (corsOrigin) applyCors(res, corsOrigin);
    if (!res.headersSent) {
      // Drain a request body we will not read, so the socket can be reused.
      req.resume();
    }
    sendError(res, e);
  };
  let url: URL;
  try {
    url = new URL(req.url ?? "/", "http://localhost");
  } catch {
    fail(new ComputerError("EINVAL", "malformed request URL"));
    return;
  }
  let auth: AuthResult = {};
  try {
    const method = (req.method ?? "GET").toUpperCase();
    if (method === "OPTIONS") {
      // CORS preflight: only configured origins get the allow headers.
      auth = router.auth.checkHostAndOrigin(req);
      if (auth.corsOrigin) applyCors(res, auth.corsOrigin, true);
      res.statusCode = 204;
      res.end();
      return;
    }
    const { match, allowed } = router.find(method, rawPathOf(req, url));
    auth = match?.options.public
      ? router.auth.checkHostAndOrigin(req)
      : router.auth.check(req, url);
    if (!match) {
      if (allowed.length > 0) {
        res.setHeader("allow", allowed.join(", "));
        throw new ComputerError("EMETHOD", `method ${method} not allowed here`);
      }
      throw new ComputerError("ENOENT", `no route for ${method} ${url.pathname}`);
    }
    if (auth.corsOrigin) applyCors(res, auth.corsOrigin);
    if (auth.setCookie) res.setHeader("set-cookie", auth.setCookie);
    const ctx: RouteContext = { url, auth, requestId };
    const run = () => {
      const out = match.handler(req, res, match.params, ctx);
      if (isPromise(out)) out.then(undefined, (err) => fail(err, auth.corsOrigin));
    };
    const gated = match.options.public ? undefined : hooks.gate?.(url.pathname);
    if (isPromise(gated)) {
      gated.then(
        () => {
          try {
            run();
          } catch (err) {
            fail(err, auth.corsOrigin);
          }
        },
        (err) => fail(err, auth.corsOrigin),
      );
    } else run();
  } catch (err) {
    // When the token check threw, `auth` is still empty, yet a 401 to an
    // allowed foreign origin needs the CORS headers too, or the browser hides
    // it and the page sees a network error instead of EUNAUTHORIZED. Only
    // the Origin is re-checked (error path only); a refused Origin stays bare.
    fail(err, auth.corsOrigin ?? corsOriginOf(router, req));
  }
}

/** Serves one Upgrade request through `router`: auth, then the upgrade route, else an HTTP error. */
export function dispatchUpgrade(
  router: Router,
  hooks: RouterOptions,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
): void {
  socket.on("error", () => socket.destroy());
  try {
    const url = new URL(req.url ?? "/", "http://localhost");
    const match = router.findUpgrade(rawPathOf(req, url));
    const auth = match?.options.public
      ? router.auth.checkHostAndOrigin(req)
      : router.auth.check(req, url);
    if (!match) throw new ComputerError("ENOENT", `no upgrade route for ${url.pathname}`);
    const ctx: RouteContext = { url, auth, requestId: randomUUID() };
    const out = match.handler(req, socket, head, match.params, ctx);
    if (isPromise(out)) out.then(undefined, (err) => rejectUpgrade(socket, err));
  } catch (err) {
    hooks.onError?.(toComputerError(err).code);
    rejectUpgrade(socket, err);
  }
}
