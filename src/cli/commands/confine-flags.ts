// The confinement flags `serve` and `doctor` share, so that `doctor` with the
// same flags predicts exactly what `serve` would enforce: --confine,
// --network and the --limit-* flags, each `DEFAULT[:MAXIMUM]` (a size like
// 2G, a count, or `none` where that means unlimited).

import type { Command } from "commander";
import { CONFINE_ENV, type ConfineOptions, parseCount, parseSize } from "../../host/confine.js";
import type { ConfineMode, Limits } from "../../sandbox/types.js";
import { CliError, EXIT_USAGE } from "../options.js";

/** flag → the limit it sets and how its value reads. */
const LIMIT_FLAGS: Array<{ flag: string; key: keyof Limits; size: boolean; help: string }> = [
  {
    flag: "memory",
    key: "memoryBytes",
    size: true,
    help: "memory per execution (cgroup), e.g. 2G",
  },
  { flag: "pids", key: "pids", size: false, help: "processes and threads per execution" },
  { flag: "cpu", key: "cpus", size: false, help: "CPU share in cores, e.g. 1.5 (none: unbounded)" },
  { flag: "file-size", key: "fileSizeBytes", size: true, help: "largest file a command may write" },
  { flag: "tmp", key: "tmpBytes", size: true, help: "size of the private /tmp" },
  { flag: "open-files", key: "openFiles", size: false, help: "open files per process" },
  { flag: "cpu-time", key: "cpuSeconds", size: false, help: "CPU seconds per process (none)" },
  { flag: "wall-time", key: "wallTimeMs", size: false, help: "wall time in ms (none)" },
  { flag: "output", key: "outputBytes", size: true, help: "output bytes per execution (none)" },
];

export interface ConfineFlags {
  confine?: string;
  network?: string;
  [limit: string]: unknown;
}

export function addConfineFlags(cmd: Command): Command {
  cmd
    .option(
      "--confine <mode>",
      `auto (default: confine when the host can, else warn), required (refuse to start), off (env ${CONFINE_ENV.confine})`,
    )
    .option(
      "--network <policy>",
      `none (default: loopback only), host, or allow:DOMAIN[,DOMAIN…] (env ${CONFINE_ENV.network})`,
    );
  for (const l of LIMIT_FLAGS) {
    cmd.option(`--limit-${l.flag} <default[:max]>`, l.help);
  }
  return cmd;
}

/** The flags as startNode() options (throws a usage error on a bad value). */
export function confineOptions(flags: ConfineFlags): ConfineOptions {
  const out: ConfineOptions = {};
  if (flags.confine !== undefined) {
    if (!["auto", "required", "off"].includes(flags.confine)) {
      throw new CliError("--confine must be auto, required or off", EXIT_USAGE);
    }
    out.confine = flags.confine as ConfineMode;
  }
  if (flags.network !== undefined) out.network = flags.network;
  const defaults: Partial<Limits> = {};
  const maxima: Partial<Limits> = {};
  for (const l of LIMIT_FLAGS) {
    const camel = `limit${l.flag.replace(/(^|-)([a-z])/g, (_, _d, c: string) => c.toUpperCase())}`;
    const raw = flags[camel];
    if (typeof raw !== "string") continue;
    const [def, max] = raw.split(":");
    const read = (v: string) =>
      l.size ? parseSize(v, `--limit-${l.flag}`) : parseCount(v, `--limit-${l.flag}`);
    try {
      if (def) defaults[l.key] = read(def);
      if (max) maxima[l.key] = read(max);
    } catch (err) {
      throw new CliError((err as Error).message, EXIT_USAGE);
    }
  }
  if (Object.keys(defaults).length) out.limitDefaults = defaults;
  if (Object.keys(maxima).length) out.limitMaxima = maxima;
  return out;
}
