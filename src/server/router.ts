// A tiny router for node:http: method + path pattern -> handler, plus upgrade
// routes for WebSocket paths. Shared by every part of the server (the exec API,
// the files API, the A@UI relay and the dashboard register their routes here),
// so the auth check, CORS, error mapping and request logging live in one place
// and no route can forget them.
//
// Patterns are `/`-separated: `:name` matches one non-empty segment
// (percent-decoded), a final `*` matches the rest of the path (percent-decoded,
// possibly empty) as `params["*"]`. Static segments beat `:params`, which beat
// `*`, independent of registration order.
//
// Handlers own the response. A thrown/rejected error becomes the JSON error
// body (http-errors.ts); after headers went out the connection is cut instead,
// which streaming handlers avoid by writing their own error frames.

import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { Auth, AuthResult } from "./auth.js";
import { errorBody, HttpError, sendError, toHttpError } from "./http-errors.js";

export interface RouteContext {
  /** The parsed request URL (base is irrelevant: only path and query are used). */
  url: URL;
  /** Result of the auth check (CORS origin to echo, cookie to set). */
  auth: AuthResult;
  /** Unique per request; echoed as `x-request-id` and in the request log line. */
  requestId: string;
}

export type Params = Record<string, string>;

export type RouteHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  params: Params,
  ctx: RouteContext,
) => void | Promise<void>;

export type UpgradeHandler = (
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  params: Params,
  ctx: RouteContext,
) => void | Promise<void>;

export interface RouteOptions {
  /** Skip the token check (Host/Origin are still checked). Only /healthz uses it by default. */
  public?: boolean;
}

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

export interface RouterOptions {
  auth: Auth;
  /** Called once per finished request (one structured log line). */
  onRequest?: (entry: RequestLogEntry) => void;
  /** Called with the code of every error response (metrics). */
  onError?: (code: string) => void;
}

interface Route<H> {
  method: string;
  segments: string[];
  handler: H;
  options: RouteOptions;
  rank: number;
}

function splitPath(path: string): string[] {
  const parts = path.split("/");
  // leading "" from the initial "/"; keep a trailing "" so "/a/" != "/a" only for "*"
  return parts.slice(1);
}

function compile(pattern: string): { segments: string[]; rank: number } {
  if (!pattern.startsWith("/")) throw new Error(`route pattern must start with /: ${pattern}`);
  const segments = splitPath(pattern);
  // Static segments score highest so `/v1/execs/list` beats `/v1/execs/:id`.
  let rank = 0;
  for (const s of segments) rank = rank * 4 + (s === "*" ? 1 : s.startsWith(":") ? 2 : 3);
  return { segments, rank };
}

function match(segments: string[], pathParts: string[]): Params | null {
  const params: Params = {};
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i]!;
    if (seg === "*" && i === segments.length - 1) {
      params["*"] = pathParts.slice(i).map(decodeSegment).join("/");
      return params;
    }
    const part = pathParts[i];
    if (part === undefined) return null;
    if (seg.startsWith(":")) {
      if (part === "") return null;
      params[seg.slice(1)] = decodeSegment(part);
    } else if (seg !== part) {
      return null;
    }
  }
  return pathParts.length === segments.length ? params : null;
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

function decodeSegment(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new HttpError(400, "EINVAL", "malformed percent-encoding in path");
  }
}

export class Router {
  private readonly routes: Route<RouteHandler>[] = [];
  private readonly upgrades: Route<UpgradeHandler>[] = [];
  readonly auth: Auth;
  private readonly onRequest: ((entry: RequestLogEntry) => void) | undefined;
  private readonly onError: ((code: string) => void) | undefined;

  constructor(options: RouterOptions) {
    this.auth = options.auth;
    this.onRequest = options.onRequest;
    this.onError = options.onError;
  }

  route(method: string, pattern: string, handler: RouteHandler, options: RouteOptions = {}): this {
    const { segments, rank } = compile(pattern);
    this.routes.push({ method: method.toUpperCase(), segments, handler, options, rank });
    this.routes.sort((a, b) => b.rank - a.rank || b.segments.length - a.segments.length);
    return this;
  }
  get(pattern: string, handler: RouteHandler, options?: RouteOptions): this {
    return this.route("GET", pattern, handler, options);
  }
  post(pattern: string, handler: RouteHandler, options?: RouteOptions): this {
    return this.route("POST", pattern, handler, options);
  }
  put(pattern: string, handler: RouteHandler, options?: RouteOptions): this {
    return this.route("PUT", pattern, handler, options);
  }
  delete(pattern: string, handler: RouteHandler, options?: RouteOptions): this {
    return this.route("DELETE", pattern, handler, options);
  }
  /** A WebSocket (or other Upgrade) path. The handler owns `socket` after auth passed. */
  upgrade(pattern: string, handler: UpgradeHandler, options: RouteOptions = {}): this {
    const { segments, rank } = compile(pattern);
    this.upgrades.push({ method: "GET", segments, handler, options, rank });
    this.upgrades.sort((a, b) => b.rank - a.rank);
    return this;
  }

