// `agent-computer ps`: the executions the server knows, as a table or JSON.

import type { Command } from "commander";
import { act, makeClient, withClientOptions } from "../options.js";

export function registerPs(program: Command): void {
  withClientOptions(
    program.command("ps").description("list executions").option("--json", "print JSON"),
  ).action(
    act(async (o) => {
      const list = await makeClient(o).list();
      if (o.json) {
        process.stdout.write(`${JSON.stringify(list, null, 2)}\n`);
        return 0;
      }
      const rows = [["ID", "STATE", "EXIT", "STARTED", "COMMAND"]];
      for (const r of list) {
        rows.push([
          r.id,
          r.state,
          r.exitCode === undefined ? "" : String(r.exitCode),
          new Date(r.startedAt).toISOString().replace("T", " ").slice(0, 19),
          Array.isArray(r.command) ? r.command.join(" ") : r.command,
        ]);
      }
      const widths = rows[0]!.map((_c, i) => Math.max(...rows.map((r) => r[i]!.length)));
      for (const r of rows) {
        process.stdout.write(
          `${r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  ")}\n`,
        );
      }
      return 0;
    }),
  );
}
