// createSandbox: one server's confinement. It probes the host once, settles
// the policy (mode, identity, network, default and maximum limits) and then,
// per execution, creates the cgroup and egress proxy socket and returns the
// argv to spawn (see profile.ts for the chain and why it is shaped so), or,
// when the caller can adopt one and the profile matches, a sandbox spawned
// ahead (warm-pool.ts, handoff.ts). A watchdog (watchdog.ts) kills what is
// left in its cgroups if the server dies.
//
// Decisions worth knowing (docs/security.md has the user-facing version):
// - Identity: as root, commands run as an unprivileged uid through a user
//   namespace (bubblewrap itself runs unprivileged). Default uid/gid: the
//   workspace owner's when that is not root, else 65534 (nobody). That uid
//   must own what commands write: `adopt(path)` chowns a tree to it (the
//   runtime calls it on a root-owned workspace and after writing files).
// - Visible: /usr and the /bin, /sbin, /lib* links or directories, /etc
//   read-only minus its secrets (shadow files, TLS private keys, SSH host
//   keys), the workspace read-write at its own path, a private /tmp (tmpfs),
//   a fresh /proc (own PID namespace), a minimal /dev, and HOME/TMPDIR as
//   empty directories when they lie elsewhere. Nothing else of the host: not
//   the server's install directory, its event logs, its token, /run, /var,
//   /home, /root, nor other processes.
// - Limits apply even when confinement is unavailable (`auto` on a host
//   without bubblewrap): the wrapper still joins the cgroups and sets the
//   rlimits. `off` spawns the argv untouched.

import { randomBytes } from "node:crypto";
import {
  chmod,
  lchown,
  lstat,
  mkdtemp,
  readdir,
  readlink,
  realpath,
  rm,
  stat,
} from "node:fs/promises";
import { constants as osConstants, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ComputerError } from "../wire/errors.js";
import { ExecCgroup } from "./cgroups.js";
import { type EgressProxy, startEgressProxy } from "./egress-proxy.js";
import { canHandOff, WARM_INIT_ARGV } from "./handoff.js";
import { builtInMaxima, DEFAULT_LIMITS, mergeLimits, resolveLimits } from "./limits.js";
import { checkPolicy, describe, narrowPolicy } from "./network.js";
import { probeHost } from "./probe.js";
import {
  limitsOnlyArgs,
  type ProfileInput,
  proxyEnv,
  type SpawnRecipe,
  spawnArgs,
} from "./profile.js";
import type {
  ExitVerdict,
  HostReport,
  LimitName,
  Limits,
  NetworkPolicy,
  Prepared,
  Sandbox,
  SandboxExecSpec,
  SandboxOptions,
  SpawnedExit,
} from "./types.js";
import { discard, handOff, type WarmEntry, WarmPool, type WarmRecipe } from "./warm-pool.js";
import { Watchdog } from "./watchdog.js";

const NOBODY = 65534;
/** Warm sandboxes per profile, and how long one may wait unused (SandboxOptions.warm). */
const DEFAULT_WARM_SIZE = 2;
const DEFAULT_WARM_IDLE_MS = 300_000;

