// Public entry of `agent-computer/tools`: the agent tool set over an
// in-process Computer or a ComputerClient, as plain JSON Schema definitions,
// one `call(name, input)` dispatcher, and the definitions in Anthropic's and
// OpenAI's formats. docs/agents.md is the reference. This entry never loads
// the AI SDK (that is `agent-computer/ai`), nor the MCP SDK.

import type { FilesApi } from "../client/client.js";
import type { ComputerApi } from "../runtime/types.js";
import { clientFiles, localFiles } from "./files.js";
import { AgentTools, type AgentToolsOptions } from "./tools.js";

export { BashShell, DEFAULT_BASH_TIMEOUT_MS } from "./bash.js";
export { clientFiles, localFiles, type WorkspaceEntry, type WorkspaceFiles } from "./files.js";
export {
  ANTHROPIC_SERVER_TOOLS,
  type AnthropicTool,
  type OpenAIChatTool,
  type OpenAIResponsesTool,
  toAnthropicTools,
  toOpenAIChatTools,
  toOpenAITools,
} from "./formats.js";
export {
  DEFAULT_EXEC_YIELD_MS,
  DEFAULT_MAX_OUTPUT_BYTES,
  DEFAULT_POLL_YIELD_MS,
  TOOL_NAMES,
  TOOL_SPECS,
  type ToolInput,
  type ToolName,
} from "./schemas.js";
export { AgentTools, type AgentToolsOptions, type ToolDefinition } from "./tools.js";
export type { ToolCallContext, ToolResult } from "./types.js";

/** A computer the tools can drive: the in-process Computer or a ComputerClient. */
export type ToolTarget = ComputerApi & ({ workspace: string } | { files: FilesApi });

/**
 * The tool set over a `Computer` (files through the local file system,
 * confined to its workspace) or a `ComputerClient` (files through the
 * server's files API). One per conversation: it owns a bash shell and each
 * session's read position.
 */
export function createAgentTools(
  target: ToolTarget,
  options: Omit<AgentToolsOptions, "computer" | "files"> = {},
): AgentTools {
  if ("files" in target && target.files) {
    return new AgentTools({ computer: target, files: clientFiles(target.files), ...options });
  }
  if ("workspace" in target && typeof target.workspace === "string") {
    return new AgentTools({
      computer: target,
      files: localFiles(target.workspace),
      workspaceRoot: target.workspace,
      ...options,
    });
  }
  throw new TypeError("createAgentTools needs a Computer or a ComputerClient");
}
