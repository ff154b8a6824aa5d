// Limits against denial of service, through real servers and sockets:
// slow connections without a token cannot lock out a client with one (the
// server runs in a child process with a low open-files limit, as a host's
// `ulimit -n` would be); concurrent /result answers are bounded; A@UI
// events are bounded in bytes, not only in count.

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Computer } from "../src/runtime/computer.js";
import type { ComputerApi, ExecHandle } from "../src/runtime/types.js";
import { createComputerServer } from "../src/server/app.js";
import { ensureDistBuilt } from "./support/dist.js";
import { type Harness, startServer } from "./support/server-harness.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const TOKEN = "a-long-enough-test-token";

describe("connection limits", () => {
  let child: ChildProcess | undefined;
  let base = "";
  const sockets: Socket[] = [];
  beforeAll(() => ensureDistBuilt(), 300_000);
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    if (child && child.exitCode === null) {
      const gone = new Promise((r) => child!.once("exit", r));
      child.kill("SIGKILL");
      await gone;
    }
    if (base) await rm(base, { recursive: true, force: true });
  });

  it("slow header-less connections without a token do not lock out an authenticated client", async () => {
    base = await mkdtemp(path.join(tmpdir(), "ac-slow-"));
    const script = `
      import { createComputerServer } from ${JSON.stringify(`${root}/dist/server/app.js`)};
      import { Computer } from ${JSON.stringify(`${root}/dist/runtime/computer.js`)};
      import { mkdirSync } from "node:fs";
      const ws = ${JSON.stringify(`${base}/ws`)}; mkdirSync(ws);
      const s = createComputerServer({ workspace: ws, port: 0, token: ${JSON.stringify(TOKEN)},
        logger: false, computer: (observer) => new Computer({ workspace: ws, observer }) });
      console.log(await s.listen());`;
    child = spawn(
      "/bin/sh",
      ["-c", 'ulimit -n 128 && exec "$0" --input-type=module -e "$1"', process.execPath, script],
      {
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    const url = await new Promise<string>((resolve, reject) => {
      child!.stdout!.once("data", (d) => resolve(String(d).trim()));
      child!.once("exit", (code) => reject(new Error(`server exited ${code}`)));
    });
    const u = new URL(url);
    // 300 connections that start a request and never finish its headers.
    for (let i = 0; i < 300; i++) {
      const s = connect(Number(u.port), u.hostname);
      s.on("error", () => {});
      s.write(`GET /v1/execs HTTP/1.1\r\nHost: ${u.host}\r\n`);
      sockets.push(s);
    }
    await new Promise((r) => setTimeout(r, 1000));
    const res = await fetch(`${url}/v1/execs`, {
      headers: { authorization: `Bearer ${TOKEN}` },
      signal: AbortSignal.timeout(5000),
    });
    expect(res.status).toBe(200);
    // Header time is bounded too: a slow connection is closed, not held for a minute.
    const slow = connect(Number(u.port), u.hostname);
    slow.on("error", () => {});
    slow.resume(); // read the server's answer, or its close is never seen
    slow.write(`GET /v1/execs HTTP/1.1\r\nHost: ${u.host}\r\n`);
    const closedAfter = await new Promise<number>((resolve) => {
      const t0 = Date.now();
      slow.once("close", () => resolve(Date.now() - t0));
    });
    expect(closedAfter).toBeLessThan(20_000);
  }, 60_000);
});

describe("/result concurrency", () => {
  it("at most maxConcurrentResults answers are assembled at once", async () => {
    const base = await mkdtemp(path.join(tmpdir(), "ac-result-"));
    let inFlight = 0;
    let peak = 0;
    const wrap = (h: ExecHandle): ExecHandle =>
      new Proxy(h, {
        get(target, prop, recv) {
          if (prop !== "result") return Reflect.get(target, prop, recv);
          return async (o?: { signal?: AbortSignal }) => {
            inFlight++;
            peak = Math.max(peak, inFlight);
            try {
              return await target.result(o);
            } finally {
              inFlight--;
            }
          };
        },
      });
    const server = createComputerServer({
      workspace: base,
      port: 0,
      token: TOKEN,
      logger: false,
      limits: { maxConcurrentResults: 3 },
      computer: (observer) => {
        const c = new Computer({ workspace: base, observer, heartbeatMs: 0 });
        return new Proxy(c, {
          get(target, prop, recv) {
            if (prop === "get") return async (id: string) => wrap(await target.get(id));
            const v = Reflect.get(target, prop, recv);
            return typeof v === "function" ? v.bind(target) : v;
          },
        }) as ComputerApi;
      },
    });
    const url = await server.listen();
    try {
      const auth = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };
      const created = await fetch(`${url}/v1/execs`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ command: "head -c 4000000 /dev/zero | tr '\\0' x" }),
      });
      const { id } = (await created.json()) as { id: string };
      const answers = await Promise.all(
        Array.from({ length: 20 }, () =>
          fetch(`${url}/v1/execs/${id}/result`, { headers: auth }).then(async (r) => ({
            status: r.status,
            body: (await r.json()) as { stdout: string },
          })),
        ),
      );
      for (const a of answers) {
        expect(a.status).toBe(200);
        expect(a.body.stdout.length).toBeGreaterThanOrEqual(4_000_000);
      }
      expect(peak).toBeGreaterThan(0);
      expect(peak).toBeLessThanOrEqual(3);
    } finally {
      await server.close();
      await rm(base, { recursive: true, force: true });
    }
  }, 120_000);
});

describe("A@UI events", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startServer();
  });
  afterAll(async () => {
    await h?.close();
  });

  it("a channel keeps UI events bounded in bytes, not only in count", async () => {
    const payload = "p".repeat(512 * 1024);
    for (let i = 0; i < 40; i++) {
      const r = await fetch(`${h.url}/v1/ui/big/events`, {
        method: "POST",
        headers: { authorization: `Bearer ${h.token}`, "content-type": "application/json" },
        body: JSON.stringify({ type: "Big:event", widgetId: "w", payload, timestamp: i }),
      });
      expect(r.status).toBeLessThan(300);
    }
    const r = await fetch(`${h.url}/v1/ui/big/events?after=0`, {
      headers: { authorization: `Bearer ${h.token}` },
    });
    // 40 x 512 KiB = 20 MiB posted; the default bound is 8 MiB, so the oldest are gone.
    expect(r.status).toBe(410);
    const body = (await r.json()) as { error: { code: string; earliestSeq: number } };
    expect(body.error.code).toBe("ELOG_TRUNCATED");
    expect(body.error.earliestSeq).toBeGreaterThan(20);
  });
});
