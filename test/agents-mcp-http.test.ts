// Streamable HTTP MCP at /mcp of a real server, driven by the real MCP SDK
// client: auth (401 without the token, 403 for a foreign Origin), tool
// listing and calls, a long call kept alive by progress under a short client
// timeout, lossless write_stdin polling, bash surviving a hung command, and a TCP cut mid-call after which the client resumes with
// Last-Event-ID and gets the result with no lost or repeated message — with the
// memory, SQLite and (when redis-server exists) Redis event logs. Sessions:
// DELETE ends one, idle ones are closed, their number is bounded. With the
// memory log, also the cases shared with stdio (test/support/mcp-cases.ts):
// 50 MB through the output budget, the text editor, bad arguments.
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult, Progress } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TOOL_NAMES } from "../src/agents/index.js";
import { MCP_LOG_PREFIX } from "../src/agents/mcp-event-store.js";
import type { ComputerOptions } from "../src/runtime/computer.js";
import {
  badArgumentsCase,
  boundsLargeOutputCase,
  textEditorCase,
  textOf,
} from "./support/mcp-cases.js";
import { type RedisServer, redisAvailable, startRedis } from "./support/redis-server.js";
import { type Harness, startServer } from "./support/server-harness.js";

/** A TCP proxy whose open connections can all be cut at once (a network drop). */
async function startCutProxy(target: string) {
  const t = new URL(target);
  const sockets = new Set<net.Socket>();
  const heads: string[] = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(t.port), t.hostname);
    sockets.add(client);
    sockets.add(upstream);
    client.on("data", (c: Buffer) => {
      const head = c.subarray(0, 2000).toString("latin1");
      if (/^[A-Z]+ \//.test(head)) heads.push(head);
    });
    client.pipe(upstream);
    upstream.pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("close", drop);
    upstream.on("close", drop);
    client.on("error", () => {});
    upstream.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    heads,
    cutAll() {
      for (const s of sockets) s.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

async function connect(base: string, token: string): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
    reconnectionOptions: {
      initialReconnectionDelay: 50,
      maxReconnectionDelay: 500,
      reconnectionDelayGrowFactor: 1.5,
      maxRetries: 20,
    },
  });
  const client = new Client({ name: "agents-mcp-http-test", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

/**
 * The transport cases, against one event log. With `shared`, also the cases
 * written once in test/support/mcp-cases.ts for both transports (run with
 * the memory log only: they test the tools, not the log, and the 50 MB one
 * is slow).
 */
function suite(
  name: string,
  logSpec: () => ComputerOptions["eventLog"] | undefined,
  { shared = false, polling = true } = {},
) {
  describe(`/mcp over Streamable HTTP (${name} event log)`, () => {
    let h: Harness;
    let client: Client;
    beforeAll(async () => {
      const eventLog = logSpec();
      h = await startServer({
        // The shared 50 MB case reads the whole run back: the log must hold it.
        computer: eventLog === undefined ? { logMaxBytes: 128 * 1024 * 1024 } : { eventLog },
        server: { mcp: { tools: { progressIntervalMs: 200, bashTimeoutMs: 1500 } } },
      });
      client = await connect(h.url, h.token);
    }, 60_000);
    afterAll(async () => {
      await client?.close();
      await h?.close();
    });

    it("lists the tools and calls them", async () => {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual([...TOOL_NAMES].sort());
      const call = async (tool: string, args: Record<string, unknown>) =>
        (await client.callTool({ name: tool, arguments: args })) as CallToolResult;

      const echo = await call("exec_command", { cmd: "echo hi; echo err >&2" });
      expect(echo.isError).toBeFalsy();
      expect(textOf(echo)).toMatch(/hi/);
      expect(textOf(echo)).toMatch(/err/);
      expect(textOf(echo)).toMatch(/exited with code 0/);

      expect(textOf(await call("bash", { command: "cd /tmp && export X=7" }))).not.toMatch(/Error/);
      expect(textOf(await call("bash", { command: "echo $X $(pwd)" }))).toMatch(/7 \/tmp/);

      await call("write_file", { path: "a.txt", content: "one\ntwo\n" });
      expect(textOf(await call("read_file", { path: "a.txt" }))).toMatch(/one\ntwo/);
      const edit = await call("str_replace_based_edit_tool", {
        command: "str_replace",
        path: "a.txt",
        old_str: "two",
        new_str: "three",
      });
      expect(edit.isError).toBeFalsy();
      expect(textOf(await call("list_directory", { path: "." }))).toMatch(/a\.txt/);

      const running = textOf(
        await call("exec_command", { cmd: "cat", yield_time_ms: 100, tty: false }),
      );
      const sid = /session_id[:\s"]+([A-Za-z0-9-]+)/.exec(running)?.[1];
      expect(sid, running).toBeTruthy();
      expect(textOf(await call("write_stdin", { session_id: sid, chars: "ping\n" }))).toMatch(
        /ping/,
      );
      expect(textOf(await call("read_output", { session_id: sid }))).toMatch(/ping/);
      expect(textOf(await call("list_sessions", {}))).toContain(sid!);
      expect((await call("kill_session", { session_id: sid })).isError).toBeFalsy();

      const bad = await call("exec_command", { cmd: 42 });
      expect(bad.isError).toBe(true);
    });

    it("keeps a long call alive with progress under a short client timeout", async () => {
      const seen: Progress[] = [];
      const r = (await client.callTool(
        { name: "exec_command", arguments: { cmd: "sleep 2; echo done", yield_time_ms: 10_000 } },
        undefined,
        { timeout: 700, resetTimeoutOnProgress: true, onprogress: (p) => seen.push(p) },
      )) as CallToolResult;
      expect(textOf(r)).toMatch(/done/);
      expect(seen.length).toBeGreaterThanOrEqual(2);
    });

    it("resumes a call cut mid-stream with Last-Event-ID: no message lost or repeated", async () => {
      const proxy = await startCutProxy(h.url);
      const c = await connect(proxy.url, h.token);
      try {
        const seen: number[] = [];
        let cut = false;
        const cmd = "for i in $(seq 1 25); do echo line$i; sleep 0.1; done";
        const r = (await c.callTool(
          { name: "exec_command", arguments: { cmd, yield_time_ms: 20_000 } },
          undefined,
          {
            timeout: 3000,
            resetTimeoutOnProgress: true,
            onprogress: (p) => {
              seen.push(p.progress);
              if (!cut && seen.length === 4) {
                cut = true;
                proxy.cutAll();
              }
            },
          },
        )) as CallToolResult;
        expect(cut).toBe(true);
        const text = textOf(r);
        for (let i = 1; i <= 25; i++) expect(text).toContain(`line${i}\n`);
        // Progress values are 1, 2, 3, ... as the server sent them: a gap is a
        // lost message, a repeat a replayed one.
        expect(seen).toEqual(seen.map((_, i) => i + 1));
        expect(seen.length).toBeGreaterThan(4);
        const resumed = proxy.heads.filter(
          (x) => /^GET \/mcp/.test(x) && /last-event-id:/i.test(x),
        );
        expect(resumed.length).toBeGreaterThanOrEqual(1);
      } finally {
        await c.close();
        await proxy.close();
      }
    }, 30_000);

    it.runIf(polling)(
      "write_stdin polling at random intervals never repeats or loses a byte",
      async () => {
        const text = async (tool: string, args: Record<string, unknown>) =>
          textOf((await client.callTool({ name: tool, arguments: args })) as CallToolResult);
        const outputOf = (t: string) => {
          const i = t.indexOf("\nOutput:\n");
          return i === -1 ? "" : t.slice(i + 9);
        };
        const lines = 200;
        const first = await text("exec_command", {
          cmd: `for i in $(seq 1 ${lines}); do echo line$i; sleep 0.005; done`,
          yield_time_ms: 50,
        });
        const id = /session_id "([^"]+)"/.exec(first)![1]!;
        let all = outputOf(first);
        let polls = 0;
        for (;;) {
          await new Promise((r) => setTimeout(r, Math.random() * 60));
          const t = await text("write_stdin", {
            session_id: id,
            yield_time_ms: Math.floor(Math.random() * 80),
          });
          polls++;
          all += outputOf(t);
          if (t.startsWith("Process exited")) break;
        }
        expect(polls).toBeGreaterThan(2);
        expect(all).toBe(Array.from({ length: lines }, (_, i) => `line${i + 1}\n`).join(""));
      },
      60_000,
    );

    it("bash survives a hung command: the session stays usable in the same directory", async () => {
      const text = async (command: string) =>
        textOf((await client.callTool({ name: "bash", arguments: { command } })) as CallToolResult);
      await text("cd /tmp; export HUNG=1");
      expect(await text("echo $HUNG")).toBe("1\n[exit status 0]");
      // A timed-out command costs the shell (exports reset), never the session or its cwd.
      expect(await text("sleep 100")).toContain("timed out");
      expect(await text("echo $PWD; export AGAIN=2; echo $AGAIN")).toBe("/tmp\n2\n[exit status 0]");
    });

    if (shared) {
      it(
        "bounds 50 MB of output; read_output returns the elided middle exactly (SHA-256)",
        () => boundsLargeOutputCase(client),
        300_000,
      );

      it("text editor: one match, zero, two, view ranges, insert at 0 and at the end, confinement", () =>
        textEditorCase(client, h.workspace));

      it("answers bad arguments with tool errors, not protocol errors", () =>
        badArgumentsCase(client));
    }

    it("keeps MCP streams out of the execution listing", async () => {
      const eventLog = await h.computer.eventLog();
      expect((await eventLog.list()).some((r) => r.id.startsWith(MCP_LOG_PREFIX))).toBe(true);
      expect((await h.computer.list()).some((r) => r.id.startsWith("~"))).toBe(false);
    });
  });
}

suite("memory", () => undefined, { shared: true });
const dbDir = mkdtempSync(path.join(tmpdir(), "ac-mcp-http-"));
afterAll(() => rmSync(dbDir, { recursive: true, force: true }));
suite("SQLite", () => `sqlite:${path.join(dbDir, "log.db")}`);

const hasRedis = redisAvailable();
let redis: RedisServer | undefined;
describe.skipIf(!hasRedis)("with Redis", () => {
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.close();
  });
  suite("Redis", () => `${redis!.url}/0?prefix=mcp${process.pid}:`);
});

