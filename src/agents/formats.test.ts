// Re-shaping tool definitions for model APIs: Anthropic gets the
// server-defined bash and editor types by default (custom tools with our
// schema when asked), OpenAI gets function tools in the Responses and Chat
// Completions shapes, non-strict; names, descriptions and schemas are carried
// over unchanged and the inputs are not modified.
import { describe, expect, it } from "vitest";
import {
  ANTHROPIC_SERVER_TOOLS,
  toAnthropicTools,
  toOpenAIChatTools,
  toOpenAITools,
} from "./formats.js";
import type { ToolDefinition } from "./tools.js";

const schema = (field: string) => ({ type: "object", properties: { [field]: { type: "string" } } });
const definitions: ToolDefinition[] = [
  { name: "exec_command", description: "run", inputSchema: schema("cmd") },
  { name: "bash", description: "shell", inputSchema: schema("command") },
  { name: "str_replace_based_edit_tool", description: "edit", inputSchema: schema("path") },
];

describe("toAnthropicTools", () => {
  it("emits bash and the editor as Anthropic's server-defined types and the rest as custom tools", () => {
    expect(toAnthropicTools(definitions)).toEqual([
      { name: "exec_command", description: "run", input_schema: schema("cmd") },
      { type: "bash_20250124", name: "bash" },
      { type: "text_editor_20250728", name: "str_replace_based_edit_tool" },
    ]);
  });

  it("keeps the server-defined names equal to ours, so calls dispatch unchanged", () => {
    for (const [name, tool] of Object.entries(ANTHROPIC_SERVER_TOOLS)) expect(tool.name).toBe(name);
  });

  it("emits every tool as a custom tool with our schema when serverTools is false", () => {
    const tools = toAnthropicTools(definitions, { serverTools: false });
    expect(tools).toEqual(
      definitions.map((d) => ({
        name: d.name,
        description: d.description,
        input_schema: d.inputSchema,
      })),
    );
  });

  it("returns copies: changing a result does not change the shared server tool table", () => {
    const [, bash] = toAnthropicTools(definitions) as { type: string; name: string }[];
    bash!.type = "changed";
    expect(ANTHROPIC_SERVER_TOOLS.bash!.type).toBe("bash_20250124");
  });
});

describe("OpenAI formats", () => {
  it("emits non-strict Responses API function tools", () => {
    expect(toOpenAITools(definitions)[0]).toEqual({
      type: "function",
      name: "exec_command",
      description: "run",
      parameters: schema("cmd"),
      strict: false,
    });
    expect(toOpenAITools(definitions).map((t) => t.name)).toEqual(definitions.map((d) => d.name));
  });

  it("emits Chat Completions function tools", () => {
    expect(toOpenAIChatTools(definitions)[1]).toEqual({
      type: "function",
      function: { name: "bash", description: "shell", parameters: schema("command") },
    });
  });

  it("maps an empty list to an empty list in every format", () => {
    expect(toAnthropicTools([])).toEqual([]);
    expect(toOpenAITools([])).toEqual([]);
    expect(toOpenAIChatTools([])).toEqual([]);
  });
});
