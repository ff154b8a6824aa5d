// Route matching without sockets: static segments beat `:params`, which beat
// `*`, whatever the registration order; params and the rest-of-path are
// percent-decoded; a path known with other methods reports them (for 405);
// malformed percent-encoding is EINVAL.

import { describe, expect, it } from "vitest";
import { Auth } from "./auth.js";
import { type RouteHandler, Router } from "./router.js";

const noop: RouteHandler = () => {};

/** A router whose handlers are named, so a match says which route won. */
function routerWith(routes: [method: string, pattern: string][]): {
  router: Router;
  nameOf: (h: RouteHandler | undefined) => string | undefined;
} {
  const router = new Router({ auth: new Auth({ token: null }) });
  const names = new Map<RouteHandler, string>();
  for (const [method, pattern] of routes) {
    const h: RouteHandler = () => {};
    names.set(h, `${method} ${pattern}`);
    router.route(method, pattern, h);
  }
  return { router, nameOf: (h) => (h ? names.get(h) : undefined) };
}

describe("Router.find", () => {
  it("prefers static segments, then :params, then *, independent of registration order", () => {
    const { router, nameOf } = routerWith([
      ["GET", "/v1/*"],
      ["GET", "/v1/execs/:id"],
      ["GET", "/v1/execs/list"],
    ]);
    expect(nameOf(router.find("GET", "/v1/execs/list").match?.handler)).toBe("GET /v1/execs/list");
    expect(nameOf(router.find("GET", "/v1/execs/abc").match?.handler)).toBe("GET /v1/execs/:id");
    expect(nameOf(router.find("GET", "/v1/files/a/b").match?.handler)).toBe("GET /v1/*");
  });

  it("decodes :params and the rest of the path", () => {
    const { router } = routerWith([
      ["GET", "/v1/execs/:id/events"],
      ["GET", "/v1/files/*"],
    ]);
    expect(router.find("GET", "/v1/execs/a%20b%2Fc/events").match?.params).toEqual({
      id: "a b/c",
    });
    expect(router.find("GET", "/v1/files/dir/na%C3%AFve.txt").match?.params).toEqual({
      "*": "dir/naïve.txt",
    });
    // `*` may match nothing, and keeps a trailing slash.
    expect(router.find("GET", "/v1/files/").match?.params).toEqual({ "*": "" });
    expect(router.find("GET", "/v1/files/d/").match?.params).toEqual({ "*": "d/" });
  });

  it("a :param needs a non-empty segment, and segment counts must agree", () => {
    const { router } = routerWith([["GET", "/v1/execs/:id"]]);
    expect(router.find("GET", "/v1/execs/").match).toBeUndefined();
    expect(router.find("GET", "/v1/execs").match).toBeUndefined();
    expect(router.find("GET", "/v1/execs/a/b").match).toBeUndefined();
    expect(router.find("GET", "/v1/execs/a/").match).toBeUndefined();
  });

  it("reports the methods a path has when none matches the request's", () => {
    const { router } = routerWith([
      ["GET", "/v1/execs/:id"],
      ["DELETE", "/v1/execs/:id"],
      ["POST", "/v1/execs"],
    ]);
    const r = router.find("PUT", "/v1/execs/x");
    expect(r.match).toBeUndefined();
    expect(r.allowed.sort()).toEqual(["DELETE", "GET"]);
    expect(router.find("GET", "/nowhere")).toEqual({ allowed: [] });
  });

  it("refuses malformed percent-encoding with EINVAL", () => {
    const { router } = routerWith([["GET", "/v1/execs/:id"]]);
    expect(() => router.find("GET", "/v1/execs/%E0%A4%A")).toThrow(
      expect.objectContaining({ code: "EINVAL", status: 400 }),
    );
  });

  it("keeps route options with the match", () => {
    const router = new Router({ auth: new Auth({ token: null }) });
    router.get("/healthz", noop, { public: true });
    expect(router.find("GET", "/healthz").match?.options).toEqual({ public: true });
  });

  it("matches upgrade routes separately from request routes", () => {
    const router = new Router({ auth: new Auth({ token: null }) });
    router.get("/v1/ws", noop);
    expect(router.findUpgrade("/v1/ws")).toBeUndefined();
    router.upgrade("/v1/ui/:channel/ws", () => {});
    expect(router.findUpgrade("/v1/ui/a%2Eb/ws")?.params).toEqual({ channel: "a.b" });
  });

  it("refuses patterns that do not start with /", () => {
    const router = new Router({ auth: new Auth({ token: null }) });
    expect(() => router.get("v1/execs", noop)).toThrow(/must start with \//);
  });
});
