// `agent-computer mcp` as a real process (dist/cli/main.js) driven by the real
// MCP SDK client over stdio: tool listing, every tool, progress keeping a
// short client timeout alive, 50 MB through an output budget with the middle
// fetched exactly, polling that never repeats or loses a byte, the text
// editor's cases and confinement, bad arguments, the persistent bash, and
// the same tools backed by a running server (--url). The cases shared with
// the Streamable HTTP transport live in test/support/mcp-cases.ts.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TOOL_NAMES } from "../src/agents/index.js";
import { ensureDistBuilt } from "./support/dist.js";
import {
  badArgumentsCase,
  boundsLargeOutputCase,
  outputOf,
  textEditorCase,
  textOf,
} from "./support/mcp-cases.js";
import { startServer } from "./support/server-harness.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const cli = path.join(root, "dist/cli/main.js");

interface Session {
  client: Client;
  call(name: string, args: Record<string, unknown>, opts?: object): Promise<CallToolResult>;
  text(name: string, args: Record<string, unknown>, opts?: object): Promise<string>;
  close(): Promise<void>;
}

async function connect(args: string[], env: Record<string, string> = {}): Promise<Session> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [cli, "mcp", ...args],
    env: { ...(process.env as Record<string, string>), ...env },
    stderr: "inherit",
  });
  const client = new Client({ name: "agents-mcp-test", version: "1.0.0" });
  await client.connect(transport);
  const call = async (name: string, a: Record<string, unknown>, opts?: object) =>
    (await client.callTool({ name, arguments: a }, undefined, opts)) as CallToolResult;
  return {
    client,
    call,
    async text(name, a, opts) {
      const r = await call(name, a, opts);
      return (r.content[0] as { text: string }).text;
    },
    close: () => client.close(),
  };
}

let dir: string;
let ws: string;
let mcp: Session;

