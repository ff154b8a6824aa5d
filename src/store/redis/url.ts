// How a log specification names Redis: `redis://[user:pass@]host:port[/db]`
// (or `rediss://` for TLS) with an optional `?prefix=NAME` for the key prefix.
// Free of imports on purpose: openEventLog and the CLI's cluster set-up test
// a spec with it before they load ioredis.

/** True for a log specification that names Redis (`redis://…` or `rediss://…`). */
export function isRedisUrl(spec: string): boolean {
  return /^rediss?:\/\//.test(spec);
}

/**
 * Split a log URL into the connection URL and the key prefix its `?prefix=NAME`
 * picks (undefined: the default prefix).
 */
export function parseRedisUrl(spec: string): { redis: string; prefix: string | undefined } {
  const u = new URL(spec);
  const prefix = u.searchParams.get("prefix") ?? undefined;
  u.searchParams.delete("prefix");
  return { redis: u.toString(), prefix };
}