/** System directories bound read-only (or recreated as the same symlinks). */
const SYSTEM_PATHS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"];
/** Secrets under /etc that stay unreadable even though /etc is visible. */
const ETC_SECRETS = [
  "/etc/shadow",
  "/etc/shadow-",
  "/etc/gshadow",
  "/etc/gshadow-",
  "/etc/security/opasswd",
  "/etc/ssl/private",
];
/** The package's own root (…/dist/sandbox/x.js or …/src/sandbox/x.ts → the package). */
const PACKAGE_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** Create the sandbox of one server. Throws `EUNAVAILABLE` when `required` cannot be met. */
export async function createSandbox(options: SandboxOptions): Promise<Sandbox> {
  const mode = options.confine ?? "auto";
  if (mode !== "off" && mode !== "auto" && mode !== "required") {
    throw new ComputerError("EINVAL", 'confine must be "off", "auto" or "required"');
  }
  const workspace = await realpath(options.workspace).catch((err: unknown) => {
    throw new ComputerError("EINVAL", `workspace ${options.workspace} is not accessible`, {
      cause: err,
    });
  });
  const root = process.getuid?.() === 0;
  let identity: { uid: number; gid: number } | null = null;
  if (root) {
    const st = await stat(workspace);
    const owned = st.uid !== 0;
    identity = {
      uid: options.uid ?? (owned ? st.uid : NOBODY),
      gid: options.gid ?? (owned ? st.gid : NOBODY),
    };
  }
  const host =
    options.host ??
    (await probeHost({
      ...(options.cgroupName ? { cgroupName: options.cgroupName } : {}),
      ...(identity ? identity : {}),
    }));
  const verdict = host.verdict[mode];
  if (!verdict.ok) throw new ComputerError("EUNAVAILABLE", verdict.message);
  const confined = verdict.confined;
  const maxima = mergeLimits(builtInMaxima(), options.maxima, "maxima");
  const defaults = mergeLimits(DEFAULT_LIMITS, options.defaults, "defaults");
  resolveLimits(defaults, maxima, undefined); // the defaults must fit the maxima
  const requested = checkPolicy(options.network ?? "none", "network");
  const network: NetworkPolicy = confined ? requested : "host";
  const system = confined ? await systemMounts() : [];
  const hidden = confined ? await hideList(options.hide ?? [], workspace) : [];
  const readOnly = await Promise.all((options.readOnly ?? []).map((p) => realpath(p)));
  const summary =
    mode === "off"
      ? verdict.message
      : `${verdict.message}; network ${describe(network)}` +
        (identity && confined ? `; commands run as uid ${identity.uid}` : "");
  return new HostSandbox({
    mode,
    workspace,
    identity: confined ? identity : null,
    host,
    confined,
    summary,
    network,
    defaults,
    maxima,
    system,
    hidden,
    readOnly,
    resolve: options.resolve,
    warm: options.warm,
  });
}

interface Settled {
  mode: "off" | "auto" | "required";
  workspace: string;
  identity: { uid: number; gid: number } | null;
  host: HostReport;
  confined: boolean;
  summary: string;
  network: NetworkPolicy;
  defaults: Limits;
  maxima: Limits;
  system: string[];
  hidden: Array<{ path: string; dir: boolean }>;
  readOnly: string[];
  resolve: SandboxOptions["resolve"];
  warm: SandboxOptions["warm"];
}

class HostSandbox implements Sandbox {
  readonly confined: boolean;
  readonly summary: string;
  readonly identity: { uid: number; gid: number } | null;
  readonly host: HostReport;
  readonly network: NetworkPolicy;
  readonly defaults: Limits;
  readonly maxima: Limits;
  private readonly live = new Set<Prepared>();
  /** Kills what is left in this sandbox's cgroups when the server dies (watchdog.ts). */
  private watchdog: Watchdog | undefined;
  /** Names of this sandbox's cgroups start with it. */
  private readonly cgroupPrefix = `x${randomBytes(3).toString("hex")}-`;
  /** Sandboxes spawned ahead (confined only); undefined when off. */
  private readonly pool: WarmPool | undefined;
  private runDir: Promise<string> | undefined;
  private serial = 0;

  constructor(private readonly s: Settled) {
    this.confined = s.confined;
    this.summary = s.summary;
    this.identity = s.identity;
    this.host = s.host;
    this.network = s.network;
    this.defaults = s.defaults;
    this.maxima = s.maxima;
    const size = s.warm?.size ?? DEFAULT_WARM_SIZE;
    if (s.confined && size > 0) {
      this.pool = new WarmPool({
        size,
        idleMs: s.warm?.idleMs ?? DEFAULT_WARM_IDLE_MS,
        recipe: (key) => this.warmRecipe(key),
      });
    }
  }

  /** Pids of the idle warm sandboxes (tests and diagnostics). */
  warmPids(): number[] {
    return this.pool?.pids() ?? [];
  }

