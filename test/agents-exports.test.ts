// The agent entry points as a consumer resolves them (package "exports",
// built dist/): `agent-computer` and `agent-computer/tools` load without the
// AI SDK (a resolve hook fails any import of "ai"), and `agent-computer/ai`
// yields AI SDK tools that run through the same dispatcher.
import { execFileSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { ensureDistBuilt } from "./support/dist.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

function run(code: string): unknown {
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", code], {
    cwd: root,
    encoding: "utf8",
  });
  return JSON.parse(out);
}

const FORBID_AI = `
  import { register } from "node:module";
  register("data:text/javascript," + encodeURIComponent(
    'export async function resolve(s, c, next) {' +
    ' if (s === "ai" || s.startsWith("ai/")) throw new Error("the AI SDK was loaded");' +
    ' return next(s, c); }'));
`;

describe("agent entry points", () => {
  beforeAll(() => ensureDistBuilt(), 120_000);

  it("agent-computer and agent-computer/tools never load the AI SDK", () => {
    const r = run(`${FORBID_AI}
      const root = await import("agent-computer");
      const t = await import("agent-computer/tools");
      let blocked = false;
      try { await import("agent-computer/ai"); } catch { blocked = true; }
      console.log(JSON.stringify({
        root: typeof root.Computer,
        create: typeof t.createAgentTools,
        anthropic: t.toAnthropicTools(t.TOOL_NAMES.map((name) => ({ name, description: "", inputSchema: {} }))).length,
        blocked,
      }));
    `);
    expect(r).toEqual({ root: "function", create: "function", anthropic: 10, blocked: true });
  });

  it("agent-computer/ai gives AI SDK tools that run commands", () => {
    const r = run(`
      import { mkdtempSync } from "node:fs";
      import { tmpdir } from "node:os";
      import path from "node:path";
      const { Computer } = await import("agent-computer");
      const { createAgentTools } = await import("agent-computer/tools");
      const { aiTools } = await import("agent-computer/ai");
      const computer = new Computer({ workspace: mkdtempSync(path.join(tmpdir(), "ac-ai-")) });
      const agentTools = createAgentTools(computer);
      const tools = aiTools(agentTools);
      const opts = { toolCallId: "1", messages: [] };
      const out = await tools.exec_command.execute({ cmd: "echo via-ai" }, opts);
      let error = "";
      try { await tools.exec_command.execute({ cmd: 1 }, opts); } catch (e) { error = e.message; }
      await agentTools.close();
      await computer.close();
      console.log(JSON.stringify({ names: Object.keys(tools).length, out, error,
        schema: tools.bash.inputSchema.jsonSchema.type }));
    `) as { names: number; out: string; error: string; schema: string };
    expect(r.names).toBe(10);
    expect(r.out).toContain("via-ai");
    expect(r.error).toContain("Invalid arguments for exec_command");
    expect(r.schema).toBe("object");
  });
});
