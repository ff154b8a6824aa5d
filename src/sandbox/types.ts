// The sandbox's public shapes. The runtime hands the sandbox what it would
// have spawned (argv, cwd, env, limits, network) and gets back what to spawn
// instead; it never builds bubblewrap flags, cgroup paths or rlimits itself.
// Everything a confined execution needs to release (its cgroup, its egress
// proxy socket) hangs off the per-execution `Prepared`, so one object's
// lifetime is one execution's. docs/security.md explains the profile.

import type { ChildProcess } from "node:child_process";

/** Names of the resource limits, as reported when one of them ended an execution. */
export type LimitName =
  | "memory"
  | "pids"
  | "cpu"
  | "file"
  | "tmp"
  | "openFiles"
  | "wallTime"
  | "output";

/**
 * Resource limits of one execution. Absent fields take the sandbox's defaults;
 * a value above the sandbox's maximum is refused (`EINVAL`).
 */
export interface Limits {
  /** Memory of the whole execution (cgroup), bytes. Without a memory cgroup: RLIMIT_DATA per process. */
  memoryBytes: number;
  /** Processes and threads of the whole execution (cgroup). Without a pids cgroup: RLIMIT_NPROC. */
  pids: number;
  /** CPU bandwidth in CPUs (1.5 = one and a half cores), via the cgroup cpu quota. */
  cpus: number;
  /** Largest file a process may write (RLIMIT_FSIZE): the write past it gets SIGXFSZ. */
  fileSizeBytes: number;
  /** Size of the private /tmp (a tmpfs, also charged to the memory cgroup). */
  tmpBytes: number;
  /** Open file descriptors per process (RLIMIT_NOFILE). */
  openFiles: number;
  /** CPU seconds per process (RLIMIT_CPU, SIGXCPU past it); 0 = none. */
  cpuSeconds: number;
  /** Wall time; enforced by the runtime's timeout, carried here so one object holds every limit. 0 = none. */
  wallTimeMs: number;
  /** Output bytes; enforced by the runtime, carried like wallTimeMs. 0 = none. */
  outputBytes: number;
}

/**
 * Network of a sandbox: `none` (own network namespace, loopback only),
 * `host` (the host's network), or an allow-list of domain names reached
 * through the server's egress proxy (`example.com` matches that name only,
 * `*.example.com` its subdomains, `*` anything the proxy can resolve).
 */
export type NetworkPolicy = "none" | "host" | { allow: string[] };

/** What the runtime would have spawned, handed to `Sandbox.prepare`. */
export interface SandboxExecSpec {
  /** argv[0] is looked up in PATH inside the sandbox (the caller's env.PATH). */
  argv: string[];
  /** Absolute working directory, inside the workspace. */
  cwd: string;
  /** The whole environment of the command (base + overlay); nothing else leaks in. */
  env: Record<string, string>;
  /** Requested limits; the sandbox fills in defaults and checks maxima. */
  limits?: Partial<Limits>;
  /** Narrows the sandbox's network for this execution; never widens it (`EFORBIDDEN`). */
  network?: NetworkPolicy;
  /**
   * The caller can take an already-spawned sandbox (`Prepared.adopt`): the
   * prepared execution may then come from the warm pool (warm-pool.ts). Only
   * for pipes (a PTY must be spawned on its terminal).
   */
  warm?: boolean;
}

/** The exit status as `child_process` reports it for the spawned process. */
export interface SpawnedExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** What `afterExit` found out about how the execution ended. */
export interface ExitVerdict {
  /**
   * The command's own exit: bubblewrap's init reports "killed by signal N" as
   * exit code 128+N, which is decoded back to the signal here (a command that
   * itself exits with 128+N reads the same, as it would in a shell).
   */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when a limit ended the execution: `oom` for memory, `limit` for the others. */
  reason?: "oom" | "limit";
  /** Which limit, with `reason`. */
  limit?: LimitName;
  /** Every limit the execution ran into, even if it survived it (a fork that failed, say). */
  hit: LimitName[];
}

/**
 * One execution's spawn recipe and its cleanup. The recipe must be spawned by
 * the process that prepared it: the wrapper checks that its parent is that
 * process (an orphan would escape the parent-death signal) and exits 137
 * otherwise.
 */
