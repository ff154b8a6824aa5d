// What every CLI command shares: how a failure becomes one line and an exit
// code, option parsers, and the client that commands talking to a server use.

import { type Command, InvalidArgumentError } from "commander";
import { ComputerClient } from "../client/client.js";
import { DEFAULT_URL, ENV } from "../host/defaults.js";
import { ComputerError } from "../wire/errors.js";

/** Exit codes of our own failures (a command's own code is passed through otherwise). */
export const EXIT_ERROR = 1;
export const EXIT_USAGE = 2;

/** A failure the CLI reports as one line with its own exit code. */
export class CliError extends ComputerError {
  constructor(
    message: string,
    readonly exitCode = EXIT_ERROR,
  ) {
    super("EINVAL", message);
    this.name = "CliError";
  }
}

export function intOption(name: string, min = 0, max = Number.MAX_SAFE_INTEGER) {
  return (v: string): number => {
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) {
      throw new InvalidArgumentError(
        max === Number.MAX_SAFE_INTEGER
          ? `${name} must be an integer >= ${min}`
          : `${name} must be an integer from ${min} to ${max}`,
      );
    }
    return Number(v);
  };
}

export function collectEnv(v: string, prev: Record<string, string>): Record<string, string> {
  const eq = v.indexOf("=");
  if (eq <= 0) throw new InvalidArgumentError(`expected K=V, got ${JSON.stringify(v)}`);
  return { ...prev, [v.slice(0, eq)]: v.slice(eq + 1) };
}

export function collectList(v: string, prev: string[]): string[] {
  return [...prev, v];
}

export interface ClientFlags {
  url?: string;
  token?: string;
}

/** Adds --url and --token to a command that talks to a server. */
export function withClientOptions(cmd: Command): Command {
  return cmd
    .option("--url <url>", `server URL (env ${ENV.url}, default ${DEFAULT_URL})`)
    .option("--token <token>", `bearer token (env ${ENV.token})`);
}

/** The server URL a client command uses: --url, else the env, else the default. */
export function serverUrl(flags: ClientFlags = {}): string {
  return flags.url ?? process.env[ENV.url] ?? DEFAULT_URL;
}

export function makeClient(flags: ClientFlags): ComputerClient {
  const url = serverUrl(flags);
  const token = flags.token ?? process.env[ENV.token];
  try {
    new URL(url);
  } catch {
    throw new CliError(`invalid server URL: ${url}`, EXIT_USAGE);
  }
  return new ComputerClient({ url, token, resume: { maxRetries: 8 } });
}

/** One clear line for any error, keyed by its code. */
export function describeError(err: unknown, url?: string): string {
  const e = err as { code?: string; message?: string };
  switch (e?.code) {
    case "ENETWORK":
      return `${e.message ?? `cannot reach ${url ?? "the server"}`} (is \`agent-computer serve\` running? check ${ENV.url} or --url)`;
    case "EUNAUTHORIZED":
      return `unauthorized: missing or wrong token (set ${ENV.token} or pass --token)`;
    case "EFORBIDDEN":
      return `forbidden: ${e.message}`;
    case "ENOENT":
      return e.message ?? "not found";
    default:
      return e?.code ? `${e.message} (${e.code})` : String(e?.message ?? err);
  }
}

/** Exit code chosen by the action that ran (commander discards action return values). */
export const exitState = { code: 0 };

/** Wraps an action so that the number it returns becomes the process's exit code. */
export function act<A extends unknown[]>(fn: (...args: A) => Promise<unknown>) {
  return async (...args: A): Promise<void> => {
    const code = await fn(...args);
    exitState.code = typeof code === "number" ? code : 0;
  };
}
