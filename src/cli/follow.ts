// Following an execution from the terminal: replay from a seq, then stream
// live output to stdout/stderr until the exit, and exit with its code. Ctrl-C
// either forwards SIGINT to the remote command (exec: a second Ctrl-C stops
// waiting) or detaches (attach, logs -f). The SDK's event stream does the
// reconnecting and resuming; this only decides what the person at the
// terminal sees, including a line on stderr when the log dropped output.

import type { ComputerClient } from "../client/client.js";
import type { ExecRecord } from "../runtime/types.js";
import type { ComputerError } from "../wire/errors.js";
import type { After } from "../wire/position.js";
import type { ExecEvent } from "../wire/types.js";
import { describeError } from "./options.js";
import { flushAndExit, writeEvent } from "./output.js";

/**
 * Copies an execution's events to stdout/stderr and resolves with the exit
 * event (or undefined when the stream ended without one: tail of a finished run).
 */
async function pipeEvents(stream: ReadableStream<ExecEvent>): Promise<ExecEvent | undefined> {
  const reader = stream.getReader();
  for (;;) {
    const { value: ev, done } = await reader.read();
    if (done) return undefined;
    if (ev.name === "exit") return ev;
    await writeEvent(ev);
  }
}

function exitCodeOf(ev: ExecEvent | undefined, rec?: ExecRecord): number {
  if (ev && ev.name === "exit") return ev.value;
  if (rec?.exitCode !== undefined) return rec.exitCode;
  return 0;
}

export async function follow(
  client: ComputerClient,
  id: string,
  after: After,
  onSigint: "kill" | "detach",
): Promise<number> {
  const handle = await client.get(id);
  let interrupts = 0;
  const onInt = () => {
    interrupts++;
    if (onSigint === "detach" || interrupts > 1) {
      process.stderr.write(`\nagent-computer: detached from ${id}\n`);
      flushAndExit(130);
      return;
    }
    process.stderr.write(
      `\nagent-computer: sending SIGINT to ${id} (Ctrl-C again to stop waiting)\n`,
    );
    handle
      .kill("SIGINT")
      .catch((err) => process.stderr.write(`agent-computer: ${describeError(err)}\n`));
  };
  process.on("SIGINT", onInt);
  try {
    // The log's ring dropped what we asked for: say so on stderr and go on
    // from the earliest retained event rather than give up on the rest.
    const onTruncated = (err: ComputerError, last: number): number => {
      if (typeof err.earliestSeq !== "number") throw err;
      process.stderr.write(
        `agent-computer: output seq ${last + 1}..${err.earliestSeq - 1} was dropped by the server's log; continuing\n`,
      );
      return err.earliestSeq - 1;
    };
    const exit = await pipeEvents(handle.events({ after, heartbeats: false, onTruncated }));
    return exitCodeOf(exit, exit ? undefined : await handle.info());
  } finally {
    process.off("SIGINT", onInt);
  }
}
