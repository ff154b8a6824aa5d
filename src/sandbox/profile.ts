// The spawn recipe of a confined execution: the chain of small programs the
// runtime spawns instead of the command, and bubblewrap's flags. Pure: it
// turns facts (paths, identity, limits, network) into argv, so the profile
// can be read and tested without running anything.
//
// The chain, each step exec'ing the next (no extra process stays around):
//   setpriv   sets the parent-death signal (SIGKILL when the server dies) at
//             the very first exec
//   sh (wrapper, as the server's user)
//     exits at once if the server died before that (its parent is no longer
//     the server: the one race a parent-death signal cannot cover), sets the
//     rlimits with the shell's own `ulimit` (no extra exec; the floor when
//     cgroups are missing), joins the execution's cgroups, then ignores the
//     terminating signals (so that a signal sent to the process group the
//     runtime spawned reaches the command, not bubblewrap: bubblewrap dying
//     would take the command with it at once, leaving it no chance to handle
//     SIGTERM)
//   setpriv   (only when the server is root) drops to the sandbox's uid/gid
//             with no groups and no capabilities, no-new-privileges, and sets
//             the parent-death signal again (a uid change clears it)
//   bwrap     new user, mount, PID, IPC, UTS, network (unless host) and cgroup
//             namespaces; --die-with-parent; its init (PID 1 inside) exits
//             when the command does, and the namespace's death kills the rest
//   [sh + node forwarder, allow-list mode only]
//   env --default-signal   restores default signal handling for the command
//   the command
// The command stays in the process group the runtime spawned (no
// --new-session: the runtime already starts each execution in a new session
// without a controlling terminal, so there is no terminal to inject into), so
// group signals keep their usual meaning; SIGKILL of the group kills
// bubblewrap's init, which ends the whole PID namespace.

import type { Limits, NetworkPolicy } from "./types.js";

/** Where the egress proxy's socket and the forwarder's node appear inside the sandbox. */
export const SANDBOX_RUN_DIR = "/run/agent-computer";
export const SANDBOX_PROXY_SOCKET = `${SANDBOX_RUN_DIR}/egress.sock`;
export const SANDBOX_NODE = `${SANDBOX_RUN_DIR}/node`;
/** The loopback port the forwarder listens on inside the sandbox. */
export const SANDBOX_PROXY_PORT = 3128;

/** Signals that would end bubblewrap by default; ignored up to the command. */
const IGNORED_SIGNALS = "HUP INT QUIT USR1 USR2 PIPE ALRM TERM VTALRM PROF IO PWR";

/**
 * The wrapper: `sh -c WRAPPER agent-computer-sandbox <server pid> <ulimit
 * option value…> -- <procs files…> -- <argv…>`. A limit it cannot set or a
 * cgroup it cannot join is an error (exit 125): running unlimited silently
 * would defeat the point. An orphan (the server died before the parent-death
 * signal was set) exits 137 at once.
 */
export const WRAPPER_SCRIPT = `[ "$PPID" = "$1" ] || exit 137
shift
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
  ulimit "$1" "$2" || { echo "agent-computer sandbox: cannot set ulimit $1 $2" >&2; exit 125; }
  shift 2
done
shift
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
  echo $$ > "$1" || { echo "agent-computer sandbox: cannot join cgroup $1" >&2; exit 125; }
  shift
done
shift
trap '' ${IGNORED_SIGNALS}
exec "$@"`;

/**
 * Inside the sandbox, allow-list mode: start the forwarder (loopback TCP →
 * the proxy's Unix socket) detached from the command (so a shell's `wait`
 * does not wait for it), wait for its "ok", then run the command.
 */
export const PROXY_SHIM_SCRIPT = `node=$1 port=$2 sock=$3 js=$4
shift 4
ok=$("$node" -e "$js" "$port" "$sock" </dev/null 2>/dev/null &)
[ "$ok" = ok ] || { echo "agent-computer sandbox: the egress forwarder did not start" >&2; exit 125; }
exec "$@"`;

