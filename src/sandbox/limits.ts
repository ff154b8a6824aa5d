// Resource limits: the built-in defaults and maxima, and the one function
// that turns a request into the limits in force. Defaults are generous enough
// for builds and test suites on a small machine and small enough that one
// runaway command cannot take the host down; maxima bound what a caller may
// ask for. docs/security.md lists the same figures.

import { totalmem } from "node:os";
import { ComputerError } from "../wire/errors.js";
import type { Limits } from "./types.js";

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/** Built-in defaults of each execution's limits. */
export const DEFAULT_LIMITS: Readonly<Limits> = {
  memoryBytes: 2 * GiB,
  pids: 512,
  cpus: 0,
  fileSizeBytes: 4 * GiB,
  tmpBytes: 512 * MiB,
  openFiles: 4096,
  cpuSeconds: 0,
  wallTimeMs: 0,
  outputBytes: 0,
};

/** Built-in maxima a caller may raise a limit to (0 on a "none"-able limit means unbounded). */
export function builtInMaxima(): Limits {
  return {
    memoryBytes: Math.max(DEFAULT_LIMITS.memoryBytes, totalmem()),
    pids: 16384,
    cpus: 0,
    fileSizeBytes: 1024 * GiB,
    tmpBytes: 8 * GiB,
    openFiles: 65536,
    cpuSeconds: 0,
    wallTimeMs: 0,
    outputBytes: 0,
  };
}

/**
 * Limits where 0 means "none": a maximum of 0 leaves them unbounded, a value
 * of 0 switches them off (when the maximum allows it).
 */
const ZERO_IS_NONE = new Set<keyof Limits>(["cpus", "cpuSeconds", "wallTimeMs", "outputBytes"]);

/** Merge `over` into `base`, checking every given field. */
export function mergeLimits(base: Limits, over: Partial<Limits> | undefined, what: string): Limits {
  const out = { ...base };
  if (over === undefined) return out;
  if (typeof over !== "object" || over === null) {
    throw new ComputerError("EINVAL", `${what} must be an object`);
  }
  for (const [k, v] of Object.entries(over)) {
    if (!Object.hasOwn(DEFAULT_LIMITS, k)) {
      throw new ComputerError("EINVAL", `${what}: unknown limit ${k}`);
    }
    if (v === undefined) continue;
    const key = k as keyof Limits;
    const min = ZERO_IS_NONE.has(key) ? 0 : Number.MIN_VALUE;
    if (typeof v !== "number" || !Number.isFinite(v) || v < min) {
      throw new ComputerError("EINVAL", `${what}: ${k} must be a positive number`);
    }
    out[key] = key === "cpus" ? v : Math.floor(v);
  }
  return out;
}

/** The limits in force for one execution: defaults, then the request, each checked against its maximum. */
export function resolveLimits(
  defaults: Limits,
  maxima: Limits,
  requested: Partial<Limits> | undefined,
): Limits {
  const out = mergeLimits(defaults, requested, "limits");
  for (const key of Object.keys(out) as Array<keyof Limits>) {
    const max = maxima[key];
    const zeroIsNone = ZERO_IS_NONE.has(key);
    if (zeroIsNone && max === 0) continue;
    if (out[key] > max || (zeroIsNone && out[key] === 0)) {
      throw new ComputerError(
        "EINVAL",
        `limits: ${key} ${out[key] === 0 ? "none" : out[key]} exceeds the maximum ${max}`,
      );
    }
  }
  return out;
}
