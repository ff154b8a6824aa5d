// The warm pool: a few sandboxes spawned ahead of demand, so that a confined
// execution does not pay for bubblewrap's start-up (namespaces, mounts) and
// its cgroups' creation on the way to its first byte. docs/security.md
// ("Warm sandboxes") is the user-facing version; docs/benchmarks.md has the
// figures that made this the design (bubblewrap's start-up is most of the
// cost, and nothing in it can be made cheap enough on the spawn path).
//
// An entry is the same chain a cold execution spawns (setpriv, the wrapper
// with its rlimits and cgroup join, the uid drop, bubblewrap with the same
// mounts and namespaces, `env --default-signal`) whose command is the init of
// handoff.ts, waiting on the control fd (stdio 3). It is spawned by this
// process with pipes for stdin, stdout and stderr, so its pid, process group
// and pipes become the execution's when it is adopted: the runtime records
// the pid and its start time as for any spawn, signals its group, reads its
// pipes.
//
// Bounds: entries are kept per profile key (network, limits, extra
// directories: what is fixed at spawn), at most `size` per key and
// `size` keys; an entry unused for `idleMs` is killed and not replaced until
// an execution asks for its profile again, so an idle server ends with none.
// Refills run one at a time in the background: after a miss at once, after
// a hit when the command exits (or after REFILL_DELAY_MS). On
// dispose, and on this process's exit, every idle entry is SIGKILLed; on a
// `kill -9` of the server they die as cold ones do (parent-death signal,
// --die-with-parent). An entry that dies before it is used is dropped; after
// three in a row the pool stops (every execution takes the cold path).

import { type ChildProcess, spawn } from "node:child_process";
import { CONTROL_FD, handoffScript } from "./handoff.js";
import type { LimitName } from "./types.js";

/** What the pool needs from the sandbox to spawn one entry of a profile. */
export interface WarmRecipe {
  file: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  /** The limits the entry's cgroup ran into (read after the exit). */
  hits(): Promise<LimitName[]>;
  /** Releases what the spawn needed (the entry's cgroup); idempotent. */
  release(): Promise<void>;
}

/** One spawned, waiting sandbox. */
export interface WarmEntry {
  key: string;
  child: ChildProcess;
  recipe: WarmRecipe;
  born: number;
}

export interface WarmPoolOptions {
  size: number;
  idleMs: number;
  /** Creates what one entry of `key` needs (its cgroup, its argv). */
  recipe(key: string): Promise<WarmRecipe>;
}

const MAX_FAILURES = 3;
/** How long a taken entry's command may run before its replacement is spawned anyway. */
const REFILL_DELAY_MS = 200;

export class WarmPool {
  private readonly idle = new Map<string, WarmEntry[]>();
  private readonly timers = new Map<WarmEntry, ReturnType<typeof setTimeout>>();
  /** Keys waiting for a refill, in order. */
  private readonly wanted: string[] = [];
  private filling = false;
  private failures = 0;
  private closed = false;
  private readonly onExit = () => this.killAllSync();

  constructor(private readonly o: WarmPoolOptions) {
    process.once("exit", this.onExit);
  }

  /** Whether the pool serves anything (size > 0, not closed, not given up). */
  get enabled(): boolean {
    return this.o.size > 0 && !this.closed && this.failures < MAX_FAILURES;
  }

  /** Idle entries right now (all keys). */
  get size(): number {
    let n = 0;
    for (const list of this.idle.values()) n += list.length;
    return n;
  }

  /** Pids of the idle entries (tests, diagnostics). */
  pids(): number[] {
    const out: number[] = [];
    for (const list of this.idle.values())
      for (const e of list) if (e.child.pid) out.push(e.child.pid);
    return out;
  }

  /**
   * An idle entry of `key`, or undefined; either way the key is refilled in
   * the background. The caller owns the entry from here (adopt or discard).
   */
  take(key: string): WarmEntry | undefined {
    if (!this.enabled) return undefined;
    const list = this.idle.get(key) ?? [];
    let entry: WarmEntry | undefined;
    while (list.length > 0 && !entry) {
      const e = list.shift()!;
      this.unwatch(e);
      if (e.child.exitCode === null && e.child.signalCode === null) entry = e;
      else void e.recipe.release();
    }
    if (list.length === 0) this.idle.delete(key);
    if (!entry) {
      this.want(key);
      return undefined;
    }
    this.failures = 0;
    // The refill (a spawn, bubblewrap's set-up) would compete for the CPU
    // with the command it was taken for: it starts when that one exits, or
    // after REFILL_DELAY_MS for a command that runs on.
    let wanted = false;
    const refill = () => {
      if (wanted) return;
      wanted = true;
      clearTimeout(timer);
      this.want(key);
    };
    const timer = setTimeout(refill, REFILL_DELAY_MS);
    timer.unref();
    entry.child.once("exit", refill);
    return entry;
  }