  async prepare(spec: SandboxExecSpec): Promise<Prepared> {
    checkSpec(spec, this.s.workspace);
    const limits = resolveLimits(this.defaults, this.maxima, spec.limits);
    let network: NetworkPolicy;
    if (this.confined) network = narrowPolicy(this.network, spec.network);
    else if (spec.network === undefined || spec.network === "host") network = "host";
    else {
      throw new ComputerError(
        "EUNAVAILABLE",
        `network ${describe(checkPolicy(spec.network, "network"))} needs confinement, which is off (${this.summary})`,
      );
    }
    if (this.s.mode === "off") return this.track(unconfined(spec, limits, network));

    const dirs = extraDirs(spec.env, [this.s.workspace, ...SYSTEM_PATHS, ...this.s.readOnly]);
    if (spec.warm && this.pool?.enabled && typeof network === "string") {
      if (canHandOff(spec)) {
        const entry = this.pool.take(JSON.stringify({ network, limits, dirs }));
        if (entry) return this.track(this.adoptable(entry, spec, limits, network));
      }
    }
    const cgroup = await this.cgroupFor(limits);
    let proxy: EgressProxy | null = null;
    try {
      const env = { ...spec.env };
      if (this.confined && typeof network === "object") {
        const dir = await this.runtimeDir();
        proxy = await startEgressProxy({
          socketPath: path.join(dir, `egress-${++this.serial}.sock`),
          allow: network.allow,
          ...(this.s.resolve ? { resolve: this.s.resolve } : {}),
          owner: this.identity,
        });
        Object.assign(env, proxyEnv());
      }
      const recipe = await this.recipe({
        argv: spec.argv,
        cwd: spec.cwd,
        dirs,
        network,
        limits,
        cgroup,
        proxy,
      });
      const confined = this.confined;
      let disposed: Promise<void> | undefined;
      const prepared: Prepared = {
        file: recipe.file,
        args: recipe.args,
        env,
        cwd: spec.cwd,
        detached: true,
        limits,
        network,
        confined,
        afterExit: async (status) => verdictOf(status, confined, (await cgroup?.hits()) ?? []),
        dispose: () => {
          disposed ??= (async () => {
            this.live.delete(prepared);
            await proxy?.close();
            await cgroup?.remove();
          })();
          return disposed;
        },
      };
      return this.track(prepared);
    } catch (err) {
      await proxy?.close();
      await cgroup?.remove();
      throw err;
    }
  }

  private cgroupFor(limits: Limits): Promise<ExecCgroup | null> {
    const { version, parents } = this.host.cgroup;
    if (version !== null && !this.watchdog && Object.keys(parents).length > 0) {
      this.watchdog = new Watchdog(this.cgroupPrefix, Object.values(parents));
    }
    return ExecCgroup.create({ version, parents, missing: [] }, limits, this.cgroupPrefix);
  }

  /** The chain to spawn (profile.ts): confined, or only the limits when bubblewrap is unavailable. */
  private async recipe(r: {
    argv: string[];
    cwd: string;
    dirs: string[];
    network: NetworkPolicy;
    limits: Limits;
    cgroup: ExecCgroup | null;
    proxy: EgressProxy | null;
  }): Promise<SpawnRecipe> {
    const cgroupHas = { memory: !!r.cgroup?.dirs.memory, pids: !!r.cgroup?.dirs.pids };
    const procsFiles = r.cgroup?.procsFiles ?? [];
    const setpriv = this.host.setpriv.path ?? null;
    if (!this.confined) {
      return limitsOnlyArgs(setpriv, process.pid, procsFiles, r.limits, cgroupHas, r.argv);
    }
    const input: ProfileInput = {
      bwrap: this.host.bwrap.path!,
      serverPid: process.pid,
      setpriv: setpriv ? { path: setpriv, drop: this.identity } : null,
      system: this.s.system,
      workspace: this.s.workspace,
      cwd: r.cwd,
      hide: this.s.hidden,
      readOnly: this.s.readOnly,
      dirs: r.dirs,
      network: r.network,
      proxy: r.proxy ? { socket: r.proxy.socketPath, node: process.execPath } : null,
      hostNetBinds: await resolvConfBinds(),
      limits: r.limits,
      cgroupHas,
      procsFiles,
      argv: r.argv,
    };
    return spawnArgs(input);
  }

