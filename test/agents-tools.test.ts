// The agent tool layer over the in-process Computer (fast, no MCP): each
// tool's semantics, output budgets, session positions, the persistent bash,
// the text editor's cases and confinement, and bad input as tool errors.
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  type AgentTools,
  createAgentTools,
  TOOL_NAMES,
  toAnthropicTools,
  toOpenAITools,
} from "../src/agents/index.js";
import { Computer } from "../src/index.js";
import { tempDir } from "./runtime-support.js";

let ws: ReturnType<typeof tempDir>;
let computer: Computer;
let tools: AgentTools;

beforeEach(() => {
  ws = tempDir();
  computer = new Computer({ workspace: ws.dir, killGraceMs: 500 });
  tools = createAgentTools(computer, { bashTimeoutMs: 1500, progressIntervalMs: 100 });
});
afterEach(async () => {
  await tools.close();
  await computer.close();
  ws.cleanup();
});

const call = (name: string, input: unknown) => tools.call(name, input);

describe("definitions and formats", () => {
  it("lists every tool with a JSON Schema, and emits Anthropic and OpenAI formats", () => {
    expect(tools.definitions.map((d) => d.name)).toEqual(TOOL_NAMES);
    const exec = tools.definitions.find((d) => d.name === "exec_command")!;
    expect(exec.inputSchema).toMatchObject({ type: "object", required: ["cmd"] });
    expect(JSON.stringify(exec.inputSchema)).not.toContain("9007199254740991");
    const anthropic = toAnthropicTools(tools.definitions);
    expect(anthropic).toContainEqual({ type: "bash_20250124", name: "bash" });
    expect(anthropic).toContainEqual({
      type: "text_editor_20250728",
      name: "str_replace_based_edit_tool",
    });
    const custom = toAnthropicTools(tools.definitions, { serverTools: false });
    expect(custom.find((t) => t.name === "bash")).toHaveProperty("input_schema");
    const openai = toOpenAITools(tools.definitions);
    expect(openai[0]).toMatchObject({ type: "function", name: "exec_command", strict: false });
  });
});

