// Per-execution cgroups: finding where this process may create them, creating
// one per execution with its limits, reading what it ran into, removing it.
//
// Two layouts, one interface:
// - cgroup v2 (unified): one directory per execution under a parent in the
//   server's own cgroup, with memory/pids/cpu enabled in the parent's
//   subtree_control. That only works when the server's cgroup is delegated to
//   it and the server is not itself a process of the cgroup whose subtree it
//   controls (the "no internal processes" rule), so the probe tests it for real.
// - cgroup v1: one directory per controller (memory, pids, cpu), each under
//   the server's own cgroup of that hierarchy, so the executions' use counts
//   towards whatever limits the server itself lives under (a container's).
// The process that joins is the sandbox's wrapper shell, before it execs
// bubblewrap: everything the command forks is born inside. The counters read
// after exit are the kernel's own (oom_kill, pids "max" events), so the reason
// reported is what happened, not a guess from the exit status.

import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, readFile, rmdir, writeFile } from "node:fs/promises";
import path from "node:path";
import type { CgroupVersion, LimitName, Limits } from "./types.js";

export type Controller = "memory" | "pids" | "cpu";
const CONTROLLERS: Controller[] = ["memory", "pids", "cpu"];
const CPU_PERIOD_US = 100_000;

export interface CgroupLayout {
  version: CgroupVersion;
  /** Per controller, the directory executions' cgroups are created in (created on demand). */
  parents: Partial<Record<Controller, string>>;
  /** Why a controller is missing, for the probe's report. */
  missing: string[];
}

interface Mount {
  root: string;
  point: string;
  type: string;
  options: string[];
}

function mounts(): Mount[] {
  const out: Mount[] = [];
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const sep = line.indexOf(" - ");
    if (sep < 0) continue;
    const left = line.slice(0, sep).split(" ");
    const right = line.slice(sep + 3).split(" ");
    if (right[0] !== "cgroup" && right[0] !== "cgroup2") continue;
    out.push({
      root: unescapeMount(left[3]!),
      point: unescapeMount(left[4]!),
      type: right[0],
      options: (right[2] ?? "").split(","),
    });
  }
  return out;
}

function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
}

/** This process's cgroup path per hierarchy: "" key for v2, controller names for v1. */
function ownCgroups(): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of readFileSync("/proc/self/cgroup", "utf8").split("\n")) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line);
    if (!m) continue;
    for (const c of m[1]!.split(",")) out.set(c, m[2]!);
  }
  return out;
}

/** The on-disk directory of cgroup `own` in a hierarchy mounted at `mount`. */
function dirOf(mount: Mount, own: string): string {
  let rel = own;
  if (mount.root !== "/" && (rel === mount.root || rel.startsWith(`${mount.root}/`))) {
    rel = rel.slice(mount.root.length);
  }
  return path.join(mount.point, rel);
}

/** Probe where per-execution cgroups can go, trying each for real (mkdir, write, rmdir). */
export async function detectCgroups(name: string): Promise<CgroupLayout> {
  let all: Mount[];
  let own: Map<string, string>;
  try {
    all = mounts();
    own = ownCgroups();
  } catch (err) {
    return { version: null, parents: {}, missing: [`cannot read /proc: ${String(err)}`] };
  }
  const v1: Partial<Record<Controller, string>> = {};
  const missing: string[] = [];
  for (const c of CONTROLLERS) {
    const mount = all.find((m) => m.type === "cgroup" && m.options.includes(c));
    const mine = own.get(c);
    if (!mount || mine === undefined) continue;
    const parent = path.join(dirOf(mount, mine), name);
    const why = await tryCreate(parent, c === "memory" ? "memory.limit_in_bytes" : undefined);
    if (why) missing.push(`${c} (v1): ${why}`);
    else v1[c] = parent;
  }
  if (Object.keys(v1).length > 0) return { version: 1, parents: v1, missing };
  const unified = all.find((m) => m.type === "cgroup2");
  const mine = own.get("");
  if (unified && mine !== undefined) {
    const base = dirOf(unified, mine);
    const available = readOr(path.join(base, "cgroup.controllers"), "").split(/\s+/);
    const wanted = CONTROLLERS.filter((c) => available.includes(c));
    if (wanted.length === 0) {
      missing.push(`cgroup v2 at ${base}: no memory/pids/cpu controller delegated`);
    } else {
      const parent = path.join(base, name);
      const why = await tryCreateV2(base, parent, wanted);
      if (why) missing.push(`cgroup v2 at ${base}: ${why}`);
      else {
        const parents: Partial<Record<Controller, string>> = {};
        for (const c of wanted) parents[c] = parent;
        return { version: 2, parents, missing };
      }
    }
  } else if (missing.length === 0) {
    missing.push("no cgroup hierarchy with memory, pids or cpu is mounted");
  }
  return { version: null, parents: {}, missing };
}

function readOr(file: string, fallback: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return fallback;
  }
}

