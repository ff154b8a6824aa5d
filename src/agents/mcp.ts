// The agent tools as an MCP server (`@modelcontextprotocol/sdk`), independent
// of the transport: `createMcpServer(tools)` returns a Server that the caller
// connects to stdio (`agent-computer mcp`) or, one per MCP session, to a
// Streamable HTTP transport. The low-level Server is used rather than
// McpServer.registerTool so that listing and calling go through the same
// JSON Schemas and the same dispatcher as every other face of the tools:
// a bad argument is a tool result with isError and text the model can act on
// (McpServer would answer it with a protocol error instead).
//
// Long calls: when the request carries a progressToken, every progress report
// of the call (output, periodic tick) becomes notifications/progress, which
// clients use to reset their request timeout (TypeScript SDK:
// `resetTimeoutOnProgress: true`), so a call waiting minutes for a command
// does not die at the client's default 60 s.

import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  ListToolsRequestSchema,
  type ToolAnnotations,
} from "@modelcontextprotocol/sdk/types.js";
import type { ToolName } from "./schemas.js";
import type { AgentTools } from "./tools.js";

/** Hints MCP hosts use to decide what needs the user's approval. */
const ANNOTATIONS: Record<ToolName, ToolAnnotations> = {
  exec_command: { title: "Run a command", destructiveHint: true, openWorldHint: true },
  write_stdin: { title: "Send input / poll a session", destructiveHint: true },
  read_output: { title: "Read a session's output", readOnlyHint: true },
  kill_session: { title: "Stop a session", destructiveHint: true, idempotentHint: true },
  list_sessions: { title: "List sessions", readOnlyHint: true },
  bash: { title: "Persistent bash shell", destructiveHint: true, openWorldHint: true },
  str_replace_based_edit_tool: { title: "View and edit files", destructiveHint: true },
  read_file: { title: "Read a file", readOnlyHint: true },
  write_file: { title: "Write a file", destructiveHint: true, idempotentHint: true },
  list_directory: { title: "List a directory", readOnlyHint: true },
};

export interface McpServerOptions {
  /** Reported to clients as the server's version. */
  version?: string;
}

/** An MCP server (not yet connected) serving `tools`. */
export function createMcpServer(tools: AgentTools, options: McpServerOptions = {}): Server {
  const server = new Server(
    { name: "agent-computer", version: options.version ?? "0.1.0" },
    {
      capabilities: { tools: {} },
      instructions:
        "A computer with a workspace directory. exec_command runs a command and returns at its exit or after yield_time_ms with a session_id (poll with write_stdin, read any range with read_output); bash is a persistent shell; str_replace_based_edit_tool views and edits files.",
    },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: tools.definitions.map((d) => ({
      name: d.name,
      title: ANNOTATIONS[d.name].title,
      description: d.description,
      inputSchema: d.inputSchema as { type: "object" },
      annotations: ANNOTATIONS[d.name],
    })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const token = request.params._meta?.progressToken;
    let progress = 0;
    const onProgress =
      token === undefined
        ? undefined
        : (message: string) => {
            extra
              .sendNotification({
                method: "notifications/progress",
                params: { progressToken: token, progress: ++progress, message },
              })
              .catch(() => {}); // the client went away: the call's own answer fails too
          };
    const r = await tools.call(request.params.name, request.params.arguments ?? {}, {
      signal: extra.signal,
      ...(onProgress ? { onProgress } : {}),
    });
    const result: CallToolResult = { content: [{ type: "text", text: r.text }] };
    if (r.isError) result.isError = true;
    return result;
  });
  return server;
}
