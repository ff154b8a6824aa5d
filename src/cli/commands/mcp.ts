// `agent-computer mcp`: the agent tools as an MCP server on stdio, for agent
// hosts (Claude Desktop/Code, Cursor, Codex CLI) that start it as a child
// process. Two ways to get a computer:
//   --workspace DIR  an embedded Computer in this process (memory event log):
//                    nothing else to run;
//   otherwise        a running server, like the other client commands
//                    (--url/--token or AGENT_COMPUTER_URL/AGENT_COMPUTER_TOKEN).
// stdout carries the protocol, so nothing else may be written there; this
// command writes diagnostics to stderr only. It ends when the host closes
// stdin (or on SIGINT/SIGTERM), killing its bash shell and, when embedded,
// every command it started. The MCP SDK and the runtime are imported lazily
// so that the other CLI commands do not pay for loading them.

import type { Command } from "commander";
import type { createAgentTools } from "../../agents/index.js";
import type { ComputerApi } from "../../runtime/types.js";
import { act, CliError, EXIT_USAGE, intOption, makeClient, withClientOptions } from "../options.js";

export function registerMcp(program: Command): void {
  withClientOptions(
    program
      .command("mcp")
      .description(
        "serve the agent tools over MCP on stdio (embedded with --workspace, else a server)",
      )
      .option("--workspace <dir>", "run an embedded computer in this workspace directory")
      .option(
        "--log-max-bytes <n>",
        "embedded: event log ring per execution in bytes (default 16 MiB)",
        intOption("--log-max-bytes", 1024),
      )
      .option(
        "--bash-timeout <ms>",
        "bound of one bash tool command (default 120000)",
        intOption("--bash-timeout", 1),
      )
      .option(
        "--progress-interval <ms>",
        "progress notification tick while a call waits (default 5000)",
        intOption("--progress-interval", 10),
      ),
  ).action(
    act(async (o) => {
      if (o.workspace !== undefined && (o.url !== undefined || o.token !== undefined)) {
        throw new CliError(
          "use either --workspace (embedded) or --url/--token (a server)",
          EXIT_USAGE,
        );
      }
      const [{ StdioServerTransport }, { createAgentTools }, { createMcpServer }, { Computer }] =
        await Promise.all([
          import("@modelcontextprotocol/sdk/server/stdio.js"),
          import("../../agents/index.js"),
          import("../../agents/mcp.js"),
          import("../../runtime/computer.js"),
        ]);
      let computer: ComputerApi;
      let target: Parameters<typeof createAgentTools>[0];
      if (o.workspace !== undefined) {
        const c = new Computer({
          workspace: o.workspace,
          ...(o.logMaxBytes !== undefined ? { logMaxBytes: o.logMaxBytes } : {}),
        });
        computer = c;
        target = c;
      } else {
        const c = makeClient(o);
        computer = c;
        target = c;
      }
      const tools = createAgentTools(target, {
        ...(o.bashTimeout !== undefined ? { bashTimeoutMs: o.bashTimeout } : {}),
        ...(o.progressInterval !== undefined ? { progressIntervalMs: o.progressInterval } : {}),
      });
      const server = createMcpServer(tools);
      const transport = new StdioServerTransport();
      const closed = new Promise<void>((resolve) => {
        server.onclose = resolve;
        process.stdin.once("end", resolve);
        process.stdin.once("close", resolve);
        process.once("SIGINT", resolve);
        process.once("SIGTERM", resolve);
      });
      await server.connect(transport);
      await closed;
      await server.close().catch(() => {});
      await tools.close();
      await computer.close();
      return 0;
    }),
  );
}
