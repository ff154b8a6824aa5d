// Which log specs name Redis, and how `?prefix=` is split off the connection
// URL (everything else of the URL is kept).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isRedisUrl, parseRedisUrl } from "./url.js";

describe("isRedisUrl", () => {
  it("is true for redis:// and rediss:// only", () => {
    for (const s of ["redis://h:6379", "rediss://h", "redis://"]) expect(isRedisUrl(s)).toBe(true);
    for (const s of [
      "memory",
      "sqlite:/x.db",
      "REDIS://h",
      "redis:h",
      "http://h",
      " redis://h",
      "xredis://h",
    ]) {
      expect(isRedisUrl(s)).toBe(false);
    }
  });
});

describe("parseRedisUrl", () => {
  it("leaves a URL without prefix as it is, with the default prefix", () => {
    expect(parseRedisUrl("redis://127.0.0.1:6379/2")).toEqual({
      redis: "redis://127.0.0.1:6379/2",
      prefix: undefined,
    });
  });

  it("takes ?prefix= out and keeps credentials, db and other parameters", () => {
    expect(parseRedisUrl("rediss://u:p@h:6380/3?prefix=team1:&family=6")).toEqual({
      redis: "rediss://u:p@h:6380/3?family=6",
      prefix: "team1:",
    });
    expect(parseRedisUrl("redis://h/?prefix=")).toEqual({ redis: "redis://h/", prefix: "" });
  });

  it("decodes an escaped prefix", () => {
    expect(parseRedisUrl("redis://h?prefix=a%20b%3A").prefix).toBe("a b:");
  });

  it("throws on a spec that is not a URL", () => {
    expect(() => parseRedisUrl("redis://[::1")).toThrow();
  });

  it("returns any prefix given, and a URL that no longer carries it (property)", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 12 }), (prefix) => {
        const spec = `redis://h:1/0?prefix=${encodeURIComponent(prefix)}`;
        const r = parseRedisUrl(spec);
        expect(r.prefix).toBe(prefix);
        expect(new URL(r.redis).searchParams.has("prefix")).toBe(false);
        expect(r.redis).toBe("redis://h:1/0");
      }),
    );
  });
});
