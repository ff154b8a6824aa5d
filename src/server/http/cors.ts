// CORS response headers for an allowed foreign origin. Which origins are
// allowed is decided by the Origin check in auth.ts; this file only says what
// such an origin is told. No credentials are allowed: foreign pages use the
// bearer token, never the cookie (which is SameSite=Strict anyway).

import type { ServerResponse } from "node:http";

/** Headers a foreign page may read from our answers. */
const EXPOSED_HEADERS = "x-request-id, location, mcp-session-id";
/** Methods and request headers a preflight allows (everything the API uses). */
const ALLOWED_METHODS = "GET, POST, PUT, DELETE, OPTIONS";
const ALLOWED_HEADERS =
  "authorization, content-type, accept, last-event-id, mcp-session-id, mcp-protocol-version";
/** How long a browser may cache a preflight answer (seconds). */
const PREFLIGHT_MAX_AGE = "600";

/** Sets the CORS headers for `origin`; `preflight` adds what an OPTIONS answer needs. */
export function applyCors(res: ServerResponse, origin: string, preflight = false): void {
  res.setHeader("access-control-allow-origin", origin);
  res.setHeader("vary", "Origin");
  res.setHeader("access-control-expose-headers", EXPOSED_HEADERS);
  if (preflight) {
    res.setHeader("access-control-allow-methods", ALLOWED_METHODS);
    res.setHeader("access-control-allow-headers", ALLOWED_HEADERS);
    res.setHeader("access-control-max-age", PREFLIGHT_MAX_AGE);
  }
}