export interface Prepared {
  /** For `child_process.spawn(file, args, {cwd, env, detached})`. */
  file: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  /** Always true: the runtime signals the execution as a process group. */
  detached: true;
  /** The limits in force (defaults applied), for the runtime's own wall-time and output checks. */
  limits: Limits;
  /** The network in force for this execution. */
  network: NetworkPolicy;
  /** Whether this execution is confined (false when the sandbox is `off`). */
  confined: boolean;
  /**
   * Set when the sandbox was spawned ahead (the warm pool): hands the command
   * over and returns the running child, whose pid and pipes are the
   * execution's. Call it instead of spawning `file`/`args` (which then only
   * describe what was spawned), at most once.
   */
  adopt?: (stdin: "pipe" | "ignore") => ChildProcess;
  /** Reads the limit counters; call once the spawned process has exited, before `dispose`. */
  afterExit(status: SpawnedExit): Promise<ExitVerdict>;
  /** Kills anything left in the execution's cgroup, removes it, closes its proxy socket. Idempotent. */
  dispose(): Promise<void>;
}

/** `off`: no confinement; `auto`: confine when the host allows, else run unconfined; `required`: refuse when it cannot. */
export type ConfineMode = "off" | "auto" | "required";

export interface SandboxOptions {
  /** The workspace: bound read-write at the same path. */
  workspace: string;
  /** Default `auto`. */
  confine?: ConfineMode;
  /** The server-wide network policy; default `none`. */
  network?: NetworkPolicy;
  /** Defaults for each execution's limits (over the built-in defaults). */
  defaults?: Partial<Limits>;
  /** Maxima an execution may ask for (over the built-in maxima). */
  maxima?: Partial<Limits>;
  /**
   * The uid/gid commands run as when the server runs as root. Default: the
   * workspace owner's when that is not root, else 65534/65534 (nobody).
   * Ignored when the server is not root (commands keep the server's uid).
   */
  uid?: number;
  gid?: number;
  /**
   * Host paths to mask inside the sandbox (a file reads as permission denied,
   * a directory as empty). The package's own install directory is always
   * added when it lies under a bound system directory; the runtime adds its
   * event log and token files.
   */
  hide?: string[];
  /** Extra host directories bound read-only at the same path (toolchains under /opt, say). */
  readOnly?: string[];
  /** The egress proxy's resolver (host name → IP address); tests map names to 127.0.0.1. */
  resolve?: (host: string) => Promise<string>;
  /** Where per-execution cgroups go; default: `agent-computer` under the server's own cgroup. */
  cgroupName?: string;
  /**
   * Sandboxes spawned ahead of demand (warm-pool.ts): `size` per profile
   * (default 2; 0 turns the pool off), each killed after `idleMs` unused
   * (default 300000).
   */
  warm?: { size?: number; idleMs?: number };
  /** Host facts to use instead of probing (tests); default: `probeHost()`. */
  host?: HostReport;
}

/** A sandbox for one server: one workspace, one policy, many executions. */
export interface Sandbox {
  /** True when executions are confined (false for `off`, or `auto` on a host that cannot). */
  readonly confined: boolean;
  /** One line for the startup banner: what is confined, or why not. */
  readonly summary: string;
  /** The uid/gid commands run as (and should own what they must write), or null when unchanged. */
  readonly identity: { uid: number; gid: number } | null;
  /** The host report the sandbox was built from. */
  readonly host: HostReport;
  /** The server-wide network policy. */
  readonly network: NetworkPolicy;
  /** Effective defaults and maxima. */
  readonly defaults: Limits;
  readonly maxima: Limits;
  /** The spawn recipe for one execution; creates its cgroup and proxy socket. */
  prepare(spec: SandboxExecSpec): Promise<Prepared>;
  /** Gives `path` (recursively, symlinks not followed) to `identity`, so commands can write it. */
  adopt(path: string): Promise<void>;
  /** Disposes every execution still prepared and removes the sandbox's runtime directory. */
  dispose(): Promise<void>;
}

/** One capability of the host, as `probeHost` found it. */
export interface HostCheck {
  ok: boolean;
  /** What was found (a version, a path, a value). */
  detail: string;
  /** When not ok: why, and how to fix it. */
  fix?: string;
}

export type CgroupVersion = 1 | 2 | null;

/** What this host can enforce. */
export interface HostReport {
  root: boolean;
  bwrap: HostCheck & { path?: string; version?: string };
  userNamespaces: HostCheck;
  cgroup: {
    version: CgroupVersion;
    /** Controllers under which the sandbox can create per-execution cgroups: `memory`, `pids`, `cpu`. */
    controllers: Array<"memory" | "pids" | "cpu">;
    /** Absolute cgroup directories per controller under which executions go. */
    parents: Partial<Record<"memory" | "pids" | "cpu", string>>;
    check: HostCheck;
  };
  rlimits: HostCheck & { tool?: string };
  setpriv: HostCheck & { path?: string };
  network: { none: HostCheck; host: HostCheck; allowList: HostCheck };
  /** What each `--confine` mode would do on this host. */
  verdict: Record<ConfineMode, { confined: boolean; ok: boolean; message: string }>;
}
