// MCP test cases written once and run over both transports: the stdio
// server (`agent-computer mcp --workspace`, test/agents-mcp.test.ts) and the
// Streamable HTTP endpoint of a running server (test/agents-mcp-http.test.ts).
// Each case takes a connected SDK `Client` and the workspace the server works
// in (its parent directory is treated as "outside the workspace"), so the
// same assertions hold whatever carries the JSON-RPC messages.
import { createHash } from "node:crypto";
import { readFileSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { expect } from "vitest";

export const textOf = (r: CallToolResult) => (r.content[0] as { text: string }).text;

/** The output part of an exec_command/write_stdin result. */
export const outputOf = (text: string) => {
  const i = text.indexOf("\nOutput:\n");
  return i === -1 ? "" : text.slice(i + 9);
};

export const callTool = async (
  client: Client,
  name: string,
  args: Record<string, unknown>,
  opts?: object,
) => (await client.callTool({ name, arguments: args }, undefined, opts)) as CallToolResult;

export const callText = async (
  client: Client,
  name: string,
  args: Record<string, unknown>,
  opts?: object,
) => textOf(await callTool(client, name, args, opts));

/**
 * 50 MB of output through exec_command's budget: the answer stays small and
 * names the elided middle; read_output pages return it exactly (SHA-256 of
 * head + middle + tail equals the command's own). The server's event log
 * must hold the whole run (e.g. a 128 MiB logMaxBytes).
 */
export async function boundsLargeOutputCase(client: Client): Promise<void> {
  const cmd = "seq 1 6500000";
  const expected = (await callText(client, "exec_command", { cmd: `${cmd} | sha256sum` })).match(
    /\n([0-9a-f]{64}) /,
  )![1];
  const opts = { timeout: 5000, resetTimeoutOnProgress: true, onprogress: () => {} };
  const r = await callText(client, "exec_command", { cmd, yield_time_ms: 600_000 }, opts);
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
    const page = await callText(client, "read_output", {
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
}

/**
 * The text editor: str_replace with one match, zero and two; view ranges;
 * insert at 0 and at the end; every way out of the workspace (.., absolute,
 * a symlink, a path that climbs back out) refused for view and create.
 * Writes e.txt and etc-link in `ws` and outside.txt in its parent.
 */
export async function textEditorCase(client: Client, ws: string): Promise<void> {
  const dir = path.dirname(ws);
  const edit = (a: Record<string, unknown>) => callTool(client, "str_replace_based_edit_tool", a);
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
}

/** Bad arguments and unknown tools come back as tool errors (isError), not protocol errors. */
export async function badArgumentsCase(client: Client): Promise<void> {
  for (const [name, a] of [
    ["exec_command", { cmd: 42 }],
    ["exec_command", { cmd: "true", max_output_bytes: 1 }],
    ["write_stdin", {}],
    ["str_replace_based_edit_tool", { command: "rename", path: "x" }],
    ["bash", { restart: "yes" }],
    ["read_file", { path: "missing.txt" }],
    ["no_such_tool", {}],
  ] as const) {
    const r = await callTool(client, name, a as Record<string, unknown>);
    expect(r.isError, name).toBe(true);
    expect(textOf(r).length, name).toBeGreaterThan(10);
  }
}
