#!/usr/bin/env node
// The `agent-computer` command (dist/cli/main.js, the package's bin).
//
//   agent-computer serve [--port 8787] [--host 127.0.0.1] [--workspace ./workspace] [--log memory|sqlite:PATH|redis://…]
//   agent-computer exec [--detach] [--cwd DIR] [--env K=V]... -- CMD [ARGS...]
//   agent-computer attach ID [--after N]      (a pty execution: interactive, from its screen)
//   agent-computer shell | exec -t -- CMD      (interactive, on a pty; Ctrl-] detaches)
//   agent-computer ps | kill ID | logs ID
//
// Each command lives in cli/commands/; this file assembles the program and
// turns every failure into one line on stderr and a non-zero exit, so scripts
// and people both get something they can act on. Client commands talk to a
// server through ComputerClient (AGENT_COMPUTER_URL, AGENT_COMPUTER_TOKEN, or
// --url/--token).

import { Command } from "commander";
import { registerAttach } from "./commands/attach.js";
import { registerDoctor } from "./commands/doctor.js";
import { registerExec } from "./commands/exec.js";
import { registerKill } from "./commands/kill.js";
import { registerLogs } from "./commands/logs.js";
import { registerMcp } from "./commands/mcp.js";
import { registerPs } from "./commands/ps.js";
import { registerServe } from "./commands/serve.js";
import { registerShell } from "./commands/shell.js";
import {
  CliError,
  describeError,
  EXIT_ERROR,
  EXIT_USAGE,
  exitState,
  serverUrl,
} from "./options.js";
import { flushAndExit } from "./output.js";

export function buildProgram(): Command {
  const program = new Command();
  program
    .name("agent-computer")
    .description("A computer for AI agents: run commands, stream every byte as resumable events.")
    .version("0.1.0")
    .showHelpAfterError("(run with --help for usage)")
    .configureOutput({
      outputError: (str, write) => write(str.startsWith("error:") ? `agent-computer: ${str}` : str),
    })
    .exitOverride();
  registerServe(program);
  registerExec(program);
  registerAttach(program);
  registerShell(program);
  registerLogs(program);
  registerPs(program);
  registerKill(program);
  registerMcp(program);
  registerDoctor(program);
  return program;
}

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    exitState.code = 0;
    await program.parseAsync(argv);
    return exitState.code;
  } catch (err) {
    const e = err as { code?: string; exitCode?: number; message?: string };
    if (typeof e?.code === "string" && e.code.startsWith("commander.")) {
      // help/version print and exit 0; usage errors were already printed
      return e.code === "commander.helpDisplayed" ||
        e.code === "commander.version" ||
        e.code === "commander.help"
        ? 0
        : EXIT_USAGE;
    }
    if (err instanceof CliError) {
      process.stderr.write(`agent-computer: ${err.message}\n`);
      return err.exitCode;
    }
    process.stderr.write(`agent-computer: ${describeError(err, serverUrl())}\n`);
    return EXIT_ERROR;
  }
}

main(process.argv).then((code) => flushAndExit(code));
