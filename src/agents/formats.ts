// The tool definitions in the formats model APIs take. The plain definitions
// (name, description, JSON Schema) are the source; these only re-shape them.
//
// Anthropic: `bash` and `str_replace_based_edit_tool` are also server-defined
// tools (the model was trained on them and knows their input by heart). By
// default they are emitted as those types; the model's calls then carry the
// same names and inputs as ours, so `call(name, input)` runs them unchanged.
// OpenAI: function tools, in the Responses API shape or the Chat Completions
// shape. `strict` stays off: strict mode would require every optional field.

import type { ToolDefinition } from "./tools.js";

/** Anthropic's server-defined tool types our tools stand in for. */
export const ANTHROPIC_SERVER_TOOLS: Record<string, { type: string; name: string }> = {
  bash: { type: "bash_20250124", name: "bash" },
  str_replace_based_edit_tool: {
    type: "text_editor_20250728",
    name: "str_replace_based_edit_tool",
  },
};

export type AnthropicTool =
  | { name: string; description: string; input_schema: Record<string, unknown> }
  | { type: string; name: string };

/**
 * Tools for the Anthropic Messages API (`tools: [...]`). With
 * `serverTools: false`, bash and the editor are sent as ordinary custom tools
 * with our schemas instead of the server-defined types.
 */
export function toAnthropicTools(
  definitions: readonly ToolDefinition[],
  options: { serverTools?: boolean } = {},
): AnthropicTool[] {
  const server = options.serverTools !== false;
  return definitions.map((d) =>
    server && ANTHROPIC_SERVER_TOOLS[d.name]
      ? { ...ANTHROPIC_SERVER_TOOLS[d.name]! }
      : { name: d.name, description: d.description, input_schema: d.inputSchema },
  );
}

export interface OpenAIResponsesTool {
  type: "function";
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  strict: false;
}

export interface OpenAIChatTool {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

/** Function tools for the OpenAI Responses API (also what the Agents SDK sends). */
export function toOpenAITools(definitions: readonly ToolDefinition[]): OpenAIResponsesTool[] {
  return definitions.map((d) => ({
    type: "function",
    name: d.name,
    description: d.description,
    parameters: d.inputSchema,
    strict: false,
  }));
}

/** Function tools for the OpenAI Chat Completions API. */
export function toOpenAIChatTools(definitions: readonly ToolDefinition[]): OpenAIChatTool[] {
  return definitions.map((d) => ({
    type: "function",
    function: { name: d.name, description: d.description, parameters: d.inputSchema },
  }));
}
