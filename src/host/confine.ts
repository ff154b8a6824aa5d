// A node's confinement, from options to the running sandbox: the flag syntax
// `serve` and `doctor` share (--network none|host|allow:DOMAIN,…; sizes like
// 512M), the sandbox a node creates (with its event log hidden and its
// workspace adopted), and the description of it that the startup line,
// GET /v1/info and the dashboard show. One place, so `doctor` predicts exactly
// what `serve` does.

import { realpath, stat } from "node:fs/promises";
import path from "node:path";
import { createSandbox } from "../sandbox/sandbox.js";
import type {
  ConfineMode,
  HostReport,
  Limits,
  NetworkPolicy,
  Sandbox,
  SandboxOptions,
} from "../sandbox/types.js";
import { ComputerError } from "../wire/errors.js";

/** What startNode() and `serve` accept about confinement. */
export interface ConfineOptions {
  /** `auto` (default): confine when the host allows, else warn; `required`: refuse to start; `off`. */
  confine?: ConfineMode;
  /** Server-wide network: "none" (default), "host", { allow: [domains] } or the flag syntax "allow:a.com,b.org". */
  network?: NetworkPolicy | string;
  /** Defaults of each execution's limits. */
  limitDefaults?: Partial<Limits>;
  /** Maxima an execution may ask for. */
  limitMaxima?: Partial<Limits>;
  /** Further sandbox options (uid/gid, readOnly, hide, resolve for tests, host report). */
  sandbox?: Omit<SandboxOptions, "workspace" | "confine" | "network" | "defaults" | "maxima">;
}

/** Environment variables of the confinement options (the flags win). */
export const CONFINE_ENV = {
  confine: "AGENT_COMPUTER_CONFINE",
  network: "AGENT_COMPUTER_NETWORK",
} as const;

/** `none`, `host`, `allow:a.com,*.b.org` (or a ready policy) → a policy. */
export function parseNetwork(value: NetworkPolicy | string): NetworkPolicy {
  if (typeof value !== "string") return value;
  if (value === "none" || value === "host") return value;
  if (value.startsWith("allow:")) {
    const allow = value
      .slice("allow:".length)
      .split(",")
      .map((d) => d.trim())
      .filter(Boolean);
    if (allow.length === 0) throw new ComputerError("EINVAL", "--network allow: needs a domain");
    return { allow };
  }
  throw new ComputerError(
    "EINVAL",
    `network must be none, host or allow:DOMAIN[,DOMAIN…], not ${value}`,
  );
}

const UNITS: Record<string, number> = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/** "512M", "2G", "1048576" → bytes ("none" → 0 where 0 means none). */
export function parseSize(value: string, what: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?$/i.exec(value.trim());
  if (value.trim() === "none") return 0;
  if (!m) throw new ComputerError("EINVAL", `${what}: ${value} is not a size (e.g. 512M, 2G)`);
  return Math.floor(Number(m[1]) * UNITS[m[2]!.toLowerCase()]!);
}

/** Parse a number flag ("none" → 0). */
export function parseCount(value: string, what: string): number {
  if (value.trim() === "none") return 0;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0)
    throw new ComputerError("EINVAL", `${what}: ${value} is not a number`);
  return n;
}