describe("/mcp access and sessions", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startServer({
      server: { mcp: { maxSessions: 2, idleMs: 300 }, corsOrigins: ["https://app.example"] },
    });
  });
  afterAll(async () => {
    await h?.close();
  });
  const init = {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: "raw", version: "1" },
    },
  };
  const post = (headers: Record<string, string>) =>
    fetch(`${h.url}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...headers,
      },
      body: JSON.stringify(init),
    });

  it("refuses a missing token (401) and a foreign Origin (403)", async () => {
    const noToken = await post({});
    expect(noToken.status).toBe(401);
    expect((await noToken.json()).error.code).toBe("EUNAUTHORIZED");
    const foreign = await post({
      authorization: `Bearer ${h.token}`,
      origin: "https://evil.example",
    });
    expect(foreign.status).toBe(403);
    expect((await foreign.json()).error.code).toBe("EFORBIDDEN");
    const get = await fetch(`${h.url}/mcp`, { headers: { accept: "text/event-stream" } });
    expect(get.status).toBe(401);
  });

  it("lets an allowed browser origin send and read the MCP headers", async () => {
    const pre = await fetch(`${h.url}/mcp`, {
      method: "OPTIONS",
      headers: { origin: "https://app.example", "access-control-request-method": "POST" },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get("access-control-allow-headers")).toMatch(/mcp-session-id/);
    expect(pre.headers.get("access-control-allow-headers")).toMatch(/mcp-protocol-version/);
    const r = await post({ authorization: `Bearer ${h.token}`, origin: "https://app.example" });
    expect(r.status).toBe(200);
    expect(r.headers.get("access-control-expose-headers")).toMatch(/mcp-session-id/);
    await r.text();
  });

  it("answers an unknown session with 404 and ends sessions on DELETE and when idle", async () => {
    const unknown = await post({ authorization: `Bearer ${h.token}`, "mcp-session-id": "nope" });
    expect(unknown.status).toBe(404);

    const a = await connect(h.url, h.token);
    const transport = a.transport as StreamableHTTPClientTransport;
    const sid = transport.sessionId!;
    expect(sid).toBeTruthy();
    await transport.terminateSession(); // DELETE /mcp
    const after = await post({ authorization: `Bearer ${h.token}`, "mcp-session-id": sid });
    expect(after.status).toBe(404);
    await a.close();

    // Idle: a raw session with no open stream is closed after idleMs.
    const r = await post({ authorization: `Bearer ${h.token}` });
    expect(r.status).toBe(200);
    const idle = r.headers.get("mcp-session-id")!;
    await r.text();
    await new Promise((res) => setTimeout(res, 800));
    const gone = await post({ authorization: `Bearer ${h.token}`, "mcp-session-id": idle });
    expect(gone.status).toBe(404);
  });

  it("bounds the number of sessions: idle ones make room, busy ones are kept", async () => {
    // Two clients hold their standalone GET streams open: both busy.
    const a = await connect(h.url, h.token);
    const b = await connect(h.url, h.token);
    await a.listTools();
    await b.listTools();
    await new Promise((res) => setTimeout(res, 100));
    const third = await post({ authorization: `Bearer ${h.token}` });
    expect(third.status).toBe(429);
    expect((await third.json()).error.code).toBe("ELIMIT");
    await a.close(); // its GET stream ends: idle, so it can be evicted
    await new Promise((res) => setTimeout(res, 100));
    const fourth = await post({ authorization: `Bearer ${h.token}` });
    expect(fourth.status).toBe(200);
    await fourth.text();
    await b.close();
  });
});
