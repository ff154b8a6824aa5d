// Errors -> HTTP without sockets: our errors keep their code and status (the
// code's usual one unless the throw site chose another), fs errors get our
// codes, anything else is a 500 EINTERNAL that does not echo its message; the
// JSON body, the in-band error frame and the upgrade refusal all say the same.

import type { ServerResponse } from "node:http";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { ComputerError } from "../../wire/errors.js";
import { errorBody, errorFrame, rejectUpgrade, sendError, toComputerError } from "./errors.js";

/** A stand-in for ServerResponse that records what was sent. */
function fakeResponse(headersSent = false) {
  const headers: Record<string, unknown> = {};
  const res = {
    statusCode: 200,
    headersSent,
    destroyed: false,
    body: undefined as string | undefined,
    headers,
    setHeader(k: string, v: unknown) {
      headers[k.toLowerCase()] = v;
    },
    end(body?: string) {
      res.body = body;
    },
    destroy() {
      res.destroyed = true;
    },
  };
  return res;
}

describe("backend errors are mapped, not echoed", () => {
  it("an EINTERNAL error (e.g. a Redis OOM reply) never reaches the client as text", () => {
    const raw = new ComputerError(
      "EINTERNAL",
      "redis: OOM command not allowed when used memory > 'maxmemory' at /var/lib/redis",
    );
    expect(errorBody(raw)).toEqual({ error: { code: "EINTERNAL", message: "internal error" } });
    expect(errorFrame("r1", raw)).toMatchObject({ code: "EINTERNAL", message: "internal error" });
  });
});

describe("toComputerError", () => {
  it("keeps our errors, with their status", () => {
    const usual = new ComputerError("ELIMIT", "too many");
    expect(toComputerError(usual)).toBe(usual);
    expect(usual.status).toBe(429);
    const chosen = new ComputerError("EISDIR", "a dir", { status: 409 });
    expect(toComputerError(chosen).status).toBe(409);
  });

  it("maps Node's fs codes to ours", () => {
    // Codes Node shares with us (ENOENT, EISDIR, ...) pass with Node's message.
    const shared = Object.assign(new Error("ENOENT: no such file or directory"), {
      code: "ENOENT",
    });
    expect(toComputerError(shared)).toMatchObject({ code: "ENOENT", status: 404 });
    // The others become ours, with a generic message.
    const cases: [string, string, number][] = [
      ["EACCES", "EFORBIDDEN", 403],
      ["EPERM", "EFORBIDDEN", 403],
      ["ELOOP", "EFORBIDDEN", 403],
      ["ENAMETOOLONG", "EINVAL", 400],
      ["EFBIG", "ETOOLARGE", 413],
      ["ENOSPC", "ELIMIT", 429],
    ];
    for (const [fs, code, status] of cases) {
      const err = Object.assign(new Error(`${fs}: /secret/path`), { code: fs });
      const e = toComputerError(err);
      expect([e.code, e.status], fs).toEqual([code, status]);
      expect(e.message).not.toContain("/secret/path");
    }
  });

  it("anything else is a 500 EINTERNAL that hides its message", () => {
    for (const thrown of [new Error("db password is hunter2"), "boom", null, { code: "EWHAT" }]) {
      const e = toComputerError(thrown);
      expect([e.code, e.status, e.message]).toEqual(["EINTERNAL", 500, "internal error"]);
    }
  });

  it("an error-like object with one of our codes keeps it (another copy of the module)", () => {
    const e = toComputerError({ code: "ELOG_TRUNCATED", message: "gone", earliestSeq: 7 });
    expect([e.code, e.status, e.message, e.earliestSeq]).toEqual([
      "ELOG_TRUNCATED",
      410,
      "gone",
      7,
    ]);
  });
});

describe("errorBody and errorFrame", () => {
  it("carry code, message and earliestSeq", () => {
    const err = new ComputerError("ELOG_TRUNCATED", "dropped", { earliestSeq: 42 });
    expect(errorBody(err)).toEqual({
      error: { code: "ELOG_TRUNCATED", message: "dropped", earliestSeq: 42 },
    });
    expect(errorFrame("r1", err)).toEqual({
      id: "r1",
      name: "error",
      code: "ELOG_TRUNCATED",
      message: "dropped",
      earliestSeq: 42,
    });
    expect(errorFrame(undefined, new ComputerError("EINVAL", "bad"))).toEqual({
      name: "error",
      code: "EINVAL",
      message: "bad",
    });
  });
});

describe("sendError", () => {
  it("sends the status and JSON body, and the bearer challenge with a 401", () => {
    const res = fakeResponse();
    sendError(res as unknown as ServerResponse, new ComputerError("EUNAUTHORIZED", "no token"));
    expect(res.statusCode).toBe(401);
    expect(JSON.parse(res.body!)).toEqual({
      error: { code: "EUNAUTHORIZED", message: "no token" },
    });
    expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(res.headers["www-authenticate"]).toBe('Bearer realm="agent-computer"');
  });

  it("cuts the response when headers already went out", () => {
    const res = fakeResponse(true);
    sendError(res as unknown as ServerResponse, new ComputerError("EINVAL", "late"));
    expect(res.destroyed).toBe(true);
    expect(res.body).toBeUndefined();
  });
});

describe("rejectUpgrade", () => {
  it("answers on the raw socket with the status line and JSON body", async () => {
    const socket = new PassThrough();
    const chunks: Buffer[] = [];
    socket.on("data", (c: Buffer) => chunks.push(c));
    const ended = new Promise((r) => socket.on("end", r));
    rejectUpgrade(socket, new ComputerError("EUNAVAILABLE", "shutting down"));
    await ended;
    const text = Buffer.concat(chunks).toString();
    expect(text).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
    expect(text).toContain("Connection: close\r\n");
    expect(text.slice(text.indexOf("\r\n\r\n") + 4)).toBe(
      '{"error":{"code":"EUNAVAILABLE","message":"shutting down"}}',
    );
  });
});
