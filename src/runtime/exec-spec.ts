// What `exec` accepts, checked before anything is spawned: the command (a
// shell line or an argv), the caller's id, env overlay and signal names, plus
// the documented base environment a command starts from. Kept apart from the
// process code so every refusal is an EINVAL raised before any side effect.

import { constants as osConstants } from "node:os";
import { ComputerError } from "../wire/errors.js";
import type { ExecSpec } from "./types.js";

const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/** Variables carried from the server's own environment into the default base. */
const INHERITED_ENV = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LC_ALL",
  "TZ",
  "TMPDIR",
];
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/**
 * The documented default base environment (docs/runtime.md): only the
 * variables above, never the whole server environment (it may hold secrets).
 */
export function defaultBaseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of INHERITED_ENV) {
    const v = process.env[k];
    if (v !== undefined) env[k] = v;
  }
  env.PATH ??= DEFAULT_PATH;
  env.LANG ??= "C.UTF-8";
  return env;
}

/** The program to spawn, its arguments, and the command as recorded. */
export function parseSpec(spec: ExecSpec): {
  file: string;
  args: string[];
  command: string | string[];
} {
  if (typeof spec === "string") {
    if (spec === "") throw new ComputerError("EINVAL", "empty command");
    if (spec.includes("\0")) throw new ComputerError("EINVAL", "the command holds a NUL byte");
    return { file: "/bin/sh", args: ["-c", spec], command: spec };
  }
  if (spec && typeof spec === "object") {
    if ("argv" in spec) {
      const argv = spec.argv;
      if (
        !Array.isArray(argv) ||
        argv.length === 0 ||
        argv.some((a) => typeof a !== "string" || a.includes("\0")) ||
        argv[0] === ""
      ) {
        throw new ComputerError("EINVAL", "argv must be a non-empty array of strings");
      }
      return { file: argv[0]!, args: argv.slice(1), command: [...argv] };
    }
    if ("command" in spec && typeof spec.command === "string") return parseSpec(spec.command);
  }
  throw new ComputerError("EINVAL", "exec needs a command string, { command } or { argv }");
}

export function checkId(id: unknown): string {
  if (typeof id !== "string" || !ID_RE.test(id)) {
    throw new ComputerError("EINVAL", "id must be 1-128 characters of [A-Za-z0-9._:-]");
  }
  return id;
}

export function checkEnv(env: Record<string, string> | undefined): Record<string, string> {
  if (env === undefined) return {};
  if (typeof env !== "object" || env === null) {
    throw new ComputerError("EINVAL", "env must be an object of strings");
  }
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    if (
      k === "" ||
      // An own "__proto__" (from JSON) cannot be copied into a plain object:
      // refused rather than silently dropped.
      k === "__proto__" ||
      k.includes("=") ||
      k.includes("\0") ||
      typeof v !== "string" ||
      v.includes("\0")
    ) {
      throw new ComputerError("EINVAL", `bad environment variable ${JSON.stringify(k)}`);
    }
    out[k] = v;
  }
  return out;
}

export function checkSignal(signal: string): string {
  if (typeof signal !== "string" || !(signal in osConstants.signals)) {
    throw new ComputerError("EINVAL", `unknown signal ${String(signal)}`);
  }
  return signal;
}
