// What this host can enforce, found by trying it: bubblewrap is run for real
// (a file's existence proves nothing inside a container whose seccomp or
// AppArmor profile forbids namespaces), cgroup directories are created and
// removed, and each missing piece comes with the reason and the fix. The
// same report drives `--confine auto|required|off` and the `doctor` command.

import { execFile } from "node:child_process";
import { accessSync, constants, readFileSync } from "node:fs";
import path from "node:path";
import { detectCgroups } from "./cgroups.js";
import type { ConfineMode, HostCheck, HostReport } from "./types.js";

/** The uid bubblewrap is tried as when the server is root (the default sandbox identity). */
const PROBE_UID = 65534;

const DOCKER_FIX =
  "in Docker, run the container with --security-opt seccomp=unconfined --security-opt apparmor=unconfined " +
  "(the default profiles forbid creating namespaces); in Kubernetes, set the pod's " +
  "securityContext.seccompProfile.type: Unconfined and an unconfined AppArmor profile";

export interface ProbeOptions {
  /** Name of the cgroup directory executions go under (default `agent-computer`). */
  cgroupName?: string;
  /** The uid to try bubblewrap as when root (default 65534). */
  uid?: number;
  gid?: number;
}

/** Find an executable in PATH (plus the usual system directories). */
export function which(name: string): string | undefined {
  const dirs = (process.env.PATH ?? "")
    .split(":")
    .concat(["/usr/bin", "/bin", "/usr/sbin", "/sbin"]);
  for (const dir of dirs) {
    if (!dir) continue;
    const full = path.join(dir, name);
    try {
      accessSync(full, constants.X_OK);
      return full;
    } catch {
      // next
    }
  }
  return undefined;
}

function run(file: string, args: string[]): Promise<{ ok: boolean; out: string }> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { timeout: 10_000, env: { PATH: "/usr/bin:/bin" } },
      (err, stdout, stderr) =>
        resolve({ ok: !err, out: `${stdout}${stderr}`.trim() || (err ? err.message : "") }),
    );
  });
}

function readSysctl(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8").trim();
  } catch {
    return undefined;
  }
}

