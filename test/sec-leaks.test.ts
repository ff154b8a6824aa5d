// Nothing leaks, nothing misleads, through a real server: no absolute server
// path in error messages, the auth cookie refused from a foreign origin,
// short tokens refused at start, nosniff on JSON, and the SDK's files.*
// refusing paths that fetch would silently rewrite.

import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ComputerClient } from "../src/client/client.js";
import { createComputerServer } from "../src/server/app.js";
import { type Harness, startServer } from "./support/server-harness.js";

let h: Harness;
beforeAll(async () => {
  h = await startServer({ server: { corsOrigins: ["http://allowed.example"] } });
});
afterAll(async () => {
  await h?.close();
});

const auth = () => ({ authorization: `Bearer ${h.token}` });

describe("no server paths or raw errors in responses", () => {
  it("files errors name paths relative to the workspace", async () => {
    await mkdir(path.join(h.workspace, "full/sub"), { recursive: true });
    await writeFile(path.join(h.workspace, "full/sub/x"), "x");
    await writeFile(path.join(h.workspace, "plain"), "x");
    const cases: Array<[string, string, string]> = [
      ["GET", "/v1/files/missing/file", "ENOENT"],
      ["GET", "/v1/files/missing?list", "ENOENT"],
      ["DELETE", "/v1/files/full", "ENOTEMPTY"],
      ["DELETE", "/v1/files/nothing-here", "ENOENT"],
      ["PUT", "/v1/files/plain/child", "ENOTDIR"],
      ["GET", "/v1/files/plain?list", "ENOTDIR"],
    ];
    for (const [method, p, code] of cases) {
      const r = await fetch(h.url + p, {
        method,
        headers: auth(),
        ...(method === "PUT" ? { body: "x" } : {}),
      });
      const text = await r.text();
      expect(JSON.parse(text).error.code, `${method} ${p}`).toBe(code);
      expect(text, `${method} ${p}`).not.toContain(h.workspace);
      expect(text, `${method} ${p}`).not.toMatch(/"\/(tmp|home|work|root)\//);
    }
  });

  it("an exec with a missing cwd does not reveal the workspace path", async () => {
    const r = await fetch(`${h.url}/v1/execs`, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/json" },
      body: JSON.stringify({ command: "true", cwd: "no/such/dir" }),
    });
    const text = await r.text();
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(text).not.toContain(h.workspace);
  });
});

describe("auth", () => {
  it("the cookie alone is refused from a foreign (even allowed) origin; the bearer is accepted", async () => {
    const port = new URL(h.url).port;
    const cookie = `agent_computer_token_${port}=${encodeURIComponent(h.token)}`;
    const own = await fetch(`${h.url}/v1/execs`, { headers: { cookie } });
    expect(own.status).toBe(200);
    const foreign = await fetch(`${h.url}/v1/execs`, {
      headers: { cookie, origin: "http://allowed.example" },
    });
    expect(foreign.status).toBe(401);
    expect((await foreign.json()).error.code).toBe("EUNAUTHORIZED");
    const bearer = await fetch(`${h.url}/v1/execs`, {
      headers: { ...auth(), origin: "http://allowed.example" },
    });
    expect(bearer.status).toBe(200);
  });

  it("an empty or short token is refused at start with a clear message", () => {
    for (const token of ["", "short", "fifteen-chars!!"]) {
      expect(() =>
        createComputerServer({
          computer: {} as never,
          workspace: h.workspace,
          token,
          logger: false,
        }),
      ).toThrow(/at least 16 characters/);
    }
  });

  it("JSON responses carry X-Content-Type-Options: nosniff (success and error)", async () => {
    const ok = await fetch(`${h.url}/v1/execs`, { headers: auth() });
    expect(ok.headers.get("x-content-type-options")).toBe("nosniff");
    const err = await fetch(`${h.url}/v1/execs/nope`, { headers: auth() });
    expect(err.status).toBe(404);
    expect(err.headers.get("x-content-type-options")).toBe("nosniff");
    const unauth = await fetch(`${h.url}/v1/execs`);
    expect(unauth.headers.get("x-content-type-options")).toBe("nosniff");
  });
});

describe("SDK files paths", () => {
  it("files.* refuse .., absolute and NUL paths with EINVAL before any request", async () => {
    let requests = 0;
    const client = new ComputerClient({
      url: h.url,
      token: h.token,
      fetch: (input, init) => {
        requests++;
        return fetch(input, init);
      },
    });
    for (const p of ["../x", "a/../../etc/passwd", "/etc/passwd", "a\0b", "./x", "a//b"]) {
      await expect(client.files.read(p), p).rejects.toMatchObject({ code: "EINVAL" });
      await expect(client.files.write(p, "x"), p).rejects.toMatchObject({ code: "EINVAL" });
      await expect(client.files.remove(p), p).rejects.toMatchObject({ code: "EINVAL" });
      await expect(client.files.list(p), p).rejects.toMatchObject({ code: "EINVAL" });
    }
    expect(requests).toBe(0);
    // The root is still listable, both spellings.
    await client.files.list("");
    await client.files.list("/");
  });
});
