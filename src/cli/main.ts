#!/usr/bin/env node
// The `agent-computer` command (dist/cli/main.js, the package's bin).
//
//   agent-computer serve [--port 8787] [--host 127.0.0.1] [--workspace ./workspace] [--log memory|sqlite:PATH]
//   agent-computer exec [--detach] [--cwd DIR] [--env K=V]... -- CMD [ARGS...]
//   agent-computer attach ID [--after N]
//   agent-computer ps | kill ID | logs ID
//
// Client commands talk to a server through ComputerClient (AGENT_COMPUTER_URL,
// AGENT_COMPUTER_TOKEN, or --url/--token). `exec` writes the command's stdout
// and stderr byte-exact to ours and exits with its exit code, so it can stand
// in for running the command locally; Ctrl-C forwards SIGINT to the remote
// command (a second Ctrl-C stops waiting). Every failure is one line on stderr
// and a non-zero exit: scripts and people both get something they can act on.

import { mkdirSync } from "node:fs";
import path from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import { ComputerClient } from "../client/client.js";
import type { ExecRecord } from "../runtime/types.js";
import type { ComputerError } from "../wire/errors.js";
import type { ExecEvent } from "../wire/types.js";

// Kept in step with server.ts; the server and runtime are imported lazily by
// `serve` only, so client commands start fast (no SQLite, no ws server).
const DEFAULT_HOST = "127.0.0.1";
const DEFAULT_PORT = 8787;
const DEFAULT_URL = `http://${DEFAULT_HOST}:${DEFAULT_PORT}`;

/** Exit codes of our own failures (the command's code is passed through otherwise). */
const EXIT_ERROR = 1;
const EXIT_USAGE = 2;

class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = EXIT_ERROR,
  ) {
    super(message);
  }
}

/** Exit code chosen by the action that ran (commander discards action return values). */
const exitState = { code: 0 };

function act<A extends unknown[]>(fn: (...args: A) => Promise<unknown>) {
  return async (...args: A): Promise<void> => {
    const code = await fn(...args);
    exitState.code = typeof code === "number" ? code : 0;
  };
}

function intOption(name: string, min = 0) {
  return (v: string): number => {
    if (!/^\d+$/.test(v) || Number(v) < min) {
      throw new InvalidArgumentError(`${name} must be an integer >= ${min}`);
    }
    return Number(v);
  };
}

function collectEnv(v: string, prev: Record<string, string>): Record<string, string> {
  const eq = v.indexOf("=");
  if (eq <= 0) throw new InvalidArgumentError(`expected K=V, got ${JSON.stringify(v)}`);
  return { ...prev, [v.slice(0, eq)]: v.slice(eq + 1) };
}

function collectList(v: string, prev: string[]): string[] {
  return [...prev, v];
}

interface ClientFlags {
  url?: string;
  token?: string;
}

function makeClient(flags: ClientFlags): ComputerClient {
  const url = flags.url ?? process.env.AGENT_COMPUTER_URL ?? DEFAULT_URL;
  const token = flags.token ?? process.env.AGENT_COMPUTER_TOKEN;
  try {
    new URL(url);
  } catch {
    throw new CliError(`invalid server URL: ${url}`, EXIT_USAGE);
  }
  return new ComputerClient({ url, token, resume: { maxRetries: 8 } });
}

/** One clear line for any error, keyed by its code. */
function describeError(err: unknown, url?: string): string {
  const e = err as { code?: string; message?: string };
  switch (e?.code) {
    case "ENETWORK":
      return `${e.message ?? `cannot reach ${url ?? "the server"}`} (is \`agent-computer serve\` running? check AGENT_COMPUTER_URL or --url)`;
    case "EUNAUTHORIZED":
      return "unauthorized: missing or wrong token (set AGENT_COMPUTER_TOKEN or pass --token)";
    case "EFORBIDDEN":
      return `forbidden: ${e.message}`;
    case "ENOENT":
      return e.message ?? "not found";
    default:
      return e?.code ? `${e.message} (${e.code})` : String(e?.message ?? err);
  }
}

/** Writes to a stream, waiting for 'drain' when it is full (huge outputs, slow pipes). */
function writeOut(
  stream: NodeJS.WriteStream,
  chunk: Uint8Array | string,
): Promise<void> | undefined {
  if (stream.write(chunk)) return undefined;
  return new Promise((resolve) => {
    const done = () => {
      stream.off("drain", done);
      stream.off("error", done);
      resolve();
    };
    stream.once("drain", done);
    stream.once("error", done);
  });
}

