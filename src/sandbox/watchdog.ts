// The sandbox's watchdog: a small shell outside any sandbox, one per Sandbox,
// that kills what is left in the sandbox's cgroups once the server is gone,
// however it went (`kill -9` included).
//
// Why it exists: each sandbox dies with the server through a parent-death
// signal on bubblewrap and bubblewrap's --die-with-parent on its PID 1. But
// when the server dies while a bubblewrap is still setting up (the first tens
// of milliseconds; with the warm pool refilling in the background that is
// not rare), bubblewrap 0.8's PID 1 can be left behind, waiting forever (it
// was measured: 21 of 30 kills during set-up left one). Every sandbox joined
// its cgroups before bubblewrap started, so the cgroup holds all of it: the
// watchdog waits for end-of-file on its stdin (a pipe only the server holds;
// the kernel closes it when the server dies), then SIGKILLs every process in
// the cgroups whose names start with this sandbox's prefix and removes them.
// Without cgroups there is nothing for it to find, and it is not started.

import { type ChildProcess, spawn } from "node:child_process";

/** `sh -c WATCHDOG agent-computer-watchdog <prefix> <parent dir…>`. */
export const WATCHDOG_SCRIPT = `prefix=$1; shift
read -r _ || :
i=0
while [ "$i" -lt 100 ]; do
  left=0
  for parent; do
    for d in "$parent/$prefix"*; do
      [ -d "$d" ] || continue
      for p in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null; left=1; done
      rmdir "$d" 2>/dev/null || left=1
    done
  done
  [ "$left" = 0 ] && exit 0
  i=$((i + 1))
  sleep 0.02
done`;

export class Watchdog {
  private readonly child: ChildProcess;

  /** Start watching the cgroups named `prefix…` under `parents`. */
  constructor(prefix: string, parents: string[]) {
    this.child = spawn(
      "/bin/sh",
      ["-c", WATCHDOG_SCRIPT, "agent-computer-watchdog", prefix, ...new Set(parents)],
      {
        stdio: ["pipe", "ignore", "ignore"],
        detached: true, // not in the server's group: a Ctrl-C must not end it first
        env: { PATH: "/usr/bin:/bin" },
      },
    );
    this.child.on("error", () => {});
    this.child.stdin?.on("error", () => {});
    this.child.unref();
    (this.child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** The sandbox is disposed: the watchdog sweeps (nothing should be left) and exits. */
  close(): void {
    this.child.stdin?.end();
  }
}
