// Making sure no process of an execution outlives it or its server, without
// relying on namespaces or cgroups (the sandbox adds die-with-parent when it
// is on; this works with `--confine off` too). docs/runtime.md, "Processes
// never outlive their server", is the user-facing version.
//
// Three tools, all Linux /proc based (elsewhere they degrade to group kills):
// - Process identity: a pid alone can be reused once its process is gone, so
//   a spawned leader is recorded as pid + `pidStart` = "<start ticks>@<boot
//   id>" (/proc/<pid>/stat field 22 and /proc/sys/kernel/random/boot_id). A
//   group is only signalled by a later server when the pid still belongs to
//   the very process that was spawned (same start ticks, same boot).
// - A per-execution marker: every command starts with
//   AGENT_COMPUTER_EXEC_KEY=<id>@<startedAt> in its environment, inherited by
//   everything it starts, including `setsid` daemons that left the process
//   group. Scanning /proc/<pid>/environ (readable for our own uid) finds them;
//   they are killed when the execution ends, on a forced exit, and when a
//   restarted server closes the execution as lost. A process that clears its
//   environment (`env -i`) before daemonizing escapes the scan: only a cgroup
//   or a pid namespace (the sandbox) closes that hole.
// - A registry of the groups this process owns, killed synchronously by
//   `killOwnedSync()` on a forced exit (second SIGTERM) and on process exit.

import { readdirSync, readFileSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import type { EventLog, ExecRecord } from "../store/types.js";

/** The environment variable carrying an execution's marker. */
export const EXEC_KEY_ENV = "AGENT_COMPUTER_EXEC_KEY";

/** The marker value of an execution (stable: derived from its record). */
export function execKey(id: string, startedAt: number): string {
  return `${id}@${startedAt}`;
}

let bootIdCache: string | null | undefined;
function bootId(): string | null {
  if (bootIdCache === undefined) {
    try {
      bootIdCache = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
    } catch {
      bootIdCache = null;
    }
  }
  return bootIdCache;
}

/**
 * The identity of the process `pid` right now: "<start ticks>@<boot id>", or
 * undefined when it does not exist (or /proc is not there).
 */
export function processStart(pid: number): string | undefined {
  const rest = liveStat(pid);
  // rest[0] is field 3 (state); field 22 (starttime) is rest[19].
  const ticks = rest?.[19];
  return ticks ? identityOf(ticks) : undefined;
}

/** The identity of a process whose start ticks were read elsewhere (the spawn helper). */
export function identityOf(ticks: string): string | undefined {
  const boot = bootId();
  return boot ? `${ticks}@${boot}` : undefined;
}

/**
 * Fields 3 onwards of /proc/<pid>/stat, or undefined when the process does
 * not exist or is a zombie (it holds nothing any more).
 */
function liveStat(pid: number): string[] | undefined {
  if (!(pid > 0)) return undefined;
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // Field 2 (comm) is in parentheses and may hold spaces: split after its last ")".
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return rest[0] === "Z" ? undefined : rest;
}

/** Signal a whole process group; a group that is already gone is fine. */
export function killGroup(pid: number | undefined, signal: NodeJS.Signals | string): void {
  if (!pid) return;
  try {
    process.kill(-pid, signal as NodeJS.Signals);
  } catch {
    // ESRCH: nothing left in the group.
  }
}

function killPid(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // gone already
  }
}

const NEEDLE = Buffer.from(`${EXEC_KEY_ENV}=`);

/** The marker in one environ block, if any. */
function markerOf(environ: Buffer): string | undefined {
  let at = environ.indexOf(NEEDLE);
  while (at > 0 && environ[at - 1] !== 0) at = environ.indexOf(NEEDLE, at + 1);
  if (at < 0) return undefined;
  const start = at + NEEDLE.length;
  const end = environ.indexOf(0, start);
  return environ.subarray(start, end < 0 ? environ.length : end).toString("utf8");
}

function isPidName(name: string): boolean {
  return name.length > 0 && name.charCodeAt(0) >= 48 && name.charCodeAt(0) <= 57;
}

/**
 * The lowest pid a process forked since `floor` was allocated can have. The
 * kernel hands out pids in increasing order until it wraps at pid_max, so a
 * descendant of an execution's leader has a larger pid than the leader unless
 * the counter wrapped in between; then (last pid allocated < floor) every pid
 * is a candidate. Reading only the newer processes' environments keeps the
 * scan at a few files for a short command on a busy host.
 */
function scanFloor(floor: number | undefined): number {
  if (floor === undefined) return 0;
  try {
    const last = Number(readFileSync("/proc/sys/kernel/ns_last_pid", "utf8"));
    return Number.isSafeInteger(last) && last >= floor ? floor : 0;
  } catch {
    return 0;
  }
}

/**
 * Pids (other than ours) whose environment carries one of `keys` (a
 * synchronous scan). With `floor` (the smallest leader pid of those
 * executions), processes older than it are not read (see scanFloor).
 */
export function markedPidsSync(
  keys: ReadonlySet<string>,
  floor?: number,
  /** Pids known to carry none of `keys` (leaders of other running executions): not read. */
  skip?: ReadonlySet<number>,
): number[] {
  if (keys.size === 0) return [];
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return [];
  }
  const min = scanFloor(floor);
  const out: number[] = [];
  for (const name of names) {
    if (!isPidName(name) || Number(name) === process.pid || Number(name) < min) continue;
    if (skip?.has(Number(name))) continue;
    let environ: Buffer;
    try {
      environ = readFileSync(`/proc/${name}/environ`);
    } catch {
      continue; // another user's process, or gone
    }
    const m = markerOf(environ);
    if (m !== undefined && keys.has(m)) out.push(Number(name));
  }
  return out;
}