  /** A warm entry's recipe: the cold chain with the hand-off init as its command. */
  private async warmRecipe(key: string): Promise<WarmRecipe> {
    const { network, limits, dirs } = JSON.parse(key) as {
      network: NetworkPolicy;
      limits: Limits;
      dirs: string[];
    };
    const cgroup = await this.cgroupFor(limits);
    try {
      const recipe = await this.recipe({
        argv: WARM_INIT_ARGV,
        cwd: this.s.workspace,
        dirs,
        network,
        limits,
        cgroup,
        proxy: null,
      });
      let released: Promise<void> | undefined;
      return {
        ...recipe,
        // Nothing for the init to pass on: the chain needs no variable (absolute paths, shell builtins).
        env: {},
        cwd: this.s.workspace,
        hits: async () => (await cgroup?.hits()) ?? [],
        release: () => {
          released ??= cgroup?.remove() ?? Promise.resolve();
          return released;
        },
      };
    } catch (err) {
      await cgroup?.remove();
      throw err;
    }
  }

  /** The Prepared of an execution that adopts a warm entry. */
  private adoptable(
    entry: WarmEntry,
    spec: SandboxExecSpec,
    limits: Limits,
    network: NetworkPolicy,
  ): Prepared {
    let adopted = false;
    let disposed: Promise<void> | undefined;
    const prepared: Prepared = {
      file: entry.recipe.file,
      args: entry.recipe.args,
      env: { ...spec.env },
      cwd: spec.cwd,
      detached: true,
      limits,
      network,
      confined: true,
      adopt: (stdin) => {
        if (adopted) throw new Error("a warm sandbox is adopted once");
        adopted = true;
        return handOff(entry, { argv: spec.argv, cwd: spec.cwd, env: spec.env }, stdin);
      },
      afterExit: async (status) => verdictOf(status, true, await entry.recipe.hits()),
      dispose: () => {
        disposed ??= (async () => {
          this.live.delete(prepared);
          // Never adopted (the execution failed before its spawn): nothing may keep waiting.
          if (!adopted) await discard(entry);
          else await entry.recipe.release();
        })();
        return disposed;
      },
    };
    return prepared;
  }

  private track(p: Prepared): Prepared {
    this.live.add(p);
    return p;
  }

  private runtimeDir(): Promise<string> {
    this.runDir ??= (async () => {
      const dir = await mkdtemp(path.join(tmpdir(), "agent-computer-sandbox-"));
      // The sandbox's uid (bubblewrap runs as it) must reach the sockets inside.
      await chmod(dir, 0o711);
      return dir;
    })();
    return this.runDir;
  }

  async adopt(target: string): Promise<void> {
    const id = this.identity;
    if (!id) return;
    const walk = async (p: string): Promise<void> => {
      const st = await lstat(p);
      if (st.uid !== id.uid || st.gid !== id.gid) {
        await lchown(p, id.uid, id.gid);
      }
      if (st.isDirectory()) {
        for (const name of await readdir(p)) await walk(path.join(p, name));
      }
    };
    await walk(target);
  }

  async dispose(): Promise<void> {
    await this.pool?.dispose();
    await Promise.all([...this.live].map((p) => p.dispose()));
    this.watchdog?.close();
    if (this.runDir) {
      const dir = await this.runDir.catch(() => undefined);
      if (dir) await rm(dir, { recursive: true, force: true });
    }
  }
}

function checkSpec(spec: SandboxExecSpec, workspace: string): void {
  if (
    !Array.isArray(spec.argv) ||
    spec.argv.length === 0 ||
    spec.argv.some((a) => typeof a !== "string")
  ) {
    throw new ComputerError("EINVAL", "argv must be a non-empty array of strings");
  }
  if (typeof spec.cwd !== "string" || !path.isAbsolute(spec.cwd)) {
    throw new ComputerError("EINVAL", "cwd must be an absolute path");
  }
  const rel = path.relative(workspace, spec.cwd);
  if (rel.startsWith("..") || path.isAbsolute(rel)) {
    throw new ComputerError("EFORBIDDEN", `cwd ${spec.cwd} is outside the workspace`);
  }
  for (const [k, v] of Object.entries(spec.env ?? {})) {
    if (typeof v !== "string") throw new ComputerError("EINVAL", `env ${k} must be a string`);
  }
}

