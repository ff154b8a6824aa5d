// The route table: method + path pattern -> handler, plus upgrade routes for
// WebSocket paths. Every part of the server (the exec API, the files API, the
// A@UI relay, the dashboard, cluster routes) registers here, so one request
// pipeline (dispatch.ts: auth, CORS, error mapping, the request log line)
// serves them all and no route can forget a check. This file only matches;
// `handle`/`handleUpgrade` are the node:http listeners, implemented in
// dispatch.ts.
//
// Patterns are `/`-separated: `:name` matches one non-empty segment
// (percent-decoded), a final `*` matches the rest of the path (percent-decoded,
// possibly empty) as `params["*"]`. Static segments beat `:params`, which beat
// `*`, independent of registration order.
//
// Handlers own the response. A thrown/rejected error becomes the JSON error
// body (errors.ts); after headers went out the connection is cut instead,
// which streaming handlers avoid by writing their own error frames.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { ComputerError } from "../../wire/errors.js";
import type { Auth, AuthResult } from "./auth.js";
import { dispatchRequest, dispatchUpgrade, type RequestLogEntry } from "./dispatch.js";

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

export interface RouterOptions {
  auth: Auth;
  /** Called once per finished request (one structured log line). */
  onRequest?: (entry: RequestLogEntry) => void;
  /** Called with the code of every error response (metrics). */
  onError?: (code: string) => void;
  /**
   * Checked before every non-public route's handler: throw (or reject) to
   * refuse the request, e.g. 503 while the event-log backend is down.
   */
  gate?: (path: string) => void | Promise<void>;
}

/** A route found for a path: its handler, options and the decoded params. */
export interface RouteMatch<H> {
  handler: H;
  options: RouteOptions;
  params: Params;
}

interface Route<H> {
  method: string;
  segments: string[];
  handler: H;
  options: RouteOptions;
  rank: number;
}

/** A path's segments after the leading "/"; a trailing "" is kept so "/a/" != "/a" except for "*". */
function splitPath(path: string): string[] {
  return path.split("/").slice(1);
}

function compile(pattern: string): { segments: string[]; rank: number } {
  if (!pattern.startsWith("/")) throw new Error(`route pattern must start with /: ${pattern}`);
  const segments = splitPath(pattern);
  // Static segments score highest so `/v1/execs/list` beats `/v1/execs/:id`.
  let rank = 0;
  for (const s of segments) rank = rank * 4 + (s === "*" ? 1 : s.startsWith(":") ? 2 : 3);
  return { segments, rank };
}

function matchSegments(segments: string[], pathParts: string[]): Params | null {
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

function decodeSegment(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new ComputerError("EINVAL", "malformed percent-encoding in path");
  }
}

export class Router {
  private readonly routes: Route<RouteHandler>[] = [];
  private readonly upgrades: Route<UpgradeHandler>[] = [];
  readonly auth: Auth;
  private readonly options: RouterOptions;

  constructor(options: RouterOptions) {
    this.auth = options.auth;
    this.options = options;
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

  /**
   * The route for `method` on the raw `path`, or the methods the path has
   * (`allowed`, for a 405) when none matches the method. Throws EINVAL for
   * malformed percent-encoding in a matching path.
   */
  find(method: string, path: string): { match?: RouteMatch<RouteHandler>; allowed: string[] } {
    const parts = splitPath(path);
    const allowed = new Set<string>();
    for (const route of this.routes) {
      const params = matchSegments(route.segments, parts);
      if (!params) continue;
      if (route.method !== method) {
        allowed.add(route.method);
        continue;
      }
      return { match: { handler: route.handler, options: route.options, params }, allowed: [] };
    }
    return { allowed: [...allowed] };
  }

  /** The upgrade route for the raw `path`, if any. */
  findUpgrade(path: string): RouteMatch<UpgradeHandler> | undefined {
    const parts = splitPath(path);
    for (const route of this.upgrades) {
      const params = matchSegments(route.segments, parts);
      if (params) return { handler: route.handler, options: route.options, params };
    }
    return undefined;
  }

  /** The node:http 'request' listener. Never throws; every failure is a JSON error. */
  handle = (req: IncomingMessage, res: ServerResponse): void => {
    dispatchRequest(this, this.options, req, res);
  };

  /** The node:http 'upgrade' listener: auth, then the matching upgrade route, else an HTTP error. */
  handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    dispatchUpgrade(this, this.options, req, socket, head);
  };
}
