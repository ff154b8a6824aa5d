// Public entry of `agent-computer/ai`: the agent tool set as Vercel AI SDK
// tools (ai@6), for `generateText({ tools })` / `streamText({ tools })`.
// `ai` is an optional peer dependency: only this module imports it, and no
// other entry imports this module, so `agent-computer` and
// `agent-computer/tools` load without it.
//
// Each AI SDK tool forwards to the one dispatcher (AgentTools.call): the JSON
// Schemas are the same, validation and error text are the same. A tool error
// is thrown as an Error carrying the text, which the AI SDK hands to the
// model as a tool error result.

import { jsonSchema, type ToolSet, tool } from "ai";
import { type AgentTools, createAgentTools, type ToolTarget } from "./index.js";
import type { AgentToolsOptions } from "./tools.js";

export interface AiToolsOptions extends Omit<AgentToolsOptions, "computer" | "files"> {
  /** Only these tools (default: all). */
  only?: string[];
}

/**
 * AI SDK tools over an existing AgentTools (close it when the conversation
 * ends: that stops its bash shell), or over a Computer/ComputerClient, for
 * which a new AgentTools is made.
 */
export function aiTools(source: AgentTools | ToolTarget, options: AiToolsOptions = {}): ToolSet {
  const { only, ...rest } = options;
  const agentTools = "call" in source ? source : createAgentTools(source, rest);
  const out: ToolSet = {};
  for (const d of agentTools.definitions) {
    if (only && !only.includes(d.name)) continue;
    out[d.name] = tool({
      description: d.description,
      // biome-ignore lint/suspicious/noExplicitAny: the JSON Schema objects are plain JSON
      inputSchema: jsonSchema<Record<string, unknown>>(d.inputSchema as any),
      execute: async (input, { abortSignal }) => {
        const r = await agentTools.call(d.name, input, abortSignal ? { signal: abortSignal } : {});
        if (r.isError) throw new Error(r.text);
        return r.text;
      },
    });
  }
  return out;
}
