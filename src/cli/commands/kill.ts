// `agent-computer kill ID`: signal an execution's whole process group.

import type { Command } from "commander";
import { act, makeClient, withClientOptions } from "../options.js";

export function registerKill(program: Command): void {
  withClientOptions(
    program
      .command("kill")
      .description("signal an execution's process group")
      .argument("<id>")
      .option("-s, --signal <sig>", "signal name", "SIGTERM"),
  ).action(
    act(async (id: string, o) => {
      await makeClient(o).kill(id, o.signal);
      return 0;
    }),
  );
}
