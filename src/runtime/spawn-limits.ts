// What the operating system lets a command start with, checked before the
// execution's record is created: an argument or environment string longer
// than the kernel's per-string limit, or all of them together past the total
// the kernel accepts, makes spawn() fail with E2BIG. Checking first turns
// that into a clear 413 ETOOLARGE with nothing left behind, instead of an
// exception after the record exists. docs/runtime.md, "Limits of a command",
// is the user-facing version.
//
// The numbers are Linux's: MAX_ARG_STRLEN is 32 pages (128 KiB, including
// the terminating NUL) per string; the total (strings, their NULs and one
// pointer each, for argv and the environment together) must stay under
// ARG_MAX, a quarter of the stack limit (2 MiB with the usual 8 MiB stack).
// We allow 1 MiB in total so a server started with a smaller stack limit is
// still covered; a spawn that fails anyway is caught (computer.ts).

import { ComputerError } from "../wire/errors.js";

/** Longest single argument or `NAME=value` string, in bytes (UTF-8). */
export const MAX_ARG_BYTES = 128 * 1024 - 1;
/** Longest command line plus environment together, in bytes (see above). */
export const MAX_SPAWN_BYTES = 1024 * 1024;
/** Longest `timeoutMs` (what a timer can hold: 2^31-1 ms, about 24.8 days). */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** Throws 413 ETOOLARGE when the kernel would refuse to start this command. */
export function checkSpawnSize(file: string, args: string[], env: Record<string, string>): void {
  let total = 0;
  const count = (s: string, what: () => string) => {
    const n = Buffer.byteLength(s, "utf8");
    if (n > MAX_ARG_BYTES) {
      throw new ComputerError(
        "ETOOLARGE",
        `${what()} is ${n} bytes; the system limit for one argument or environment variable is ${MAX_ARG_BYTES} bytes (put a long script in a file in the workspace and run that)`,
      );
    }
    total += n + 1 + 8;
  };
  count(file, () => "the program path");
  for (let i = 0; i < args.length; i++) {
    count(args[i]!, () => (file === "/bin/sh" && i === 1 ? "the command" : `argument ${i + 1}`));
  }
  for (const [k, v] of Object.entries(env)) count(`${k}=${v}`, () => `environment variable ${k}`);
  if (total > MAX_SPAWN_BYTES) {
    throw new ComputerError(
      "ETOOLARGE",
      `the command and its environment take ${total} bytes; at most ${MAX_SPAWN_BYTES} bytes are accepted`,
    );
  }
}

/** A spawn() that threw as a ComputerError: E2BIG is ETOOLARGE, a bad value EINVAL. */
export function spawnError(err: unknown): ComputerError {
  if (err instanceof ComputerError) return err;
  const code = (err as { code?: string })?.code;
  const msg = (err as Error)?.message ?? String(err);
  if (code === "E2BIG") {
    return new ComputerError(
      "ETOOLARGE",
      "the command and its environment are too large to start",
      {
        cause: err,
      },
    );
  }
  if (code === "ERR_INVALID_ARG_VALUE" || code === "ERR_INVALID_ARG_TYPE") {
    return new ComputerError(
      "EINVAL",
      "the command, its arguments or environment hold an invalid value (e.g. a NUL byte)",
      { cause: err },
    );
  }
  return new ComputerError("EINTERNAL", `the command could not be started: ${code ?? msg}`, {
    cause: err,
  });
}