/**
 * Copies an execution's events to stdout/stderr and resolves with the exit
 * event (or undefined when the stream ended without one: tail of a finished run).
 */
async function pipeEvents(stream: ReadableStream<ExecEvent>): Promise<ExecEvent | undefined> {
  const reader = stream.getReader();
  for (;;) {
    const { value: ev, done } = await reader.read();
    if (done) return undefined;
    if (ev.name === "stdout") await writeOut(process.stdout, ev.value);
    else if (ev.name === "stderr") await writeOut(process.stderr, ev.value);
    else if (ev.name === "exit") return ev;
  }
}

function flushAndExit(code: number): void {
  // Let stdout/stderr drain (pipes are async in Node) before leaving.
  let pending = 2;
  const done = () => {
    if (--pending === 0) process.exit(code);
  };
  process.stdout.write("", done);
  process.stderr.write("", done);
}

function exitCodeOf(ev: ExecEvent | undefined, rec?: ExecRecord): number {
  if (ev && ev.name === "exit") return ev.value;
  if (rec?.exitCode !== undefined) return rec.exitCode;
  return 0;
}

async function follow(
  client: ComputerClient,
  id: string,
  after: number | "tail",
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

  const clientOptions = (cmd: Command) =>
    cmd
      .option("--url <url>", `server URL (env AGENT_COMPUTER_URL, default ${DEFAULT_URL})`)
      .option("--token <token>", "bearer token (env AGENT_COMPUTER_TOKEN)");

  program
    .command("serve")
    .description("run the server (HTTP + SSE + WebSocket API, dashboard)")
    .option("--host <host>", "interface to bind (loopback by default)", DEFAULT_HOST)
    .option("--port <port>", "port (0 picks a free one)", intOption("--port"), DEFAULT_PORT)
    .option("--workspace <dir>", "workspace folder (created if missing)", "./workspace")
    .option(
      "--log <spec>",
      'event log: "memory", "sqlite:PATH", or "redis://HOST:PORT" for cluster mode (env AGENT_COMPUTER_LOG)',
      process.env.AGENT_COMPUTER_LOG || "memory",
    )
    .option(
      "--node-id <name>",
      "this node's id in cluster mode (env AGENT_COMPUTER_NODE_ID; default: host name)",
    )
    .option("--token <token>", "bearer token (env AGENT_COMPUTER_TOKEN; generated if unset)")
    .option(
      "--max-concurrent <n>",
      "running executions at once (then 429 ELIMIT)",
      intOption("--max-concurrent", 1),
    )
    .option(
      "--log-max-bytes <n>",
      "per-execution event log ring size",
      intOption("--log-max-bytes", 1024),
    )
    .option("--retention-ms <n>", "keep finished executions this long", intOption("--retention-ms"))
    .option(
      "--heartbeat-ms <n>",
      "heartbeat interval for live streams (0: off)",
      intOption("--heartbeat-ms"),
    )
    .option("--max-body-bytes <n>", "max JSON request body", intOption("--max-body-bytes", 1024))
    .option(
      "--max-file-bytes <n>",
      "max upload through the files API",
      intOption("--max-file-bytes", 1),
    )
    .option(
      "--allowed-host <name>",
      "extra Host name to accept (repeatable; * for any)",
      collectList,
      [],
    )
    .option(
      "--cors-origin <origin>",
      "foreign origin allowed to call the API (repeatable)",
      collectList,
      [],
    )
    .option("--quiet", "no per-request log lines")
    .action(
      act(async (o) => {
        const { createComputerServer } = await import("../server/server.js");
        const { Computer } = await import("../runtime/computer.js");
        // Cluster mode (H6): with a redis:// log this node joins the cluster
        // (liveness, sweeper, control routing); otherwise a pass-through.
        const { openServeCluster } = await import("../cluster/serve.js");
        const { registerClusterRoutes } = await import("../cluster/routes.js");
        const workspace = path.resolve(o.workspace);
        mkdirSync(workspace, { recursive: true });
        const token = o.token ?? process.env.AGENT_COMPUTER_TOKEN ?? undefined;
        const log = (entry: Record<string, unknown>) => {
          if (o.quiet && entry.msg === "request") return;
          process.stdout.write(`${JSON.stringify({ ts: new Date().toISOString(), ...entry })}\n`);
        };
        const cl = await openServeCluster({
          log: o.log,
          nodeId: o.nodeId,
          ...(o.logMaxBytes !== undefined ? { logMaxBytes: o.logMaxBytes } : {}),
          ...(o.retentionMs !== undefined ? { retentionMs: o.retentionMs } : {}),
          logEvent: (event, fields) => log({ msg: event, ...fields }),
        }).catch((err) => {
          throw new CliError(`cannot join the cluster: ${(err as Error).message}`);
        });
        const server = createComputerServer({
          workspace,
          host: o.host,
          port: o.port,
          token,
          allowedHosts: o.allowedHost.length ? o.allowedHost : undefined,
          corsOrigins: o.corsOrigin,
          log,
          limits: {
            ...(o.maxBodyBytes !== undefined ? { maxJsonBytes: o.maxBodyBytes } : {}),
            ...(o.maxFileBytes !== undefined ? { maxFileBytes: o.maxFileBytes } : {}),
          },
          computer: (observer) => {
            const computer = new Computer({
              workspace,
              log: cl.log,
              nodeId: cl.nodeId,
              remote: cl.remote,
              observer,
              ...(o.maxConcurrent !== undefined ? { maxConcurrent: o.maxConcurrent } : {}),
              ...(o.logMaxBytes !== undefined ? { logMaxBytes: o.logMaxBytes } : {}),
              ...(o.retentionMs !== undefined ? { retentionMs: o.retentionMs } : {}),
              ...(o.heartbeatMs !== undefined ? { heartbeatMs: o.heartbeatMs } : {}),
            });
            cl.attach(computer);
            return computer;
          },
        });
        if (cl.cluster) registerClusterRoutes(server.router, cl.cluster);
        try {
          await server.listen();
        } catch (err) {
          const code = (err as { code?: string }).code;
          throw new CliError(
            code === "EADDRINUSE"
              ? `port ${o.port} is in use (try --port 0 or another port)`
              : `cannot listen on ${o.host}:${o.port}: ${(err as Error).message}`,
          );
        }
        cl.advertise({ url: server.url });
        if (cl.cluster) log({ msg: "cluster", node: cl.nodeId });
        process.stdout.write(`agent-computer listening: ${server.loginUrl}\n`);
        let stopping = false;
        const stop = (signal: string) => {
          if (stopping) {
            process.stderr.write("agent-computer: forced exit\n");
            process.exit(EXIT_ERROR);
          }
          stopping = true;
          log({ msg: "shutdown", signal });
          // Server first (ends running commands as killed while this node is
          // still alive in the cluster), then leave the cluster.
          server
            .close()
            .then(() => cl.close())
            .then(
              () => {
                log({ msg: "stopped" });
                flushAndExit(0);
              },
              (err) => {
                process.stderr.write(`agent-computer: shutdown failed: ${describeError(err)}\n`);
                flushAndExit(EXIT_ERROR);
              },
            );
        };
        process.on("SIGINT", () => stop("SIGINT"));
        process.on("SIGTERM", () => stop("SIGTERM"));
        // Keep running until a signal.
        await new Promise(() => {});
      }),
    );

  clientOptions(
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
        ...(o.stdin ? { stdin: "pipe" as const } : {}),
      });
      if (o.detach) {
        process.stdout.write(`${handle.id}\n`);
        return 0;
      }
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

  clientOptions(
    program
      .command("attach")
      .description("stream an execution's output (replay from --after, then follow)")
      .argument("<id>")
      .option("--after <n>", 'resume after this seq, or "tail"', "0"),
  ).action(
    act(async (id: string, o) => {
      let after: number | "tail";
      if (o.after === "tail") after = "tail";
      else if (/^\d+$/.test(o.after)) after = Number(o.after);
      else throw new CliError('--after must be a non-negative integer or "tail"', EXIT_USAGE);
      return follow(makeClient(o), id, after, "detach");
    }),
  );

  clientOptions(
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
        if (ev.name === "stdout") await writeOut(process.stdout, ev.value);
        else if (ev.name === "stderr") await writeOut(process.stderr, ev.value);
        if (ev.seq >= until) {
          await reader.cancel();
          break;
        }
      }
      return 0;
    }),
  );

  clientOptions(
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

  clientOptions(
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
    const url = process.env.AGENT_COMPUTER_URL ?? DEFAULT_URL;
    process.stderr.write(`agent-computer: ${describeError(err, url)}\n`);
    return EXIT_ERROR;
  }
}

main(process.argv).then((code) => flushAndExit(code));