/** Probe the host. Takes a few tens of milliseconds (it starts bubblewrap twice). */
export async function probeHost(options: ProbeOptions = {}): Promise<HostReport> {
  const root = process.getuid?.() === 0;
  const setprivPath = which("setpriv");
  const bwrapPath = which("bwrap");
  const setpriv: HostReport["setpriv"] = setprivPath
    ? { ok: true, detail: setprivPath, path: setprivPath }
    : {
        ok: !root,
        detail: "setpriv not found",
        fix: "install util-linux (it provides setpriv), needed to drop to an unprivileged uid when the server runs as root",
      };
  // Set by the wrapper shell's own `ulimit`: nothing to install, no extra exec.
  const rlimits: HostReport["rlimits"] = {
    ok: true,
    detail:
      "ulimit in the wrapper shell (file size, open files, core; data and processes without cgroups)",
    tool: "/bin/sh",
  };

  // As root, bubblewrap is tried as the identity commands will run as.
  const uid = options.uid ?? PROBE_UID;
  const gid = options.gid ?? PROBE_UID;
  const asUser = (args: string[]): [string, string[]] =>
    root && setprivPath
      ? [setprivPath, [`--reuid=${uid}`, `--regid=${gid}`, "--clear-groups", "--", ...args]]
      : [args[0]!, args.slice(1)];

  let bwrap: HostReport["bwrap"];
  let userNamespaces: HostCheck;
  if (!bwrapPath) {
    bwrap = {
      ok: false,
      detail: "bwrap not found in PATH",
      fix: "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)",
    };
    userNamespaces = userNamespaceCheck(undefined);
  } else {
    const version = (await run(bwrapPath, ["--version"])).out.replace(/^bubblewrap\s*/, "");
    const minimal = await run(
      ...asUser([bwrapPath, "--unshare-user", "--ro-bind", "/", "/", "true"]),
    );
    userNamespaces = userNamespaceCheck(minimal);
    const full = await run(
      ...asUser([
        bwrapPath,
        "--unshare-user",
        "--disable-userns",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "true",
      ]),
    );
    bwrap = full.ok
      ? {
          ok: true,
          detail: `bubblewrap ${version} at ${bwrapPath} (namespaces: user, pid, ipc, uts, net)`,
          path: bwrapPath,
          version,
        }
      : {
          ok: false,
          detail: `bubblewrap ${version} at ${bwrapPath} fails: ${full.out.split("\n")[0]}`,
          fix: userNamespaces.ok ? DOCKER_FIX : (userNamespaces.fix ?? DOCKER_FIX),
          path: bwrapPath,
          version,
        };
  }

  const layout = await detectCgroups(options.cgroupName ?? "agent-computer");
  const controllers = Object.keys(layout.parents) as Array<"memory" | "pids" | "cpu">;
  const cgroupCheck: HostCheck =
    layout.version === null
      ? {
          ok: false,
          detail: `no writable cgroup: ${layout.missing.join("; ") || "none found"}`,
          fix:
            "cgroup v2: run the server in a delegated cgroup (systemd-run --scope -p Delegate=yes, or in a " +
            "container give it a cgroup namespace and move the server out of the root cgroup); cgroup v1: " +
            "mount the memory and pids hierarchies writable (Docker: --privileged or a writable /sys/fs/cgroup). " +
            "Until then memory and processes are bounded per process by rlimits only",
        }
      : {
          ok: controllers.includes("memory") && controllers.includes("pids"),
          detail:
            `cgroup v${layout.version}: ${controllers.join(", ")}` +
            (layout.missing.length ? ` (missing: ${layout.missing.join("; ")})` : ""),
          ...(controllers.includes("memory") && controllers.includes("pids")
            ? {}
            : {
                fix: "make the memory and pids controllers writable for the server (see docs/security.md)",
              }),
        };

  const nodeVisible = process.execPath;
  const confinable = bwrap.ok && userNamespaces.ok && setpriv.ok;
  const why = !bwrap.ok
    ? bwrap.detail
    : !userNamespaces.ok
      ? userNamespaces.detail
      : !setpriv.ok
        ? setpriv.detail
        : "";
  const network: HostReport["network"] = {
    none: confinable
      ? { ok: true, detail: "own network namespace (loopback only)" }
      : { ok: false, detail: `needs the sandbox: ${why}` },
    host: { ok: true, detail: "the host's network" },
    allowList: confinable
      ? { ok: true, detail: `egress proxy through a forwarder run by ${nodeVisible}` }
      : { ok: false, detail: `needs the sandbox: ${why}` },
  };
  const limitsLine =
    layout.version === null
      ? "limits: rlimits only"
      : `limits: cgroup v${layout.version} (${controllers.join(", ")}) + rlimits`;
  const verdict: Record<ConfineMode, { confined: boolean; ok: boolean; message: string }> = {
    off: {
      confined: false,
      ok: true,
      message: "confinement off: commands run with the server's user, files and network",
    },
    auto: confinable
      ? {
          confined: true,
          ok: true,
          message: `confined (bubblewrap ${bwrap.version ?? ""}); ${limitsLine}`,
        }
      : {
          confined: false,
          ok: true,
          message: `NOT CONFINED (${why}): commands run with the server's user, files and network; ${limitsLine}`,
        },
    required: confinable
      ? {
          confined: true,
          ok: true,
          message: `confined (bubblewrap ${bwrap.version ?? ""}); ${limitsLine}`,
        }
      : { confined: false, ok: false, message: `cannot confine: ${why}` },
  };
  return {
    root,
    bwrap,
    userNamespaces,
    cgroup: { version: layout.version, controllers, parents: layout.parents, check: cgroupCheck },
    rlimits,
    setpriv,
    network,
    verdict,
  };
}

function userNamespaceCheck(result: { ok: boolean; out: string } | undefined): HostCheck {
  const max = readSysctl("/proc/sys/user/max_user_namespaces");
  const clone = readSysctl("/proc/sys/kernel/unprivileged_userns_clone");
  const apparmor = readSysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
  const facts = [
    max !== undefined ? `user.max_user_namespaces=${max}` : "",
    clone !== undefined ? `kernel.unprivileged_userns_clone=${clone}` : "",
    apparmor !== undefined ? `kernel.apparmor_restrict_unprivileged_userns=${apparmor}` : "",
  ]
    .filter(Boolean)
    .join(", ");
  if (result?.ok) return { ok: true, detail: `unprivileged user namespaces work (${facts})` };
  let fix = DOCKER_FIX;
  if (max === "0") fix = "sysctl -w user.max_user_namespaces=15000";
  else if (clone === "0") fix = "sysctl -w kernel.unprivileged_userns_clone=1";
  else if (apparmor === "1") {
    fix =
      "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile allowing userns for bwrap";
  }
  return {
    ok: false,
    detail: result
      ? `cannot create a user namespace: ${result.out.split("\n")[0]} (${facts})`
      : `untested without bwrap (${facts})`,
    fix,
  };
}