  /** The node:http 'request' listener. Never throws; every failure is a JSON error. */
  handle = (req: IncomingMessage, res: ServerResponse): void => {
    const started = performance.now();
    const requestId = randomUUID();
    let errorCode: string | undefined;
    res.setHeader("x-request-id", requestId);
    res.once("close", () => {
      this.onRequest?.({
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
      const e = toHttpError(err);
      errorCode = e.code;
      this.onError?.(e.code);
      if (e.status >= 500)
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
      fail(new HttpError(400, "EINVAL", "malformed request URL"));
      return;
    }
    let auth: AuthResult = {};
    try {
      const method = (req.method ?? "GET").toUpperCase();
      if (method === "OPTIONS") {
        // CORS preflight: only configured origins get the allow headers.
        auth = this.auth.checkHostAndOrigin(req);
        if (auth.corsOrigin) applyCors(res, auth.corsOrigin, true);
        res.statusCode = 204;
        res.end();
        return;
      }
      const parts = splitPath(rawPathOf(req, url));
      let found: { route: Route<RouteHandler>; params: Params } | undefined;
      const allowed = new Set<string>();
      for (const route of this.routes) {
        const params = match(route.segments, parts);
        if (!params) continue;
        if (route.method !== method) {
          allowed.add(route.method);
          continue;
        }
        found = { route, params };
        break;
      }
      auth = found?.route.options.public
        ? this.auth.checkHostAndOrigin(req)
        : this.auth.check(req, url);
      if (!found) {
        if (allowed.size > 0) {
          res.setHeader("allow", [...allowed].join(", "));
          throw new HttpError(405, "EMETHOD", `method ${method} not allowed here`);
        }
        throw new HttpError(404, "ENOENT", `no route for ${method} ${url.pathname}`);
      }
      if (auth.corsOrigin) applyCors(res, auth.corsOrigin);
      if (auth.setCookie) res.setHeader("set-cookie", auth.setCookie);
      const ctx: RouteContext = { url, auth, requestId };
      const out = found.route.handler(req, res, found.params, ctx);
      if (out && typeof (out as Promise<void>).then === "function") {
        (out as Promise<void>).then(undefined, (err) => fail(err, auth.corsOrigin));
      }
    } catch (err) {
      // When the token check threw, `auth` is still empty, yet a 401 to an
      // allowed foreign origin needs the CORS headers too, or the browser hides
      // it and the page sees a network error instead of EUNAUTHORIZED. Only
      // the Origin is re-checked (error path only); a refused Origin stays bare.
      fail(err, auth.corsOrigin ?? this.corsOriginOf(req));
    }
  };

  private corsOriginOf(req: IncomingMessage): string | undefined {
    try {
      return this.auth.checkHostAndOrigin(req).corsOrigin;
    } catch {
      return undefined;
    }
  }

  /** The node:http 'upgrade' listener: auth, then the matching upgrade route, else an HTTP error. */
  handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.on("error", () => socket.destroy());
    try {
      const url = new URL(req.url ?? "/", "http://localhost");
      const parts = splitPath(rawPathOf(req, url));
      let found: { route: Route<UpgradeHandler>; params: Params } | undefined;
      for (const route of this.upgrades) {
        const params = match(route.segments, parts);
        if (params) {
          found = { route, params };
          break;
        }
      }
      const auth = found?.route.options.public
        ? this.auth.checkHostAndOrigin(req)
        : this.auth.check(req, url);
      if (!found) throw new HttpError(404, "ENOENT", `no upgrade route for ${url.pathname}`);
      const ctx: RouteContext = { url, auth, requestId: randomUUID() };
      const out = found.route.handler(req, socket, head, found.params, ctx);
      if (out && typeof (out as Promise<void>).then === "function") {
        (out as Promise<void>).then(undefined, (err) => rejectUpgrade(socket, err));
      }
    } catch (err) {
      this.onError?.(toHttpError(err).code);
      rejectUpgrade(socket, err);
    }
  };
}

/** Answers a failed upgrade with a plain HTTP error response on the raw socket, then closes it. */
export function rejectUpgrade(socket: Duplex, err: unknown): void {
  if (socket.destroyed) return;
  const e = toHttpError(err);
  const body = JSON.stringify(errorBody(e));
  socket.end(
    `HTTP/1.1 ${e.status} ${statusText(e.status)}\r\n` +
      "Connection: close\r\n" +
      "Content-Type: application/json; charset=utf-8\r\n" +
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

/** CORS headers for an allowed foreign origin (no credentials: foreign pages use the bearer token). */
export function applyCors(res: ServerResponse, origin: string, preflight = false): void {
  res.setHeader("access-control-allow-origin", origin);
  res.setHeader("vary", "Origin");
  res.setHeader("access-control-expose-headers", "x-request-id, location");
  if (preflight) {
    res.setHeader("access-control-allow-methods", "GET, POST, PUT, DELETE, OPTIONS");
    res.setHeader(
      "access-control-allow-headers",
      "authorization, content-type, accept, last-event-id",
    );
    res.setHeader("access-control-max-age", "600");
  }
}

export { sendJson } from "./http-errors.js";
export { HttpError, sendError };