/**
 * SIGKILL what is left of an execution: its group, then every process still
 * carrying its marker (daemons that left the group). Resolves once done.
 */
export function killExecution(pid: number | undefined, key: string): Promise<void> {
  killGroup(pid, "SIGKILL");
  return scanSoon(key, pid);
}

/**
 * Executions that end close together share one scan: the synchronous scan
 * costs a few ms for a few hundred processes (measured 2.5-4.5 ms for 121 on
 * a loaded 2-core box), where the same scan through the thread pool took
 * 13-42 ms and would delay every exit event by that much.
 */
let pending: { keys: Set<string>; floor: number | undefined; done: Promise<void> } | undefined;
function scanSoon(key: string, leader: number | undefined): Promise<void> {
  if (!pending) {
    const batch = {
      keys: new Set<string>(),
      floor: leader as number | undefined,
      done: Promise.resolve(),
    };
    batch.done = new Promise<void>((resolve) => {
      setImmediate(() => {
        pending = undefined;
        // The leaders of the other executions this process runs carry their
        // own markers: reading their environments (~0.1 ms each) was most of
        // the scan when many short commands run at once. (A pid is only
        // disowned after its process was reaped; being reused in between
        // would take a wrap of the whole pid space.)
        const others = new Set<number>();
        for (const [pid, key] of owned) if (!batch.keys.has(key)) others.add(pid);
        const killed = markedPidsSync(batch.keys, batch.floor, others);
        for (const p of killed) killPid(p);
        void untilDead(killed).then(resolve);
      });
    });
    pending = batch;
  } else if (pending.floor !== undefined) {
    pending.floor = leader === undefined ? undefined : Math.min(pending.floor, leader);
  }
  pending.keys.add(key);
  return pending.done;
}

/** How long an exit waits for SIGKILLed stragglers to be gone (they normally take < 1 ms). */
const DEATH_WAIT_MS = 2000;

/**
 * Resolves once every pid in `pids` is gone or a zombie (bounded). SIGKILL is
 * delivered when the target next runs, so on a busy host a killed daemon can
 * still be running for a while after kill() returned; the exit event is only
 * published once it is not, so "nothing outlives its exit event" holds.
 */
async function untilDead(pids: number[]): Promise<void> {
  const deadline = Date.now() + DEATH_WAIT_MS;
  let left = pids.filter((p) => liveStat(p) !== undefined);
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 2));
    left = left.filter((p) => liveStat(p) !== undefined);
  }
}

/** Groups (leader pid → marker) of executions this process runs right now. */
const owned = new Map<number, string>();
let exitHookInstalled = false;

/** Register a spawned group; killed by killOwnedSync() until disowned. */
export function own(pid: number, key: string): void {
  owned.set(pid, key);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    // Whatever ends this process (process.exit, an uncaught exception), the
    // commands it runs do not outlive it.
    process.once("exit", () => killOwnedSync());
  }
}

export function disown(pid: number | undefined): void {
  if (pid !== undefined) owned.delete(pid);
}

/**
 * SIGKILL every group this process owns and every process carrying their
 * markers, synchronously: for the forced exit path, where nothing async runs.
 * Returns how many groups were signalled.
 */
export function killOwnedSync(): number {
  const groups = [...owned];
  owned.clear();
  for (const [pid] of groups) killGroup(pid, "SIGKILL");
  if (groups.length > 0) {
    for (const p of markedPidsSync(new Set(groups.map(([, k]) => k)))) killPid(p);
  }
  return groups.length;
}

/** What a restarted node did to the processes of one execution closed as `lost`. */
export type ReapOutcome = "killed" | "gone";

/**
 * On start: executions of this node that were closed as `lost` (the previous
 * server died with them running) may still have processes. Kill their groups
 * when the leader's pid still has the recorded start time (never a reused
 * pid), and every process carrying their markers. Each record is handled once:
 * its `pidStart` is cleared and `lostNote` says what was done.
 */
export async function reapLost(
  eventLog: EventLog,
  nodeId: string,
): Promise<Map<string, ReapOutcome>> {
  const recs = (await eventLog.list()).filter(
    (r) => r.state === "lost" && r.node === nodeId && r.pidStart !== undefined,
  );
  const outcome = new Map<string, ReapOutcome>();
  if (recs.length === 0) return outcome;
  const byKey = new Map<string, ExecRecord>();
  for (const r of recs) byKey.set(execKey(r.id, r.startedAt), r);
  for (const r of recs) {
    if (r.pid !== undefined && processStart(r.pid) === r.pidStart) {
      killGroup(r.pid, "SIGKILL");
      outcome.set(r.id, "killed");
    }
  }
  const keys = new Set(byKey.keys());
  const names = await readdir("/proc").catch(() => [] as string[]);
  for (const name of names) {
    if (!isPidName(name) || Number(name) === process.pid) continue;
    const environ = await readFile(`/proc/${name}/environ`).catch(() => null);
    const m = environ ? markerOf(environ) : undefined;
    if (m === undefined || !keys.has(m)) continue;
    killPid(Number(name));
    outcome.set(byKey.get(m)!.id, "killed");
  }
  for (const r of recs) {
    const how = outcome.get(r.id) ?? "gone";
    outcome.set(r.id, how);
    const lostNote =
      how === "killed"
        ? `the server of node ${nodeId} stopped while this ran; its processes were killed when the server restarted`
        : `the server of node ${nodeId} stopped while this ran; no process of it was left when the server restarted`;
    await eventLog.update(r.id, { pidStart: undefined, lostNote }).catch(() => {});
  }
  return outcome;
}