describe("exec_command and sessions", () => {
  it("a poll that finds the execution ended after its deadline still returns the last output", async () => {
    const r = await call("exec_command", {
      cmd: "sleep 0.3; echo last-words; exit 3",
      yield_time_ms: 50,
    });
    expect(r.data).toMatchObject({ running: true });
    // A slow log: the state lookup after the poll's deadline takes long
    // enough for the command to write its last line and exit meanwhile.
    const get = computer.get.bind(computer);
    computer.get = async (id) => {
      const h = await get(id);
      return new Proxy(h, {
        get(target, key) {
          if (key === "info") {
            return async () => {
              await new Promise((res) => setTimeout(res, 800));
              return target.info();
            };
          }
          const v = Reflect.get(target, key, target);
          return typeof v === "function" ? v.bind(target) : v;
        },
      });
    };
    const p = await call("write_stdin", { session_id: r.data!.session_id, yield_time_ms: 0 });
    expect(p.text).toContain("Process exited with code 3");
    expect(p.text).toContain("last-words\n");
    expect(p.data).toMatchObject({ running: false, exit_code: 3 });
  });

  it("returns at exit, not at the end of the yield, with stdout and stderr", async () => {
    const t0 = Date.now();
    const r = await call("exec_command", { cmd: "echo out; echo err >&2; exit 3" });
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(r.isError).toBe(false);
    expect(r.text).toContain("Process exited with code 3");
    expect(r.text).toContain("out\n");
    expect(r.text).toContain("err\n");
    expect(r.data).toMatchObject({ running: false, exit_code: 3, reason: "exited" });
  });

  it("returns a session while running; write_stdin feeds it and polls without repeats", async () => {
    const r = await call("exec_command", {
      cmd: "while read l; do echo got:$l; done; echo bye",
      yield_time_ms: 200,
    });
    expect(r.data).toMatchObject({ running: true });
    const id = r.data!.session_id as string;
    expect(r.text).toContain(`session_id "${id}"`);
    const a = await call("write_stdin", { session_id: id, chars: "one\n", yield_time_ms: 500 });
    expect(a.text).toContain("got:one");
    const b = await call("write_stdin", {
      session_id: id,
      chars: "two\n\u0004",
      yield_time_ms: 3000,
    });
    expect(b.text).toContain("got:two");
    expect(b.text).not.toContain("got:one");
    expect(b.text).toContain("bye");
    expect(b.text).toContain("Process exited with code 0");
    const c = await call("write_stdin", { session_id: id });
    expect(c.text).toContain("No new output");
    expect(c.text).toContain("Process exited with code 0");
  });

  it("keeps head and tail over the budget; read_output returns the middle exactly", async () => {
    const r = await call("exec_command", {
      cmd: "seq 1 20000",
      max_output_bytes: 1024,
      yield_time_ms: 20000,
    });
    const full = Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join("");
    const id = r.data!.session_id as string;
    const out = r.text.slice(r.text.indexOf("Output:\n") + 8);
    const m = /\[… (\d+) bytes left out here, starting at byte (\d+) of seq (\d+)/.exec(out)!;
    expect(m).not.toBeNull();
    const [bytes, offset, seq] = [Number(m[1]), Number(m[2]), Number(m[3])];
    const head = out.slice(0, out.indexOf("\n[…"));
    const tail = out.slice(out.indexOf("…]\n") + 3);
    expect(full.startsWith(head)).toBe(true);
    expect(full.endsWith(tail)).toBe(true);
    let middle = "";
    let after = seq - 1;
    while (middle.length < offset + bytes) {
      const page = await call("read_output", {
        session_id: id,
        after_seq: after,
        max_bytes: 65536,
      });
      expect(page.isError).toBe(false);
      middle += page.text.slice(page.text.indexOf("\n") + 1).replace(/\nProcess exited.*$/, "");
      after = page.data!.to_seq as number;
    }
    middle = middle.slice(offset, offset + bytes);
    expect(head.length + bytes + tail.length).toBe(full.length);
    expect(head + middle + tail).toBe(full);
  });

  it("kill_session stops a command and lists it", async () => {
    const r = await call("exec_command", { cmd: "echo started; sleep 30", yield_time_ms: 300 });
    const id = r.data!.session_id as string;
    const list = await call("list_sessions", {});
    expect(list.text).toContain(id);
    expect(list.text).toContain("[running]");
    const k = await call("kill_session", { session_id: id });
    expect(k.text).toMatch(/Process exited with code \d+ \(killed by SIGTERM\)/);
    const again = await call("kill_session", { session_id: id });
    expect(again.text).toContain("already ended");
  });

  it("tty runs on a terminal; Ctrl-C typed with write_stdin interrupts the foreground job", async () => {
    const t = await call("exec_command", {
      cmd: "tty; stty size; trap 'echo interrupted' INT; sleep 30; echo after",
      tty: true,
      yield_time_ms: 1000,
    });
    expect(t.isError).toBe(false);
    expect(t.text).toMatch(/\/dev\/pts\/\d+/);
    expect(t.text).toContain("40 120");
    const id = t.data!.session_id as string;
    const c = await call("write_stdin", { session_id: id, chars: "\u0003", yield_time_ms: 3000 });
    expect(c.text).toContain("interrupted");
    expect(c.text).toContain("after");
    expect(c.text).toContain("Process exited with code 0");
  });

  it("answers unknown sessions and bad positions with tool errors", async () => {
    const u = await call("write_stdin", { session_id: "nope" });
    expect(u.isError).toBe(true);
    expect(u.text).toContain("ENOENT");
    const r = await call("exec_command", { cmd: "echo x" });
    const p = await call("read_output", { session_id: r.data!.session_id, after_seq: 99 });
    expect(p.isError).toBe(true);
    expect(p.text).toContain("past the end");
  });
});

describe("bash", () => {
  it("keeps cd, exports and functions; reports per-command status", async () => {
    mkdirSync(path.join(ws.dir, "sub"));
    expect(
      (await call("bash", { command: "cd sub && export FOO=bar && f() { echo fn:$1; }" })).text,
    ).toContain("[exit status 0]");
    const r = await call("bash", { command: "pwd; echo $FOO; f x" });
    expect(r.text).toMatch(/\/sub\nbar\nfn:x\n\[exit status 0\]$/);
    const bad = await call("bash", { command: "echo oops >&2; false" });
    expect(bad.text).toBe("oops\n[exit status 1]");
    const syntax = await call("bash", { command: "echo 'unterminated" });
    expect(syntax.text).toMatch(/\[exit status 2\]$/);
    expect((await call("bash", { command: "cat; echo after" })).text).toBe(
      "after\n[exit status 0]",
    );
    expect((await call("bash", { command: "printf abc" })).text).toBe("abc\n[exit status 0]");
  });

  it("survives a hung command: killed at the timeout, next call in the same directory", async () => {
    mkdirSync(path.join(ws.dir, "d"));
    await call("bash", { command: "cd d" });
    const hung = await call("bash", { command: "echo before; sleep 60" });
    expect(hung.text).toContain("before");
    expect(hung.text).toContain("timed out");
    const next = await call("bash", { command: "pwd" });
    expect(next.text).toMatch(/\/d\n\[exit status 0\]$/);
  });

  it("restart gives a fresh shell; exit ends the shell and the next call starts one", async () => {
    await call("bash", { command: "export X=1" });
    expect((await call("bash", { restart: true })).text).toContain("restarted");
    expect((await call("bash", { command: 'echo x"$X"x' })).text).toContain("xx");
    expect((await call("bash", { command: "exit 4" })).text).toContain("shell exited with code 4");
    expect((await call("bash", { command: "echo alive" })).text).toContain("alive");
    expect((await call("bash", {})).isError).toBe(true);
  });

  it("replaces a shell killed from outside (kill_session) on the next call", async () => {
    mkdirSync(path.join(ws.dir, "k"));
    const first = await call("bash", { command: "cd k" });
    const shell = first.data!.session_id as string;
    expect(shell).toMatch(/^bash-/);
    await call("kill_session", { session_id: shell, signal: "SIGKILL" });
    const next = await call("bash", { command: "basename $PWD" });
    expect(next.text).toBe("k\n[exit status 0]");
    expect(next.data!.session_id).not.toBe(shell);
  });
});

describe("str_replace_based_edit_tool", () => {
  const edit = (input: Record<string, unknown>) => call("str_replace_based_edit_tool", input);
  const file = () => readFileSync(path.join(ws.dir, "f.txt"), "utf8");

  it("creates, views with ranges, replaces exactly one match, inserts at 0 and at the end", async () => {
    expect((await edit({ command: "create", path: "f.txt", file_text: "a\nb\nc\n" })).isError).toBe(
      false,
    );
    const v = await edit({ command: "view", path: "f.txt" });
    expect(v.text).toContain("     1\ta\n     2\tb\n     3\tc\n");
    const vr = await edit({ command: "view", path: "f.txt", view_range: [2, -1] });
    expect(vr.text).toContain("     2\tb\n     3\tc\n");
    expect(vr.text).not.toContain("\ta\n");
    expect((await edit({ command: "view", path: "f.txt", view_range: [2, 9] })).isError).toBe(true);
    expect((await edit({ command: "view", path: "f.txt", view_range: [5, -1] })).isError).toBe(
      true,
    );
    const one = await edit({
      command: "str_replace",
      path: "f.txt",
      old_str: "b\n",
      new_str: "B\n",
    });
    expect(one.isError).toBe(false);
    expect(file()).toBe("a\nB\nc\n");
    const zero = await edit({ command: "str_replace", path: "f.txt", old_str: "zz" });
    expect(zero).toMatchObject({ isError: true });
    expect(zero.text).toContain("did not appear verbatim");
    writeFileSync(path.join(ws.dir, "f.txt"), "x\ny\nx\n");
    const two = await edit({ command: "str_replace", path: "f.txt", old_str: "x" });
    expect(two.isError).toBe(true);
    expect(two.text).toContain("occurs 2 times");
    expect(two.text).toContain("lines 1, 3");
    expect(file()).toBe("x\ny\nx\n");
    await edit({ command: "insert", path: "f.txt", insert_line: 0, insert_text: "top" });
    expect(file()).toBe("top\nx\ny\nx\n");
    await edit({ command: "insert", path: "f.txt", insert_line: 4, insert_text: "end\n" });
    expect(file()).toBe("top\nx\ny\nx\nend\n");
    const past = await edit({ command: "insert", path: "f.txt", insert_line: 9, insert_text: "z" });
    expect(past.isError).toBe(true);
    expect(past.text).toContain("between 0 and 5");
  });

  it("lists directories and refuses paths outside the workspace", async () => {
    mkdirSync(path.join(ws.dir, "src/lib"), { recursive: true });
    writeFileSync(path.join(ws.dir, "src/lib/a.ts"), "x");
    const d = await edit({ command: "view", path: "src" });
    expect(d.text).toContain("src/lib/\nsrc/lib/a.ts");
    const abs = await edit({ command: "view", path: path.join(ws.dir, "src/lib/a.ts") });
    expect(abs.text).toContain("     1\tx");
    for (const p of ["../x", "/etc/passwd", "src/../../x"]) {
      const r = await edit({ command: "create", path: p, file_text: "no" });
      expect(r.isError, p).toBe(true);
      expect(r.text, p).toMatch(/outside the workspace|leaves the workspace/);
    }
    symlinkSync("/etc", path.join(ws.dir, "out"));
    const sym = await edit({ command: "view", path: "out/hostname" });
    expect(sym.isError).toBe(true);
    expect(sym.text).toContain("EFORBIDDEN");
  });
});

describe("files and bad input", () => {
  it("reads text as is and binary as base64, writes base64, lists", async () => {
    await call("write_file", {
      path: "b/bin",
      content: Buffer.from([0, 255, 1]).toString("base64"),
      encoding: "base64",
    });
    expect([...readFileSync(path.join(ws.dir, "b/bin"))]).toEqual([0, 255, 1]);
    const r = await call("read_file", { path: "b/bin" });
    expect(r.data).toMatchObject({ encoding: "base64", size: 3 });
    expect(r.text).toContain("AP8B");
    await call("write_file", { path: "t.txt", content: "héllo" });
    expect((await call("read_file", { path: "t.txt" })).text).toBe("héllo");
    const l = await call("list_directory", {});
    expect(l.text).toContain("dir      b/");
    expect(l.text).toMatch(/file\s+t.txt\s+6/);
  });

  it("answers bad arguments with tool errors naming the problem", async () => {
    const cases: [string, unknown, RegExp][] = [
      ["exec_command", {}, /cmd/],
      ["exec_command", { cmd: "x", yield_time_ms: -1 }, /yield_time_ms/],
      ["exec_command", { cmd: "x", bogus: 1 }, /bogus/],
      ["str_replace_based_edit_tool", { command: "delete", path: "x" }, /command/],
      ["str_replace_based_edit_tool", { command: "create", path: "x" }, /file_text/],
      ["read_output", { session_id: 5 }, /session_id/],
      ["write_file", { path: "x", content: "%%%", encoding: "base64" }, /base64/],
      ["nope", {}, /Unknown tool/],
      ["bash", "{not json", /not valid JSON/],
    ];
    for (const [name, input, re] of cases) {
      const r = await call(name, input);
      expect(r.isError, name).toBe(true);
      expect(r.text, name).toMatch(re);
    }
    expect((await call("list_sessions", "{}")).isError).toBe(false);
  });
});