/** The node's sandbox: its log file hidden from commands, its workspace adopted when it drops to a uid. */
export async function openNodeSandbox(
  workspace: string,
  options: ConfineOptions,
  eventLog: string,
  env: NodeJS.ProcessEnv,
): Promise<{ sandbox: Sandbox; mode: ConfineMode; why?: string }> {
  const mode = (options.confine ?? env[CONFINE_ENV.confine] ?? "auto") as ConfineMode;
  const network = parseNetwork(options.network ?? env[CONFINE_ENV.network] ?? "none");
  const hide = [...(options.sandbox?.hide ?? [])];
  if (eventLog.startsWith("sqlite:")) {
    const file = path.resolve(eventLog.slice("sqlite:".length));
    hide.push(file, path.dirname(file));
  }
  const create = (confine: ConfineMode) =>
    createSandbox({
      ...options.sandbox,
      workspace,
      confine,
      network: confine === "off" ? "host" : network,
      ...(options.limitDefaults ? { defaults: options.limitDefaults } : {}),
      ...(options.limitMaxima ? { maxima: options.limitMaxima } : {}),
      hide: hide.filter((p) => !isWithin(workspace, p)),
    });
  const sandbox = await create(mode);
  if (sandbox.identity) {
    const why = await reachable(workspace, sandbox.identity.uid);
    if (why) {
      await sandbox.dispose();
      if (mode === "required") throw new ComputerError("EUNAVAILABLE", `cannot confine: ${why}`);
      return { sandbox: await create("off"), mode, why };
    }
    await sandbox.adopt(workspace);
  }
  return { sandbox, mode };
}

/**
 * Commands (and bubblewrap) run as `uid`, which must be able to traverse
 * every directory above the workspace: say so at startup, not per command.
 */
async function reachable(workspace: string, uid: number): Promise<string | undefined> {
  let dir = path.dirname(await realpath(workspace));
  for (;;) {
    const st = await stat(dir);
    if (st.uid !== uid && (st.mode & 0o001) === 0) {
      return `the workspace lies under ${dir}, which commands (uid ${uid}) cannot enter (chmod o+x ${dir}, or choose a workspace elsewhere)`;
    }
    const up = path.dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}

function isWithin(dir: string, p: string): boolean {
  const rel = path.relative(dir, p);
  return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
}

/** What GET /v1/info says about confinement (and `doctor --json`). */
export interface ConfinementInfo {
  mode: ConfineMode;
  confined: boolean;
  /** When `auto` could not confine: why. */
  why?: string;
  summary: string;
  /** What is enforced, piece by piece. */
  enforced: {
    filesystem: boolean;
    processes: boolean;
    network: boolean;
    cgroup: string | null;
    rlimits: boolean;
    uid: number | null;
  };
  network: NetworkPolicy;
  limits: { defaults: Limits; maxima: Limits };
}

export function confinementInfo(
  sandbox: Sandbox,
  mode: ConfineMode,
  why?: string,
): ConfinementInfo {
  const host = sandbox.host;
  const enforcing = mode !== "off" && why === undefined;
  const reason = why ?? (mode === "auto" && !sandbox.confined ? whyNot(host) : undefined);
  return {
    mode,
    confined: sandbox.confined,
    ...(reason ? { why: reason } : {}),
    summary: sandbox.summary,
    enforced: {
      filesystem: sandbox.confined,
      processes: sandbox.confined,
      network: sandbox.confined && sandbox.network !== "host",
      cgroup:
        enforcing && host.cgroup.version !== null
          ? `v${host.cgroup.version} (${host.cgroup.controllers.join(", ")})`
          : null,
      rlimits: enforcing && host.rlimits.ok,
      uid: sandbox.identity?.uid ?? null,
    },
    network: sandbox.network,
    limits: { defaults: sandbox.defaults, maxima: sandbox.maxima },
  };
}

/**
 * The startup line; when `auto` could not confine, a loud warning instead,
 * saying why and what is unconfined.
 */
export function confinementLine(sandbox: Sandbox, mode: ConfineMode, why?: string): string {
  if (mode === "auto" && !sandbox.confined) {
    return `agent-computer: WARNING: commands are NOT confined: ${why ?? whyNot(sandbox.host)}; they run with the server's user, see its files, processes and network (run \`agent-computer doctor\` for the fix, or --confine off to silence this)`;
  }
  return `agent-computer confinement: ${sandbox.summary}`;
}

function whyNot(host: HostReport): string {
  for (const c of [host.bwrap, host.userNamespaces, host.setpriv]) if (!c.ok) return c.detail;
  return "the sandbox is unavailable";
}