/**
 * The forwarder, run by node inside the sandbox (`node -e`, nothing to ship
 * as a file). It keeps running across the group's signals (handlers that do
 * nothing) and dies with the sandbox's PID namespace. Its "ok" goes to the
 * shim's command substitution, which reads to EOF: so fd 1 is closed after
 * it, and reopened on /dev/null at once (stream code that touches
 * process.stdout later must not find fd 1 reused by a socket).
 */
export const FORWARDER_SOURCE = `const net = require("node:net"), fs = require("node:fs");
const [port, sock] = process.argv.slice(1);
for (const s of ["SIGHUP", "SIGINT", "SIGTERM", "SIGQUIT", "SIGUSR1", "SIGUSR2"]) process.on(s, () => {});
const server = net.createServer((c) => {
  const u = net.connect(sock);
  c.pipe(u); u.pipe(c);
  c.on("error", () => u.destroy()); u.on("error", () => c.destroy());
  c.on("close", () => u.destroy()); u.on("close", () => c.destroy());
});
server.listen(Number(port), "127.0.0.1", () => {
  fs.writeSync(1, "ok"); fs.closeSync(1); fs.openSync("/dev/null", "w");
});`;

export interface ProfileInput {
  bwrap: string;
  /** The server's pid: the wrapper's parent, checked by the wrapper. */
  serverPid: number;
  /**
   * setpriv: sets the parent-death signal from the first exec on (bubblewrap
   * sets its own only once it has cloned), and when the server is root drops
   * to the sandbox's uid/gid.
   */
  setpriv: { path: string; drop: { uid: number; gid: number } | null } | null;
  /** bubblewrap mount arguments for the read-only system (from systemMounts). */
  system: string[];
  workspace: string;
  cwd: string;
  /** Host paths to mask: files → unreadable, directories → empty and read-only. */
  hide: Array<{ path: string; dir: boolean }>;
  readOnly: string[];
  /** Absolute directories to create in the sandbox's root (HOME, TMPDIR outside the binds). */
  dirs: string[];
  network: NetworkPolicy;
  /** Allow-list mode: the host path of the execution's proxy socket and of a node binary. */
  proxy: { socket: string; node: string } | null;
  /** Extra binds for host-mode name resolution (a resolv.conf outside /etc). */
  hostNetBinds: string[];
  limits: Limits;
  /** Which limits the cgroup enforces, so the matching rlimit floor is not needed. */
  cgroupHas: { memory: boolean; pids: boolean };
  procsFiles: string[];
  argv: string[];
}

/**
 * The rlimits as the wrapper's `ulimit` option/value pairs (soft and hard
 * alike; file size in 512-byte blocks, data in KiB, as POSIX shells count):
 * always the file size, descriptors and core dumps; memory and processes when
 * no cgroup does it.
 */
export function rlimitArgs(
  limits: Limits,
  cgroupHas: { memory: boolean; pids: boolean },
): string[] {
  const out = [
    "-f",
    String(Math.ceil(limits.fileSizeBytes / 512)),
    "-n",
    String(limits.openFiles),
    "-c",
    "0",
  ];
  if (!cgroupHas.memory) out.push("-d", String(Math.ceil(limits.memoryBytes / 1024)));
  if (!cgroupHas.pids) out.push("-u", String(limits.pids));
  if (limits.cpuSeconds > 0) out.push("-t", String(limits.cpuSeconds));
  return out;
}

