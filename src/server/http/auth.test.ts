// Who may talk to the server, on plain request objects: loopback Host names
// only unless configured (a DNS-rebinding Host is 403 before the token is
// looked at), Origin same-origin or listed (never "null"), and the token from
// a Bearer header, ?token= (which hands back an HttpOnly SameSite=Strict
// cookie) or that cookie; a wrong or missing token is 401.
import type { IncomingMessage } from "node:http";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Auth, generateToken } from "./auth.js";

const req = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;
const url = (q = "") => new URL(`http://localhost:8787/v1/execs${q}`);
const forbidden = expect.objectContaining({ code: "EFORBIDDEN" });
const unauthorized = expect.objectContaining({ code: "EUNAUTHORIZED" });

describe("Host check", () => {
  const auth = new Auth({ token: null });

  it("accepts loopback names with or without a port, in any case", () => {
    for (const host of [
      "localhost",
      "localhost:8787",
      "LOCALHOST:1",
      "127.0.0.1:8787",
      "127.5.6.7",
      "[::1]:8787",
      "::1",
      "app.localhost:3000",
    ]) {
      expect(auth.checkHostAndOrigin(req({ host }))).toEqual({});
    }
  });

  it("refuses other names (a DNS-rebinding page), a missing Host, and look-alikes", () => {
    for (const host of [
      "evil.example:8787",
      "localhost.evil.example",
      "128.0.0.1",
      "10.0.0.1",
      "0.0.0.0",
    ]) {
      expect(() => auth.checkHostAndOrigin(req({ host }))).toThrow(forbidden);
    }
    expect(() => auth.checkHostAndOrigin(req({}))).toThrow(forbidden);
  });

  it("refuses a foreign Host before looking at a valid token", () => {
    const a = new Auth({ token: "t" });
    expect(() => a.check(req({ host: "evil.example", authorization: "Bearer t" }), url())).toThrow(
      forbidden,
    );
  });

  it("accepts configured hosts (port ignored), or any host with anyHost or '*'", () => {
    const a = new Auth({ token: null, allowedHosts: ["Box.Example:9000"] });
    expect(a.checkHostAndOrigin(req({ host: "box.example:8787" }))).toEqual({});
    expect(() => a.checkHostAndOrigin(req({ host: "other.example" }))).toThrow(forbidden);
    for (const opts of [{ anyHost: true }, { allowedHosts: ["*"] }]) {
      expect(
        new Auth({ token: null, ...opts }).checkHostAndOrigin(req({ host: "any.example" })),
      ).toEqual({});
    }
  });
});

describe("Origin check", () => {
  const auth = new Auth({ token: null, corsOrigins: ["https://app.example/"] });

  it("accepts no Origin and the server's own origin", () => {
    expect(auth.checkHostAndOrigin(req({ host: "localhost:8787", origin: "" }))).toEqual({});
    expect(
      auth.checkHostAndOrigin(req({ host: "localhost:8787", origin: "http://localhost:8787" })),
    ).toEqual({});
  });

  it("accepts a listed origin (trailing slash ignored) and says to answer it with CORS", () => {
    expect(
      auth.checkHostAndOrigin(req({ host: "localhost:8787", origin: "https://app.example" })),
    ).toEqual({
      corsOrigin: "https://app.example",
    });
  });

  it("refuses other origins, another port of the same host, 'null' and malformed origins", () => {
    for (const origin of [
      "https://evil.example",
      "http://localhost:9999",
      "null",
      "not a url",
      "http://app.example",
    ]) {
      expect(() => auth.checkHostAndOrigin(req({ host: "localhost:8787", origin }))).toThrow(
        forbidden,
      );
    }
  });
});

describe("token check", () => {
  const auth = new Auth({ token: "s3cret", cookieName: "tok" });
  const host = "localhost:8787";

  it("accepts a Bearer header with the token, in any case of 'Bearer'", () => {
    expect(auth.check(req({ host, authorization: "Bearer s3cret" }), url())).toEqual({});
    expect(auth.check(req({ host, authorization: "bearer  s3cret " }), url())).toEqual({});
  });

  it("refuses a wrong Bearer token even when the query or cookie holds the right one", () => {
    expect(() =>
      auth.check(
        req({ host, authorization: "Bearer nope", cookie: "tok=s3cret" }),
        url("?token=s3cret"),
      ),
    ).toThrow(unauthorized);
    expect(() => auth.check(req({ host, authorization: "Basic s3cret" }), url())).toThrow(
      unauthorized,
    );
  });

  it("accepts ?token= and hands back an HttpOnly SameSite=Strict cookie carrying it", () => {
    const r = auth.check(req({ host }), url("?token=s3cret"));
    expect(r.setCookie).toBe("tok=s3cret; HttpOnly; SameSite=Strict; Path=/");
    expect(() => auth.check(req({ host }), url("?token=wrong"))).toThrow(unauthorized);
  });

  it("accepts the cookie (URL-encoded or not) among others, and refuses a wrong one", () => {
    const special = new Auth({ token: "a b;c", cookieName: "tok" });
    expect(special.check(req({ host, cookie: "x=1; tok=a%20b%3Bc" }), url())).toEqual({});
    expect(auth.check(req({ host, cookie: "tok=s3cret" }), url())).toEqual({});
    expect(() => auth.check(req({ host, cookie: "tok=%E0%A4%A" }), url())).toThrow(unauthorized);
    expect(() => auth.check(req({ host, cookie: "other=s3cret" }), url())).toThrow(
      expect.objectContaining({
        code: "EUNAUTHORIZED",
        message: expect.stringContaining("missing token"),
      }),
    );
  });

  it("needs no token when token auth is off, but still checks Host", () => {
    const open = new Auth({ token: null });
    expect(open.check(req({ host }), url())).toEqual({});
    expect(open.tokenMatches(undefined)).toBe(true);
    expect(() => open.check(req({ host: "evil.example" }), url())).toThrow(forbidden);
  });

  it("matches exactly the token, never an empty or absent candidate (property)", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.string(), (token, candidate) => {
        const a = new Auth({ token });
        expect(a.tokenMatches(candidate)).toBe(candidate === token);
        expect(a.tokenMatches(token)).toBe(true);
        expect(a.tokenMatches(undefined)).toBe(false);
        expect(a.tokenMatches(null)).toBe(false);
      }),
      { numRuns: 50 },
    );
  });
});

describe("generateToken", () => {
  it("makes distinct 32-character base64url tokens", () => {
    const a = generateToken();
    expect(a).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(generateToken()).not.toBe(a);
  });
});