async function tryCreate(parent: string, probeFile?: string): Promise<string | undefined> {
  try {
    await mkdir(parent, { recursive: true });
    const probe = path.join(parent, `probe-${randomBytes(4).toString("hex")}`);
    await mkdir(probe);
    try {
      if (probeFile) await writeFile(path.join(probe, probeFile), "-1");
    } finally {
      await rmdir(probe);
    }
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

async function tryCreateV2(
  base: string,
  parent: string,
  wanted: Controller[],
): Promise<string | undefined> {
  try {
    const enable = wanted.map((c) => `+${c}`).join(" ");
    await writeFile(path.join(base, "cgroup.subtree_control"), enable);
    await mkdir(parent, { recursive: true });
    await writeFile(path.join(parent, "cgroup.subtree_control"), enable);
    return tryCreate(parent);
  } catch (err) {
    return `${(err as Error).message} (the server must run in a delegated cgroup of its own: see docs/security.md)`;
  }
}

/** One execution's cgroup(s). */
export class ExecCgroup {
  private constructor(
    private readonly version: 1 | 2,
    /** controller → directory (v2: the same directory for all). */
    readonly dirs: Partial<Record<Controller, string>>,
  ) {}

  /**
   * Create the execution's cgroup(s) and write its limits. `prefix` starts
   * the directory's name (one per sandbox, so that its watchdog finds its own).
   */
  static async create(
    layout: CgroupLayout,
    limits: Limits,
    prefix = "x",
  ): Promise<ExecCgroup | null> {
    if (layout.version === null) return null;
    const id = `${prefix}${Date.now().toString(36)}${randomBytes(5).toString("hex")}`;
    const dirs: Partial<Record<Controller, string>> = {};
    for (const [c, parent] of Object.entries(layout.parents) as Array<[Controller, string]>) {
      dirs[c] = path.join(parent, id);
    }
    const cg = new ExecCgroup(layout.version, dirs);
    try {
      for (const dir of new Set(Object.values(dirs))) await mkdir(dir, { recursive: true });
      await cg.writeLimits(limits);
    } catch (err) {
      await cg.remove();
      throw err;
    }
    return cg;
  }

  /** The `cgroup.procs` files the wrapper writes its pid into (one per directory). */
  get procsFiles(): string[] {
    return [...new Set(Object.values(this.dirs))].map((d) => path.join(d, "cgroup.procs"));
  }

  private async writeLimits(limits: Limits): Promise<void> {
    const { memory, pids, cpu } = this.dirs;
    if (this.version === 1) {
      if (memory) {
        await writeFile(path.join(memory, "memory.limit_in_bytes"), String(limits.memoryBytes));
        // With swap accounting, cap memory+swap too: otherwise a hog swaps instead of ending.
        const memsw = path.join(memory, "memory.memsw.limit_in_bytes");
        if (existsSync(memsw)) await writeFile(memsw, String(limits.memoryBytes));
      }
      if (pids) await writeFile(path.join(pids, "pids.max"), String(limits.pids));
      if (cpu && limits.cpus > 0) {
        await writeFile(path.join(cpu, "cpu.cfs_period_us"), String(CPU_PERIOD_US));
        await writeFile(
          path.join(cpu, "cpu.cfs_quota_us"),
          String(Math.max(1000, Math.round(limits.cpus * CPU_PERIOD_US))),
        );
      }
      return;
    }
    if (memory) {
      await writeFile(path.join(memory, "memory.max"), String(limits.memoryBytes));
      await writeFile(path.join(memory, "memory.swap.max"), "0").catch(() => {});
    }
    if (pids) await writeFile(path.join(pids, "pids.max"), String(limits.pids));
    if (cpu && limits.cpus > 0) {
      const quota = Math.max(1000, Math.round(limits.cpus * CPU_PERIOD_US));
      await writeFile(path.join(cpu, "cpu.max"), `${quota} ${CPU_PERIOD_US}`);
    }
  }

  /**
   * Limits the execution ran into, from the kernel's counters. Read
   * synchronously: these are small kernel-generated files that never block,
   * and through the thread pool of a loaded host the two reads took ~3 ms,
   * which every exit event waits for.
   */
  async hits(): Promise<LimitName[]> {
    const out: LimitName[] = [];
    const { memory, pids } = this.dirs;
    if (memory) {
      const file = this.version === 1 ? "memory.oom_control" : "memory.events";
      if (counter(readOr(path.join(memory, file), ""), "oom_kill") > 0) out.push("memory");
    }
    if (pids) {
      if (counter(readOr(path.join(pids, "pids.events"), ""), "max") > 0) out.push("pids");
    }
    return out;
  }

  /** SIGKILL whatever is still inside, then remove the directories (retrying while they drain). */
  async remove(): Promise<void> {
    for (const dir of new Set(Object.values(this.dirs))) {
      for (let attempt = 0; ; attempt++) {
        try {
          await rmdir(dir);
          break;
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (code === "ENOENT") break;
          if (code !== "EBUSY" || attempt >= 50) return;
          await killAll(dir);
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    }
  }
}

async function killAll(dir: string): Promise<void> {
  const text = await readFile(path.join(dir, "cgroup.procs"), "utf8").catch(() => "");
  for (const pid of text.split("\n").filter(Boolean)) {
    try {
      process.kill(Number(pid), "SIGKILL");
    } catch {
      // already gone
    }
  }
}

function counter(text: string, key: string): number {
  const m = new RegExp(`^${key} (\\d+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}
