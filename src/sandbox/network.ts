// Network policies: checking them, narrowing the server's policy for one
// execution, and matching a host name against an allow-list. Kept apart from
// the proxy so the rules can be tested without sockets.
//
// Order of openness: none < allow-list < host. An execution may ask for the
// same or less than the server grants, never more; with both an execution's
// and the server's list, a name must be allowed by both.

import { isIP } from "node:net";
import { ComputerError } from "../wire/errors.js";
import type { NetworkPolicy } from "./types.js";

const LABEL = /^(?:\*|\*\.)?[a-z0-9_](?:[a-z0-9_.-]{0,251}[a-z0-9_])?$/;

/** Validate a policy (from options or a request). */
export function checkPolicy(policy: unknown, what: string): NetworkPolicy {
  if (policy === "none" || policy === "host") return policy;
  if (
    typeof policy === "object" &&
    policy !== null &&
    Array.isArray((policy as { allow?: unknown }).allow)
  ) {
    const allow = (policy as { allow: unknown[] }).allow.map((p) => {
      if (typeof p !== "string")
        throw new ComputerError("EINVAL", `${what}: allow entries must be strings`);
      const name = normalise(p);
      if (!(name === "*" || LABEL.test(name) || isIP(stripBrackets(name)))) {
        throw new ComputerError("EINVAL", `${what}: ${JSON.stringify(p)} is not a domain pattern`);
      }
      return name;
    });
    return { allow };
  }
  throw new ComputerError("EINVAL", `${what} must be "none", "host" or {"allow": [domains]}`);
}

/** The policy of one execution: the server's, narrowed by the request. */
export function narrowPolicy(
  server: NetworkPolicy,
  requested: NetworkPolicy | undefined,
): NetworkPolicy {
  if (requested === undefined) return server;
  const want = checkPolicy(requested, "network");
  if (want === "none" || server === "host") return want;
  if (want === "host" || server === "none") {
    throw new ComputerError(
      "EFORBIDDEN",
      `network ${describe(want)} exceeds the server's network policy (${describe(server)})`,
    );
  }
  return { allow: want.allow.filter((p) => server.allow.some((s) => covers(s, p))) };
}

/** True when allow-list pattern `outer` admits every name pattern `inner` admits. */
function covers(outer: string, inner: string): boolean {
  if (outer === "*") return true;
  if (inner === "*") return false;
  if (inner.startsWith("*.")) return outer.startsWith("*.") && matches(outer, inner.slice(2));
  return matches(outer, inner);
}

/** True when `host` is allowed by `allow`. */
export function allowed(allow: string[], host: string): boolean {
  const name = normalise(host);
  return allow.some((p) => matches(p, name));
}

function matches(pattern: string, name: string): boolean {
  if (pattern === "*") return true;
  if (pattern.startsWith("*.")) return name.endsWith(pattern.slice(1));
  return name === pattern;
}

function normalise(name: string): string {
  return name.trim().toLowerCase().replace(/\.$/, "");
}

function stripBrackets(name: string): string {
  return name.startsWith("[") && name.endsWith("]") ? name.slice(1, -1) : name;
}

/** A policy in words, for messages and banners. */
export function describe(policy: NetworkPolicy): string {
  if (typeof policy === "string") return policy;
  return policy.allow.length ? `allow ${policy.allow.join(", ")}` : "allow (nothing)";
}
