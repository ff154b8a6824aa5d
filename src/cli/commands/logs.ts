// `agent-computer logs ID`: print the output an execution's log still holds
// and return (with -f: keep following until it exits). Says on stderr when
// the start of the output was already dropped by the log's bound.

import type { Command } from "commander";
import { follow } from "../follow.js";
import { act, makeClient, withClientOptions } from "../options.js";
import { writeEvent } from "../output.js";

export function registerLogs(program: Command): void {
  withClientOptions(
    program
      .command("logs")
      .description("print an execution's retained output (add --follow to keep streaming)")
      .argument("<id>")
      .option("-f, --follow", "keep streaming until it exits"),
  ).action(
    act(async (id: string, o) => {
      const client = makeClient(o);
      const handle = await client.get(id);
      if (o.follow) return follow(client, id, 0, "detach");
      const rec = await handle.info();
      const until = rec.lastSeq;
      if (until === 0) return 0;
      const after = rec.earliestSeq > 1 ? rec.earliestSeq - 1 : 0;
      if (after > 0)
        process.stderr.write(`agent-computer: output before seq ${rec.earliestSeq} was dropped\n`);
      const reader = handle.events({ after, heartbeats: false }).getReader();
      for (;;) {
        const { value: ev, done } = await reader.read();
        if (done) break;
        await writeEvent(ev);
        if (ev.seq >= until) {
          await reader.cancel();
          break;
        }
      }
      return 0;
    }),
  );
}
