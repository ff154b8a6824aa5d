// `agent-computer attach ID`: replay an execution's output from a seq (or the
// tail) and follow it live; Ctrl-C detaches and leaves it running. A running
// pty execution attached from a terminal is interactive instead (cli/terminal.ts).

import type { Command } from "commander";
import { parseAfter } from "../../wire/position.js";
import { follow } from "../follow.js";
import { act, CliError, EXIT_USAGE, makeClient, withClientOptions } from "../options.js";
import { interact } from "../terminal.js";

export function registerAttach(program: Command): void {
  withClientOptions(
    program
      .command("attach")
      .description("stream an execution's output (replay from --after, then follow)")
      .argument("<id>")
      .option("--after <n>", 'resume after this seq, or "tail"', "0"),
  ).action(
    act(async (id: string, o) => {
      let after: ReturnType<typeof parseAfter>;
      try {
        after = parseAfter(o.after, "--after");
      } catch (err) {
        throw new CliError((err as Error).message, EXIT_USAGE);
      }
      const client = makeClient(o);
      // A live terminal, from a terminal: interactive, starting from its current screen.
      if (process.stdin.isTTY && o.after === "0") {
        const rec = await (await client.get(id)).info();
        if (rec.pty && rec.state === "running") return interact(client, id, { redraw: true });
      }
      return follow(client, id, after, "detach");
    }),
  );
}