beforeAll(async () => {
  ensureDistBuilt();
  dir = mkdtempSync(path.join(tmpdir(), "ac-mcp-"));
  ws = path.join(dir, "ws");
  mkdirSync(ws);
  mcp = await connect([
    "--workspace",
    ws,
    "--bash-timeout",
    "1500",
    "--progress-interval",
    "250",
    "--log-max-bytes",
    String(128 * 1024 * 1024),
  ]);
}, 120_000);
afterAll(async () => {
  await mcp?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("agent-computer mcp --workspace (stdio)", () => {
  it("lists every tool with its JSON Schema and annotations", async () => {
    const { tools } = await mcp.client.listTools();
    expect(tools.map((t) => t.name)).toEqual(TOOL_NAMES);
    const exec = tools.find((t) => t.name === "exec_command")!;
    expect(exec.inputSchema).toMatchObject({ type: "object", required: ["cmd"] });
    expect(tools.find((t) => t.name === "read_file")!.annotations).toMatchObject({
      readOnlyHint: true,
    });
  });

  it("calls each tool", async () => {
    const ran = await mcp.text("exec_command", { cmd: "echo hi; echo oops >&2" });
    expect(ran).toMatch(/^Process exited with code 0\./);
    expect(outputOf(ran)).toBe("hi\noops\n");
    const run = await mcp.text("exec_command", { cmd: "cat", yield_time_ms: 100 });
    const id = /session_id "([^"]+)"/.exec(run)![1]!;
    expect(
      outputOf(
        await mcp.text("write_stdin", { session_id: id, chars: "abc\n", yield_time_ms: 300 }),
      ),
    ).toBe("abc\n");
    expect(await mcp.text("read_output", { session_id: id })).toMatch(
      /seq 1 to 1, 4 bytes[^\n]*\nabc\n$/,
    );
    expect(await mcp.text("list_sessions", {})).toContain(`${id}  [running]`);
    expect(await mcp.text("kill_session", { session_id: id })).toContain("killed by SIGTERM");
    expect(await mcp.text("bash", { command: "echo from-bash" })).toBe(
      "from-bash\n[exit status 0]",
    );
    expect(await mcp.text("write_file", { path: "w/a.txt", content: "A\n" })).toContain(
      "Wrote 2 bytes",
    );
    expect(await mcp.text("read_file", { path: "w/a.txt" })).toBe("A\n");
    expect(await mcp.text("list_directory", { path: "w" })).toMatch(/file\s+a\.txt\s+2/);
    const view = await mcp.text("str_replace_based_edit_tool", {
      command: "view",
      path: "w/a.txt",
    });
    expect(view).toContain("     1\tA");
  });

  it("keeps a call alive past a short client timeout with progress notifications", async () => {
    const progress: string[] = [];
    const opts = {
      timeout: 1000,
      resetTimeoutOnProgress: true,
      onprogress: (p: { message?: string }) => progress.push(p.message ?? ""),
    };
    const chatty = await mcp.text(
      "exec_command",
      { cmd: "for i in 1 2 3 4 5 6; do echo tick$i; sleep 0.4; done", yield_time_ms: 60000 },
      opts,
    );
    expect(chatty).toMatch(/^Process exited with code 0/);
    expect(outputOf(chatty)).toContain("tick6");
    expect(progress.length).toBeGreaterThanOrEqual(3);
    progress.length = 0;
    const silent = await mcp.text(
      "exec_command",
      { cmd: "sleep 2.5; echo done", yield_time_ms: 60000 },
      opts,
    );
    expect(outputOf(silent)).toBe("done\n");
    expect(progress.some((m) => /running for/.test(m))).toBe(true);
    // Without resetting on progress, the same call dies at the client's timeout.
    await expect(
      mcp.call("exec_command", { cmd: "sleep 2.5", yield_time_ms: 60000 }, { timeout: 1000 }),
    ).rejects.toThrow(/timed out/i);
  });

  it(
    "bounds 50 MB of output; read_output returns the elided middle exactly (SHA-256)",
    () => boundsLargeOutputCase(mcp.client),
    300_000,
  );

  it("write_stdin polling at random intervals never repeats or loses a byte", async () => {
    const lines = 300;
    const first = await mcp.text("exec_command", {
      cmd: `for i in $(seq 1 ${lines}); do echo line$i; sleep 0.005; done`,
      yield_time_ms: 50,
    });
    const id = /session_id "([^"]+)"/.exec(first)![1]!;
    let all = outputOf(first);
    let polls = 0;
    for (;;) {
      await new Promise((r) => setTimeout(r, Math.random() * 60));
      const t = await mcp.text("write_stdin", {
        session_id: id,
        yield_time_ms: Math.floor(Math.random() * 80),
      });
      polls++;
      all += outputOf(t);
      if (t.startsWith("Process exited")) break;
    }
    expect(polls).toBeGreaterThan(3);
    expect(all).toBe(Array.from({ length: lines }, (_, i) => `line${i + 1}\n`).join(""));
  }, 60_000);

  it("text editor: one match, zero, two, view ranges, insert at 0 and at the end, confinement", () =>
    textEditorCase(mcp.client, ws));

  it("answers bad arguments with tool errors, not protocol errors", () =>
    badArgumentsCase(mcp.client));

  it("bash keeps cd, exports and functions and survives a hung command", async () => {
    mkdirSync(path.join(ws, "deep"), { recursive: true });
    await mcp.text("bash", { command: "cd deep; export K=v; g() { echo g:$1; }" });
    expect(await mcp.text("bash", { command: "basename $PWD; echo $K; g 1" })).toBe(
      "deep\nv\ng:1\n[exit status 0]",
    );
    const hung = await mcp.text("bash", { command: "sleep 100" });
    expect(hung).toContain("timed out");
    expect(await mcp.text("bash", { command: "basename $PWD" })).toBe("deep\n[exit status 0]");
  });
});

describe("agent-computer mcp --url (a running server)", () => {
  it("serves the same tools over the SDK client and the files API", async () => {
    const h = await startServer();
    const remote = await connect([], { AGENT_COMPUTER_URL: h.url, AGENT_COMPUTER_TOKEN: h.token });
    try {
      expect(outputOf(await remote.text("exec_command", { cmd: "echo remote" }))).toBe("remote\n");
      expect(
        await remote.text("bash", { command: "cd /tmp 2>/dev/null; cd - >/dev/null; echo ok" }),
      ).toBe("ok\n[exit status 0]");
      await remote.call("str_replace_based_edit_tool", {
        command: "create",
        path: "r.txt",
        file_text: "a\nb\n",
      });
      expect(readFileSync(path.join(h.workspace, "r.txt"), "utf8")).toBe("a\nb\n");
      const pwd = (await remote.text("bash", { command: "pwd" })).split("\n")[0]!;
      const abs = await remote.text("str_replace_based_edit_tool", {
        command: "view",
        path: `${pwd}/r.txt`,
      });
      expect(abs).toContain("     2\tb");
      const out = await remote.call("read_file", { path: "/etc/hostname" });
      expect(out.isError).toBe(true);
      expect(textOf(out)).toContain("outside the workspace");
    } finally {
      await remote.close();
      await h.close();
    }
  });
});
