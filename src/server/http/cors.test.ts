// What an allowed foreign origin is told: its own origin back (never "*"),
// Vary: Origin, the readable headers, and on a preflight the methods, request
// headers and cache time; never credentials.
import type { ServerResponse } from "node:http";
import { describe, expect, it } from "vitest";
import { applyCors } from "./cors.js";

function fakeResponse() {
  const headers: Record<string, string> = {};
  const res = {
    setHeader(name: string, value: string) {
      headers[name.toLowerCase()] = value;
      return res;
    },
  };
  return { res: res as unknown as ServerResponse, headers };
}

describe("applyCors", () => {
  it("echoes the origin, varies on Origin and exposes x-request-id, location and mcp-session-id", () => {
    const { res, headers } = fakeResponse();
    applyCors(res, "https://app.example");
    expect(headers).toEqual({
      "access-control-allow-origin": "https://app.example",
      vary: "Origin",
      "access-control-expose-headers": "x-request-id, location, mcp-session-id",
    });
  });

  it("adds methods, request headers (incl. authorization and last-event-id) and max-age on a preflight", () => {
    const { res, headers } = fakeResponse();
    applyCors(res, "https://app.example", true);
    expect(headers["access-control-allow-methods"]).toBe("GET, POST, PUT, DELETE, OPTIONS");
    const allowed = headers["access-control-allow-headers"]!.split(", ");
    expect(allowed).toEqual(
      expect.arrayContaining(["authorization", "content-type", "last-event-id"]),
    );
    expect(headers["access-control-max-age"]).toBe("600");
  });

  it("never allows credentials", () => {
    const { res, headers } = fakeResponse();
    applyCors(res, "https://app.example", true);
    expect(headers).not.toHaveProperty("access-control-allow-credentials");
  });
});
