// `agent-computer shell`: an interactive shell on the server, on a pty the
// size of this terminal (cli/terminal.ts does the session: raw mode, resize
// on SIGWINCH, Ctrl-] detaches and leaves it running).

import type { Command } from "commander";
import { act, collectEnv, makeClient, withClientOptions } from "../options.js";
import { interact, localSize, SHELL_COMMAND } from "../terminal.js";

export function registerShell(program: Command): void {
  withClientOptions(
    program
      .command("shell")
      .description("open an interactive shell on the server (Ctrl-] detaches)")
      .option("--cwd <dir>", "working directory inside the workspace")
      .option("-e, --env <K=V>", "environment variable (repeatable)", collectEnv, {})
      .option("--id <id>", "choose the execution id")
      .option("--command <cmd>", "run this instead of the server's $SHELL -i", SHELL_COMMAND),
  ).action(
    act(async (o) => {
      const client = makeClient(o);
      const handle = await client.exec(o.command, {
        pty: localSize(),
        ...(o.cwd !== undefined ? { cwd: o.cwd } : {}),
        ...(Object.keys(o.env).length ? { env: o.env } : {}),
        ...(o.id !== undefined ? { id: o.id } : {}),
      });
      return interact(client, handle.id, { redraw: false });
    }),
  );
}