  /** Kill every idle entry and stop refilling. */
  async dispose(): Promise<void> {
    this.closed = true;
    process.removeListener("exit", this.onExit);
    const all = [...this.idle.values()].flat();
    this.idle.clear();
    for (const e of all) this.unwatch(e);
    await Promise.all(all.map((e) => discard(e)));
  }

  private want(key: string): void {
    if (!this.wanted.includes(key)) this.wanted.push(key);
    void this.fill();
  }

  private async fill(): Promise<void> {
    if (this.filling) return;
    this.filling = true;
    try {
      while (this.enabled && this.wanted.length > 0) {
        const key = this.wanted[0]!;
        const list = this.idle.get(key) ?? [];
        if (list.length >= this.o.size) {
          this.wanted.shift();
          continue;
        }
        this.makeRoom(key);
        const entry = await this.spawnOne(key).catch(() => undefined);
        if (!entry) {
          this.failures++;
          this.wanted.shift();
          continue;
        }
        if (this.closed) {
          await discard(entry);
          break;
        }
        list.push(entry);
        this.idle.set(key, list);
        this.watch(entry);
      }
    } finally {
      this.filling = false;
    }
  }

  /** At most `size` keys: the least recently filled other key makes way. */
  private makeRoom(key: string): void {
    if (this.idle.has(key) || this.idle.size < this.o.size) return;
    const [oldest] = this.idle.keys();
    if (oldest === undefined) return;
    const list = this.idle.get(oldest)!;
    this.idle.delete(oldest);
    for (const e of list) {
      this.unwatch(e);
      void discard(e);
    }
  }

  private async spawnOne(key: string): Promise<WarmEntry> {
    const recipe = await this.o.recipe(key);
    let child: ChildProcess;
    try {
      child = spawn(recipe.file, recipe.args, {
        cwd: recipe.cwd,
        env: recipe.env,
        detached: true,
        stdio: ["pipe", "pipe", "pipe", "pipe"],
        windowsHide: true,
      });
    } catch (err) {
      await recipe.release();
      throw err;
    }
    if (child.pid === undefined) {
      child.on("error", () => {});
      await recipe.release();
      throw new Error("the warm sandbox could not be spawned");
    }
    for (const s of child.stdio) s?.on("error", () => {});
    child.on("error", () => {});
    return { key, child, recipe, born: Date.now() };
  }

  /** While idle: expire after idleMs; an entry that dies is dropped (and counted). */
  private watch(e: WarmEntry): void {
    const timer = setTimeout(() => this.expire(e), this.o.idleMs);
    timer.unref();
    this.timers.set(e, timer);
    e.child.once("exit", this.exitListener(e));
  }

  private readonly listeners = new Map<WarmEntry, () => void>();
  private exitListener(e: WarmEntry): () => void {
    const fn = () => {
      if (!this.remove(e)) return;
      this.unwatch(e);
      this.failures++;
      void e.recipe.release();
    };
    this.listeners.set(e, fn);
    return fn;
  }

  /** Stop watching an entry (it is taken or discarded). */
  private unwatch(e: WarmEntry): void {
    const t = this.timers.get(e);
    if (t) clearTimeout(t);
    this.timers.delete(e);
    const fn = this.listeners.get(e);
    if (fn) e.child.removeListener("exit", fn);
    this.listeners.delete(e);
  }

  private remove(e: WarmEntry): boolean {
    const list = this.idle.get(e.key);
    const at = list?.indexOf(e) ?? -1;
    if (!list || at < 0) return false;
    list.splice(at, 1);
    if (list.length === 0) this.idle.delete(e.key);
    return true;
  }

  private expire(e: WarmEntry): void {
    if (!this.remove(e)) return;
    this.unwatch(e);
    void discard(e);
  }

  private killAllSync(): void {
    for (const list of this.idle.values()) for (const e of list) killGroup(e.child.pid);
  }
}

/** SIGKILL an unused entry's group and release its cgroup once it is gone. */
export async function discard(e: WarmEntry): Promise<void> {
  killGroup(e.child.pid);
  for (const s of e.child.stdio) s?.destroy();
  if (e.child.exitCode === null && e.child.signalCode === null) {
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, 2000);
      e.child.once("exit", () => {
        clearTimeout(t);
        resolve();
      });
    });
  }
  await e.recipe.release();
}

/**
 * Hand the request to an entry: the script goes to its control fd, which is
 * closed after it; with stdin "ignore" the server's end of its stdin is closed.
 */
export function handOff(
  e: WarmEntry,
  req: { argv: string[]; cwd: string; env: Record<string, string> },
  stdin: "pipe" | "ignore",
): ChildProcess {
  const control = e.child.stdio[CONTROL_FD] as NodeJS.WritableStream | null;
  control?.end(handoffScript({ ...req, stdin }));
  if (stdin === "ignore") e.child.stdin?.destroy();
  return e.child;
}

function killGroup(pid: number | undefined): void {
  if (!pid) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // gone already
  }
}