/** bubblewrap's flags, up to and excluding the command. */
export function bwrapArgs(input: ProfileInput): string[] {
  const a: string[] = [
    "--unshare-user",
    "--disable-userns",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--die-with-parent",
    "--cap-drop",
    "ALL",
  ];
  if (input.network !== "host") a.push("--unshare-net");
  a.push(...input.system);
  if (input.network === "host") for (const p of input.hostNetBinds) a.push("--ro-bind", p, p);
  a.push("--proc", "/proc", "--dev", "/dev");
  a.push("--size", String(input.limits.tmpBytes), "--tmpfs", "/tmp");
  for (const p of input.readOnly) a.push("--ro-bind", p, p);
  a.push("--bind", input.workspace, input.workspace);
  for (const d of input.dirs) a.push("--dir", d);
  for (const h of input.hide) {
    if (h.dir) a.push("--tmpfs", h.path, "--remount-ro", h.path);
    else a.push("--ro-bind", "/dev/null", h.path);
  }
  if (input.proxy) {
    a.push("--bind", input.proxy.socket, SANDBOX_PROXY_SOCKET);
    a.push("--ro-bind", input.proxy.node, SANDBOX_NODE);
  }
  a.push("--chdir", input.cwd);
  return a;
}

/** What to spawn: `child_process.spawn(file, args)`. */
export interface SpawnRecipe {
  file: string;
  args: string[];
}

/** The whole chain of a confined execution. */
export function spawnArgs(input: ProfileInput): SpawnRecipe {
  const chain: string[] = [];
  const drop = input.setpriv?.drop;
  if (input.setpriv && drop) {
    chain.push(
      input.setpriv.path,
      "--pdeathsig=SIGKILL",
      `--reuid=${drop.uid}`,
      `--regid=${drop.gid}`,
      "--clear-groups",
      "--inh-caps=-all",
      "--bounding-set=-all",
      "--no-new-privs",
      "--",
    );
  }
  chain.push(input.bwrap, ...bwrapArgs(input), "--");
  if (input.proxy) {
    chain.push(
      "/bin/sh",
      "-c",
      PROXY_SHIM_SCRIPT,
      "agent-computer-egress",
      SANDBOX_NODE,
      String(SANDBOX_PROXY_PORT),
      SANDBOX_PROXY_SOCKET,
      FORWARDER_SOURCE,
    );
  }
  chain.push(...defaultSignals(input.argv));
  const rlimits = rlimitArgs(input.limits, input.cgroupHas);
  return wrapper(input.setpriv?.path ?? null, input.serverPid, rlimits, input.procsFiles, chain);
}

/**
 * Limits without confinement (a host without bubblewrap under `auto`): the
 * same wrapper and rlimits, then the command.
 */
export function limitsOnlyArgs(
  setpriv: string | null,
  serverPid: number,
  procsFiles: string[],
  limits: Limits,
  cgroupHas: { memory: boolean; pids: boolean },
  argv: string[],
): SpawnRecipe {
  const rlimits = rlimitArgs(limits, cgroupHas);
  return wrapper(setpriv, serverPid, rlimits, procsFiles, defaultSignals(argv));
}

function wrapper(
  setpriv: string | null,
  serverPid: number,
  rlimits: string[],
  procsFiles: string[],
  chain: string[],
): SpawnRecipe {
  const sh = [
    "/bin/sh",
    "-c",
    WRAPPER_SCRIPT,
    "agent-computer-sandbox",
    String(serverPid),
    ...rlimits,
    "--",
    ...procsFiles,
    "--",
    ...chain,
  ];
  if (!setpriv) return { file: sh[0]!, args: sh.slice(1) };
  return { file: setpriv, args: ["--pdeathsig=SIGKILL", "--", ...sh] };
}

function defaultSignals(argv: string[]): string[] {
  return ["/usr/bin/env", "--default-signal", "--", ...argv];
}

/** The variables the allow-list mode adds to the command's environment. */
export function proxyEnv(): Record<string, string> {
  const url = `http://127.0.0.1:${SANDBOX_PROXY_PORT}`;
  return {
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    http_proxy: url,
    https_proxy: url,
    NO_PROXY: "localhost,127.0.0.1,::1",
    no_proxy: "localhost,127.0.0.1,::1",
  };
}
