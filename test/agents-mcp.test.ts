// `agent-computer mcp` as a real process (dist/cli/main.js) driven by the real
// MCP SDK client over stdio: tool listing, every tool, progress keeping a
// short client timeout alive, 50 MB through an output budget with the middle
// fetched exactly, polling that never repeats or loses a byte, the text
// editor's cases and confinement, bad arguments, the persistent bash, and
// the same tools backed by a running server (--url).
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TOOL_NAMES } from "../src/agents/index.js";
import { ensureDistBuilt } from "./support/dist.js";
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

const textOf = (r: CallToolResult) => (r.content[0] as { text: string }).text;
/** The output part of an exec_command/write_stdin result. */
const outputOf = (text: string) => {
  const i = text.indexOf("\nOutput:\n");
  return i === -1 ? "" : text.slice(i + 9);
};

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

  it("bounds 50 MB of output; read_output returns the elided middle exactly (SHA-256)", async () => {
    const cmd = "seq 1 6500000";
    const expected = (await mcp.text("exec_command", { cmd: `${cmd} | sha256sum` })).match(
      /\n([0-9a-f]{64}) /,
    )![1];
    const opts = { timeout: 5000, resetTimeoutOnProgress: true, onprogress: () => {} };
    const r = await mcp.text("exec_command", { cmd, yield_time_ms: 600_000 }, opts);
    expect(r).toMatch(/^Process exited with code 0/);
    expect(r.length).toBeLessThan(40 * 1024);
    const out = outputOf(r);
    const m =
      /\n\[… (\d+) bytes left out here, starting at byte (\d+) of seq (\d+) and ending in seq \d+; read_output (\{.*?\}) returns them/.exec(
        out,
      )!;
    expect(m).not.toBeNull();
    const [bytes, offset, seq] = [Number(m[1]), Number(m[2]), Number(m[3])];
    expect(bytes).toBeGreaterThan(50_000_000);
    const call = JSON.parse(m[4]!);
    expect(call.after_seq).toBe(seq - 1);
    const head = out.slice(0, m.index);
    const tail = out.slice(out.indexOf("…]\n") + 3);
    const hash = createHash("sha256").update(head);
    let after = call.after_seq as number;
    let skip = offset;
    let need = bytes;
    while (need > 0) {
      const page = await mcp.text("read_output", {
        session_id: call.session_id,
        after_seq: after,
        max_bytes: 4 * 1024 * 1024,
      });
      const header = page.slice(0, page.indexOf("\n"));
      after = Number(/seq \d+ to (\d+)/.exec(header)![1]);
      let body = page.slice(header.length + 1);
      if (skip > 0) {
        const s = Math.min(skip, body.length);
        body = body.slice(s);
        skip -= s;
      }
      const take = body.slice(0, need);
      hash.update(take);
      need -= take.length;
    }
    hash.update(tail);
    expect(hash.digest("hex")).toBe(expected);
  }, 300_000);

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

  it("text editor: one match, zero, two, view ranges, insert at 0 and at the end, confinement", async () => {
    const edit = (a: Record<string, unknown>) => mcp.call("str_replace_based_edit_tool", a);
    const f = path.join(ws, "e.txt");
    await edit({ command: "create", path: "e.txt", file_text: "one\ntwo\ntwo\nthree\n" });
    const two = await edit({ command: "str_replace", path: "e.txt", old_str: "two", new_str: "2" });
    expect(two.isError).toBe(true);
    expect(textOf(two)).toContain("occurs 2 times in e.txt (lines 2, 3)");
    const zero = await edit({ command: "str_replace", path: "e.txt", old_str: "four" });
    expect(zero.isError).toBe(true);
    expect(textOf(zero)).toContain("did not appear verbatim");
    const one = await edit({ command: "str_replace", path: "e.txt", old_str: "one", new_str: "1" });
    expect(one.isError).toBeFalsy();
    expect(readFileSync(f, "utf8")).toBe("1\ntwo\ntwo\nthree\n");
    const range = textOf(await edit({ command: "view", path: "e.txt", view_range: [2, 3] }));
    expect(range.split("\n").slice(1).join("\n")).toBe("     2\ttwo\n     3\ttwo\n");
    expect(textOf(await edit({ command: "view", path: f, view_range: [4, -1] }))).toContain(
      "     4\tthree\n",
    );
    const bad = await edit({ command: "view", path: "e.txt", view_range: [3, 1] });
    expect(bad.isError).toBe(true);
    await edit({ command: "insert", path: "e.txt", insert_line: 0, insert_text: "zero\n" });
    await edit({ command: "insert", path: "e.txt", insert_line: 5, insert_text: "end" });
    expect(readFileSync(f, "utf8")).toBe("zero\n1\ntwo\ntwo\nthree\nend\n");
    symlinkSync("/etc", path.join(ws, "etc-link"));
    writeFileSync(path.join(dir, "outside.txt"), "secret");
    for (const p of [
      "../outside.txt",
      path.join(dir, "outside.txt"),
      "/etc/hostname",
      "etc-link/hostname",
      "a/../../outside.txt",
    ]) {
      for (const a of [
        { command: "view", path: p },
        { command: "create", path: p, file_text: "x" },
      ]) {
        const r = await edit(a);
        expect(r.isError, `${a.command} ${p}`).toBe(true);
        expect(textOf(r), p).toMatch(/outside the workspace|leaves the workspace/);
      }
    }
    expect(readFileSync(path.join(dir, "outside.txt"), "utf8")).toBe("secret");
  });

  it("answers bad arguments with tool errors, not protocol errors", async () => {
    for (const [name, a] of [
      ["exec_command", { cmd: 42 }],
      ["exec_command", { cmd: "true", max_output_bytes: 1 }],
      ["write_stdin", {}],
      ["str_replace_based_edit_tool", { command: "rename", path: "x" }],
      ["bash", { restart: "yes" }],
      ["read_file", { path: "missing.txt" }],
      ["no_such_tool", {}],
    ] as const) {
      const r = await mcp.call(name, a as Record<string, unknown>);
      expect(r.isError, name).toBe(true);
      expect(textOf(r).length, name).toBeGreaterThan(10);
    }
  });

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
