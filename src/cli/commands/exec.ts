// `agent-computer exec -- CMD`: run a command on the server and behave like
// running it here: its stdout and stderr byte-exact on ours, our exit code is
// its exit code, Ctrl-C sends SIGINT to it, `-i` forwards our stdin.

import { type Command, Option } from "commander";
import { follow } from "../follow.js";
import {
  act,
  collectEnv,
  describeError,
  intOption,
  makeClient,
  withClientOptions,
} from "../options.js";
import { interact, localSize } from "../terminal.js";

export function registerExec(program: Command): void {
  withClientOptions(
    program
      .command("exec")
      .description("run a command on the server; stream its output; exit with its code")
      .argument(
        "<command...>",
        "the command: one argument runs through /bin/sh -c, several run as argv",
      )
      .option("-d, --detach", "print the execution id and return at once")
      .option("--cwd <dir>", "working directory inside the workspace")
      .option("-e, --env <K=V>", "environment variable (repeatable)", collectEnv, {})
      .option("--id <id>", "choose the execution id")
      .option("--timeout <ms>", "SIGTERM after this many ms", intOption("--timeout", 1))
      .option("-i, --stdin", "forward this process's stdin to the command")
      .option(
        "-t, --tty",
        "run on a pty the size of this terminal, interactively (Ctrl-] detaches)",
      )
      .addOption(
        new Option("--encoding <enc>", "event encoding").choices(["b64", "utf8"]).default("b64"),
      ),
  ).action(
    act(async (command: string[], o) => {
      const client = makeClient(o);
      const spec = command.length === 1 ? command[0]! : { argv: command };
      const handle = await client.exec(spec, {
        ...(o.cwd !== undefined ? { cwd: o.cwd } : {}),
        ...(Object.keys(o.env).length ? { env: o.env } : {}),
        ...(o.id !== undefined ? { id: o.id } : {}),
        ...(o.timeout !== undefined ? { timeoutMs: o.timeout } : {}),
        encoding: o.encoding,
        ...(o.stdin && !o.tty ? { stdin: "pipe" as const } : {}),
        ...(o.tty ? { pty: localSize() } : {}),
      });
      if (o.detach) {
        process.stdout.write(`${handle.id}\n`);
        return 0;
      }
      if (o.tty) return interact(client, handle.id, { redraw: false });
      if (o.stdin) {
        // Forward stdin in the background; the output stream decides when we are done.
        (async () => {
          for await (const chunk of process.stdin) await handle.write(chunk as Uint8Array);
          await handle.end();
        })().catch((err) => {
          // ECLOSED: the command exited or closed its stdin before reading all
          // of ours (`head -c 10`). Locally the producer would die quietly of
          // SIGPIPE, so drop the rest without a word; its output and exit code
          // are what counts.
          if ((err as { code?: string })?.code === "ECLOSED") return;
          process.stderr.write(`agent-computer: stdin: ${describeError(err)}\n`);
        });
      }
      return follow(client, handle.id, 0, "kill");
    }),
  );
}
