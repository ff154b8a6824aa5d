// Who may talk to the server. One check shared by every HTTP route and every
// WebSocket upgrade (docs/security.md is the prose version of this file):
//
// 1. Host: a loopback server answers only to loopback host names (and any
//    configured `allowedHosts`). A DNS-rebinding page (evil.example resolving
//    to 127.0.0.1) sends `Host: evil.example`, so it is refused with 403
//    before the token is even looked at.
// 2. Origin: a browser request that names an Origin must come from the
//    server's own origin or a configured CORS origin (403 otherwise). This is
//    what protects WebSocket upgrades, which browsers do not subject to CORS.
// 3. Token: `Authorization: Bearer <token>`, or the cookie set after a browser
//    opened the printed `?token=` URL once (HttpOnly, SameSite=Strict, so other
//    sites can neither read nor send it; and never accepted from an allowed
//    foreign origin, which must send the bearer header), or `?token=` itself
//    (for the first visit and for clients that cannot set headers, e.g.
//    EventSource).
// Token comparison is constant-time (hash then timingSafeEqual).

import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { isIP } from "node:net";
import { ComputerError } from "../../wire/errors.js";

export interface AuthOptions {
  /** The bearer token; `null` disables token auth (Host/Origin checks still apply). */
  token: string | null;
  /** Host names (without port) accepted in `Host`, besides loopback names. `"*"` accepts any. */
  allowedHosts?: string[];
  /** Origins (scheme://host[:port]) allowed cross-origin: CORS headers and WebSocket. */
  corsOrigins?: string[];
  /** Name of the cookie carrying the token for browsers. */
  cookieName?: string;
  /**
   * When true, any Host is accepted (a server bound to a non-loopback address
   * with no allowedHosts configured: the token still guards it).
   */
  anyHost?: boolean;
}

export interface AuthResult {
  /** Set when the request authenticated with `?token=`: the cookie to hand back. */
  setCookie?: string;
  /** The CORS origin to echo, when the request came from an allowed foreign origin. */
  corsOrigin?: string;
}

const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "::1", "[::1]"]);

export function generateToken(): string {
  return randomBytes(24).toString("base64url");
}

function digest(s: string): Buffer {
  return createHash("sha256").update(s).digest();
}

/** Splits a Host header into its name (lower-cased, brackets kept off for IPv6). */
function hostName(host: string): string {
  const h = host.trim().toLowerCase();
  if (h.startsWith("[")) {
    const end = h.indexOf("]");
    return end > 0 ? h.slice(1, end) : h;
  }
  const colon = h.lastIndexOf(":");
  return colon >= 0 && h.indexOf(":") === colon ? h.slice(0, colon) : h;
}

function isLoopbackName(name: string): boolean {
  if (LOOPBACK_NAMES.has(name)) return true;
  if (name.endsWith(".localhost")) return true;
  return isIP(name) === 4 && name.startsWith("127.");
}

function parseCookies(header: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  if (!header) return out;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq <= 0) continue;
    out.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  return out;
}

export class Auth {
  readonly token: string | null;
  /** Cookie name; the server appends its port once known so two local servers do not clash. */
  cookieName: string;
  private readonly tokenDigest: Buffer | null;
  private readonly allowedHosts: Set<string>;
  private readonly anyHost: boolean;
  private readonly corsOrigins: Set<string>;

  constructor(options: AuthOptions) {
    this.token = options.token;
    this.tokenDigest = options.token === null ? null : digest(options.token);
    this.cookieName = options.cookieName ?? "agent_computer_token";
    const hosts = (options.allowedHosts ?? []).map((h) => h.toLowerCase());
    this.anyHost = options.anyHost === true || hosts.includes("*");
    this.allowedHosts = new Set(hosts.map((h) => hostName(h)));
    this.corsOrigins = new Set((options.corsOrigins ?? []).map((o) => o.replace(/\/+$/, "")));
  }

  /** True when `candidate` equals the token (constant time). */
  tokenMatches(candidate: string | undefined | null): boolean {
    if (this.tokenDigest === null) return true;
    if (typeof candidate !== "string" || candidate.length === 0) return false;
    return timingSafeEqual(digest(candidate), this.tokenDigest);
  }

  /** Host and Origin checks only: used by open routes such as /healthz too. Throws EFORBIDDEN (403). */
  checkHostAndOrigin(req: IncomingMessage): AuthResult {
    const host = req.headers.host;
    if (!host) throw new ComputerError("EFORBIDDEN", "missing Host header");
    const name = hostName(host);
    if (!this.anyHost && !isLoopbackName(name) && !this.allowedHosts.has(name)) {
      throw new ComputerError("EFORBIDDEN", `host not allowed: ${name}`);
    }
    const origin = req.headers.origin;
    if (origin === undefined || origin === "") return {};
    // "null" origins (sandboxed frames, file://) are never trusted.
    let parsed: URL;
    try {
      parsed = new URL(origin);
    } catch {
      throw new ComputerError("EFORBIDDEN", "malformed Origin header");
    }
    const normalized = `${parsed.protocol}//${parsed.host}`;
    if (parsed.host.toLowerCase() === host.trim().toLowerCase()) return {}; // same origin
    if (this.corsOrigins.has(normalized)) return { corsOrigin: normalized };
    throw new ComputerError("EFORBIDDEN", `origin not allowed: ${normalized}`);
  }

  /** Full check for a protected route; throws EUNAUTHORIZED (401) or EFORBIDDEN (403). */
  check(req: IncomingMessage, url: URL): AuthResult {
    const result = this.checkHostAndOrigin(req);
    if (this.tokenDigest === null) return result;
    const authz = req.headers.authorization;
    if (typeof authz === "string" && authz.length > 0) {
      const m = /^Bearer\s+(\S+)\s*$/i.exec(authz);
      if (m && this.tokenMatches(m[1])) return result;
      throw new ComputerError("EUNAUTHORIZED", "invalid bearer token");
    }
    const queryToken = url.searchParams.get("token");
    if (queryToken !== null) {
      if (!this.tokenMatches(queryToken)) {
        throw new ComputerError("EUNAUTHORIZED", "invalid token");
      }
      result.setCookie = `${this.cookieName}=${encodeURIComponent(queryToken)}; HttpOnly; SameSite=Strict; Path=/`;
      return result;
    }
    const cookie = parseCookies(req.headers.cookie).get(this.cookieName);
    if (cookie !== undefined && result.corsOrigin !== undefined) {
      // The cookie is ambient authority: a foreign page (even an allowed one)
      // must prove it holds the token by sending it.
      throw new ComputerError(
        "EUNAUTHORIZED",
        "a cross-origin request must send Authorization: Bearer <token>; the cookie is only for the server's own pages",
      );
    }
    if (cookie !== undefined) {
      let value = cookie;
      try {
        value = decodeURIComponent(cookie);
      } catch {
        // a malformed cookie is just a wrong token
      }
      if (this.tokenMatches(value)) return result;
      throw new ComputerError("EUNAUTHORIZED", "invalid token cookie");
    }
    throw new ComputerError(
      "EUNAUTHORIZED",
      "missing token: send Authorization: Bearer <token> (printed by `agent-computer serve`)",
    );
  }
}