/** `off` (and a host with nothing to enforce): the argv as given, limits only carried. */
function unconfined(spec: SandboxExecSpec, limits: Limits, network: NetworkPolicy): Prepared {
  return {
    file: spec.argv[0]!,
    args: spec.argv.slice(1),
    env: { ...spec.env },
    cwd: spec.cwd,
    detached: true,
    limits,
    network,
    confined: false,
    afterExit: async (status) => verdictOf(status, false, []),
    dispose: async () => {},
  };
}

/** Decode the exit and name the limit that ended it, if one did. */
export function verdictOf(
  status: SpawnedExit,
  confined: boolean,
  cgroupHits: LimitName[],
): ExitVerdict {
  let { code, signal } = status;
  if (confined && signal === null && code !== null && code > 128 && code <= 128 + 64) {
    const name = Object.entries(osConstants.signals).find(([, n]) => n === code! - 128)?.[0];
    if (name) {
      signal = name as NodeJS.Signals;
      code = null;
    }
  }
  const hit = [...cgroupHits];
  if (signal === "SIGXFSZ") hit.push("file");
  if (signal === "SIGXCPU") hit.push("cpu");
  const verdict: ExitVerdict = { code, signal, hit };
  if (hit.includes("memory")) {
    verdict.reason = "oom";
    verdict.limit = "memory";
  } else if (signal === "SIGXFSZ") {
    verdict.reason = "limit";
    verdict.limit = "file";
  } else if (signal === "SIGXCPU") {
    verdict.reason = "limit";
    verdict.limit = "cpu";
  } else if (hit.includes("pids") && (signal !== null || code !== 0)) {
    verdict.reason = "limit";
    verdict.limit = "pids";
  }
  return verdict;
}

/** bubblewrap arguments for the read-only system: bind directories, recreate symlinks, mask secrets. */
async function systemMounts(): Promise<string[]> {
  const out: string[] = [];
  for (const p of SYSTEM_PATHS) {
    const st = await lstat(p).catch(() => undefined);
    if (!st) continue;
    if (st.isSymbolicLink()) out.push("--symlink", await readlink(p), p);
    else if (st.isDirectory()) out.push("--ro-bind", p, p);
  }
  const secrets = [...ETC_SECRETS];
  const ssh = await readdir("/etc/ssh").catch(() => [] as string[]);
  for (const name of ssh) if (/^ssh_host_.*_key$/.test(name)) secrets.push(`/etc/ssh/${name}`);
  for (const p of secrets) {
    const st = await lstat(p).catch(() => undefined);
    if (!st) continue;
    if (st.isDirectory()) out.push("--tmpfs", p, "--remount-ro", p);
    else if (!st.isSymbolicLink()) out.push("--ro-bind", "/dev/null", p);
  }
  return out;
}

/** Paths to mask that would otherwise be visible (under a bound system directory). */
async function hideList(
  extra: string[],
  workspace: string,
): Promise<Array<{ path: string; dir: boolean }>> {
  const out: Array<{ path: string; dir: boolean }> = [];
  for (const p of [PACKAGE_ROOT, ...extra]) {
    const real = await realpath(p).catch(() => undefined);
    if (!real || real === workspace || !underAny(real, [...SYSTEM_PATHS, workspace])) continue;
    const st = await stat(real);
    out.push({ path: real, dir: st.isDirectory() });
  }
  return out;
}

/** HOME and TMPDIR, created empty in the sandbox when they lie outside everything bound. */
function extraDirs(env: Record<string, string>, bound: string[]): string[] {
  const out: string[] = [];
  for (const key of ["HOME", "TMPDIR"]) {
    const p = env[key];
    if (!p || !path.isAbsolute(p) || p === "/") continue;
    const norm = path.resolve(p);
    if (underAny(norm, [...bound, "/proc", "/dev"]) || out.includes(norm)) continue;
    out.push(norm);
  }
  return out;
}

/** In host network mode, a resolv.conf that points outside /etc (systemd-resolved) is bound too. */
async function resolvConfBinds(): Promise<string[]> {
  const real = await realpath("/etc/resolv.conf").catch(() => undefined);
  return real && !underAny(real, SYSTEM_PATHS) ? [real] : [];
}

function underAny(p: string, dirs: string[]): boolean {
  return dirs.some((d) => p === d || p.startsWith(d.endsWith("/") ? d : `${d}/`));
}
