// Spawning commands from a small helper process instead of from the server's
// own process.
//
// Why: Node's spawn() forks synchronously, and the fork copies the page
// tables of the whole process, then waits for the child's exec. From a
// server that loaded the runtime, its HTTP stack and its logs, that took
// 3.5 ms of the event loop per command (~45% of the loop when 16 clients
// start `true` back to back), against ~1.9 ms for a bare Node process —
// and nothing else runs on the loop meanwhile. The helper is a bare Node
// process (`node -e` with the function below; it loads nothing else) that
// only spawns: the fork's cost moves off the server's loop and shrinks with
// the process that forks. Measured with a 100 MB parent and 16 concurrent
// `true`: 95–106 starts/s with the loop at 100%, against 256–379 starts/s
// with the loop 20% busy, 0.6–0.75 ms of the parent's CPU per start.
//
// How the bytes get back: the helper spawns with pipes, stops reading them
// at once (it must never consume a byte), and hands their descriptors to
// the server over the IPC channel (Node sends a socket's descriptor with a
// message); the server then reads and writes them as it would its own
// child's. The helper reports each command's pid with its start time (read
// from /proc right after the spawn, while the process certainly exists) and
// its exit status. Messages on the channel keep their order (a message with a
// descriptor waits for the receiver's acknowledgement, and everything after
// it waits too), so the descriptors always arrive before the exit.
//
// Lifetimes: the helper lives as long as its channel. When the server goes
// away, however it goes (kill -9 included), the channel closes, and the
// helper SIGKILLs the process group of every command it started that has not
// exited, then exits; it ignores SIGINT/SIGTERM/SIGHUP, which a terminal or
// a supervisor sends to the server's whole group (the server decides what
// its commands get). If the helper dies, the commands it started are
// SIGKILLed (by group, from here) and their executions end as killed; the
// next spawn starts a new helper. While no command started through it runs,
// the helper does not keep the server's event loop alive.
//
// How many: a helper's spawn() blocks it until the child has exec'd (libuv
// waits on a close-on-exec pipe to learn of a failed exec), so one helper
// starts one command at a time and a burst queues behind it. Two helpers
// (the default) let one fork while the other waits. Measured on a 2-core
// host, 16 or 32 clients starting `true` over HTTP, both counts in the same
// rounds: two were faster in 19 of 26 rounds, by up to ~15%, though the
// runs' medians stay within the host's noise (docs/benchmarks.md, "Scale");
// more cores should widen it. The second helper costs ~40 MB of resident
// memory and is started only when two commands start at once. A request
// goes to the helper with the fewest commands not yet handed over.

import { type ChildProcess, spawn } from "node:child_process";
import { EventEmitter } from "node:events";
import type { Socket } from "node:net";
import { PassThrough, type Readable } from "node:stream";
import { ComputerError } from "../wire/errors.js";
import { identityOf, killGroup } from "./reaper.js";

/** What to spawn: the sandbox's recipe (file, args, cwd, env) and whether stdin is a pipe. */
export interface SpawnRequest {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  stdin: "pipe" | "ignore";
  /** The environment entry ("NAME=value") that marks this execution's processes (reaper.ts). */
  marker?: string;
}

/** A command started by the helper, shaped like the ChildProcess the runtime reads. */
export interface SpawnedChild extends ChildProcess {
  /** "<start ticks>@<boot id>" (reaper.ts) when the helper could read it. */
  readonly pidStart?: string;
  /** True once the helper died under it: it was SIGKILLed from here, its exit status is unknown. */
  readonly helperLost?: boolean;
}

/**
 * A request as sent: the environment as a change to the previous request's
 * (a few variables differ between executions; sending all of them cost
 * most of the message).
 */
type Wire = Omit<SpawnRequest, "env"> & {
  id: number;
  set: Record<string, string>;
  unset: string[];
};

type FromHelper =
  | { t: "out"; id: number; pid: number; ticks?: string }
  | { t: "err"; id: number }
  | { t: "in"; id: number }
  | { t: "nopid"; id: number; code?: string; message: string }
  | { t: "threw"; id: number; code?: string; message: string }
  | { t: "exit"; id: number; code: number | null; signal: NodeJS.Signals | null };

interface Pending {
  req: SpawnRequest;
  resolve(child: SpawnedChild): void;
  reject(err: unknown): void;
  child?: HelperChild;
  /** Pipe messages still to come before the child is handed over (0: handed over). */
  pipesLeft: number;
  /** The helper the request went to. */
  helper: ChildProcess;
  /** Restart the reads of the output pipes received so far (holdReads), at the handover. */
  held: (() => void)[];
}

/** The helper's program, run as `node -e` (CommonJS: `require` is there); it may use nothing else. */
function helperMain(req: NodeJS.Require): void {
  const { spawn } = req("node:child_process") as typeof import("node:child_process");
  const { readFileSync, readdirSync } = req("node:fs") as typeof import("node:fs");
  /** Leader pid → its execution's marker entry, while it runs. */
  const running = new Map<number, string | undefined>();
  const kill = (pid: number) => {
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  };
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => {});
  process.on("disconnect", () => {
    // The groups, then whatever carries their markers (setsid daemons).
    const markers = new Set<string>();
    for (const [pid, marker] of running) {
      kill(-pid);
      if (marker) markers.add(`${marker}\0`);
    }
    if (markers.size > 0) {
      let names: string[] = [];
      try {
        names = readdirSync("/proc");
      } catch {}
      for (const name of names) {
        const pid = Number(name);
        if (!(pid > 0) || pid === process.pid) continue;
        try {
          const environ = `\0${readFileSync(`/proc/${name}/environ`, "latin1")}\0`;
          for (const mk of markers) if (environ.includes(`\0${mk}`)) kill(pid);
        } catch {}
      }
    }
    process.exit(0);
  });
  /** The environment as last sent: each request carries only what changed (Wire below). */
  const env: Record<string, string> = {};
  process.on("message", (m: Wire) => {
    for (const k of m.unset) delete env[k];
    Object.assign(env, m.set);
    let child: ChildProcess;
    try {
      child = spawn(m.file, m.args, {
        cwd: m.cwd,
        env: { ...env },
        detached: true,
        stdio: [m.stdin, "pipe", "pipe"],
        windowsHide: true,
      });
    } catch (err) {
      const e = err as { code?: string; message?: string };
      process.send!({ t: "threw", id: m.id, code: e.code, message: String(e.message) });
      return;
    }
    const pid = child.pid;
    if (pid === undefined) {
      child.on("error", (err: { code?: string; message: string }) =>
        process.send!({ t: "nopid", id: m.id, code: err.code, message: err.message }),
      );
      return;
    }
    // Never read a byte of the command's output here: stop the reads the
    // streams started, before the loop could run one.
    const pipes = [child.stdout, child.stderr, child.stdin] as unknown as {
      _handle?: { readStop(): number };
    }[];
    for (const s of pipes) s?._handle?.readStop();
    // Node destroys a child's stdin when it exits; this one is on its way to
    // the server (its send may wait for an earlier one's acknowledgement).
    const stdin = child.stdin;
    child.stdin = null;
    running.set(pid, m.marker);
    let ticks: string | undefined;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (rest[0] !== "Z") ticks = rest[19];
    } catch {}
    process.send!({ t: "out", id: m.id, pid, ticks }, child.stdout as never);
    process.send!({ t: "err", id: m.id }, child.stderr as never);
    if (stdin) process.send!({ t: "in", id: m.id }, stdin as never);
    child.on("error", () => {});
    child.on("exit", (code, signal) => {
      running.delete(pid);
      process.send!({ t: "exit", id: m.id, code, signal });
    });
  });
}

/** A command's process as the runtime sees it: pipes from the helper, exit from its report. */
class HelperChild extends EventEmitter {
  pid: number | undefined;
  pidStart: string | undefined;
  stdout: Readable | null = null;
  stderr: Readable | null = null;
  stdin: Socket | null = null;
  /** As on a ChildProcess: null until it exited (the runtime checks them, see process.ts start()). */
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  exited = false;
  helperLost = false;
}

/**
 * Stops the reads Node started on a socket it built from a received
 * descriptor (its constructor starts reading at once) and returns what
 * restarts them. The output pipes arrive one message apart, an
 * acknowledgement's round trip that takes milliseconds on a busy host: read
 * from arrival, early stdout would be consumed before stderr was even here,
 * and the two would come out of order. Held until both are here, the bytes
 * wait in the pipes, and both start being read in the same turn, as a child
 * spawned here would be. Uses Node's socket internals (`_handle.reading`,
 * readStop/readStart), as the helper's own readStop does.
 */
export function holdReads(socket: Socket): () => void {
  const h = (
    socket as unknown as {
      _handle?: { reading?: boolean; readStop?(): number; readStart?(): number };
    }
  )._handle;
  if (!h?.reading || !h.readStop || !h.readStart) return () => {};
  h.readStop();
  h.reading = false;
  return () => {
    if (socket.destroyed || h.reading) return;
    h.reading = true;
    h.readStart!();
  };
}

/** An output pipe that is already closed, empty. */
function closedPipe(): Readable {
  const s = new PassThrough();
  s.destroy();
  return s;
}

/** One helper process and its channel. */
class HelperLink {
  private helper: ChildProcess | undefined;
  private next = 1;
  private unsettled = 0;
  /** Requests sent whose command was not handed over (or refused) yet. */
  get starting(): number {
    return this.unsettled;
  }
  /** Requests sent, by id, until their command exited (or the spawn failed). */
  private readonly pending = new Map<number, Pending>();
  private closed = false;
  /** The environment the helper holds (the last request's). */
  private sentEnv: Record<string, string> = {};

  /** Spawn through the helper; resolves once the pipes are here. Rejects as spawn() would throw. */
  spawn(req: SpawnRequest): Promise<SpawnedChild> {
    if (this.closed) return Promise.reject(new ComputerError("ECLOSED", "spawner is closed"));
    const helper = this.started();
    const id = this.next++;
    this.unsettled++;
    let counted = true;
    const handedOver = () => {
      if (counted) this.unsettled--;
      counted = false;
    };
    return new Promise<SpawnedChild>((resolve, reject) => {
      this.pending.set(id, {
        req,
        resolve: (child) => {
          handedOver();
          resolve(child);
        },
        reject: (err) => {
          handedOver();
          reject(err);
        },
        pipesLeft: req.stdin === "pipe" ? 3 : 2,
        helper,
        held: [],
      });
      this.refWhileBusy();
      const { env, ...rest } = req;
      const set: Record<string, string> = {};
      const unset: string[] = [];
      for (const k in env) if (this.sentEnv[k] !== env[k]) set[k] = env[k]!;
      for (const k in this.sentEnv) if (!(k in env)) unset.push(k);
      this.sentEnv = { ...env };
      const wire: Wire = { id, ...rest, set, unset };
      helper.send(wire);
    });
  }

  /** Let the helper go (it kills what it still runs: close after the executions ended). */
  close(): void {
    this.closed = true;
    const h = this.helper;
    this.helper = undefined;
    if (h?.connected) h.disconnect();
  }

  private started(): ChildProcess {
    if (this.helper) return this.helper;
    // An empty environment: it needs none (each command gets its own), so it
    // holds none of the server's (tokens) and no NODE_OPTIONS meant for it.
    const h: ChildProcess = spawn(process.execPath, ["-e", `(${helperMain.toString()})(require)`], {
      stdio: ["ignore", "ignore", "inherit", "ipc"],
      env: {},
      windowsHide: true,
    });
    h.on("message", (m: FromHelper, handle?: Socket) => this.onMessage(m, handle));
    // A helper that cannot start, or whose channel breaks, is as good as dead.
    h.on("error", () => this.lost(h));
    h.once("exit", () => this.lost(h));
    this.helper = h;
    this.sentEnv = {};
    h.unref();
    (h.channel as { unref?: () => void } | undefined)?.unref?.();
    return h;
  }

  private onMessage(m: FromHelper, handle: Socket | undefined): void {
    // The runtime listens from start() on, a few turns later: an error
    // before that must not be thrown as unheard.
    handle?.on("error", () => {});
    const resume = handle && (m.t === "out" || m.t === "err") ? holdReads(handle) : undefined;
    const p = this.pending.get(m.id);
    if (!p) {
      handle?.destroy();
      return;
    }
    if (resume) p.held.push(resume);
    // A descriptor the helper could not send any more arrives as nothing: an
    // output pipe is then taken as closed (empty), stdin as closed.
    switch (m.t) {
      case "out": {
        const c = new HelperChild();
        c.pid = m.pid;
        if (m.ticks) c.pidStart = identityOf(m.ticks);
        c.stdout = handle ?? closedPipe();
        p.child = c;
        break;
      }
      case "err":
        if (p.child) p.child.stderr = handle ?? closedPipe();
        break;
      case "in":
        if (p.child) p.child.stdin = handle ?? null;
        break;
      case "nopid": {
        // Like spawn() when the program cannot be started: no pid (the runtime
        // reports it as a shell would, exit 127). No "error" event: nothing may
        // be listening yet, and an unheard one would be thrown.
        this.settle(m.id);
        p.resolve(new HelperChild() as unknown as SpawnedChild);
        return;
      }
      case "threw":
        this.settle(m.id);
        p.reject(Object.assign(new Error(m.message), { code: m.code }));
        return;
      case "exit":
        this.settle(m.id);
        if (p.child) this.exited(p.child, m.code, m.signal);
        return;
    }
    if (--p.pipesLeft === 0 && p.child) {
      for (const resume of p.held) resume();
      p.resolve(p.child as unknown as SpawnedChild);
    }
  }

  private exited(c: HelperChild, code: number | null, signal: NodeJS.Signals | null): void {
    if (c.exited) return;
    c.exited = true;
    c.exitCode = code;
    c.signalCode = signal;
    c.emit("exit", code, signal);
  }

  /** The helper is gone: what it started is killed here, and the next spawn starts a new one. */
  private lost(h: ChildProcess): void {
    if (this.helper === h) this.helper = undefined;
    const left: Pending[] = [];
    for (const [id, p] of this.pending) {
      if (p.helper !== h) continue; // a newer helper's
      this.pending.delete(id);
      left.push(p);
    }
    this.unrefWhenIdle();
    for (const p of left) {
      const c = p.child;
      killGroup(c?.pid, "SIGKILL");
      if (!c || p.pipesLeft > 0) {
        // Never handed over: the caller learns it did not start (and makes
        // sure nothing of it runs: the helper may have spawned it). Its
        // pipes received so far are held (holdReads), so they would never
        // see their end: close them here.
        c?.stdout?.destroy();
        c?.stderr?.destroy();
        c?.stdin?.destroy();
        p.reject(
          new ComputerError("EUNAVAILABLE", "the spawn helper exited before the command started"),
        );
        continue;
      }
      c.helperLost = true;
      this.exited(c, null, "SIGKILL");
    }
  }

  private settle(id: number): void {
    this.pending.delete(id);
    this.unrefWhenIdle();
  }

  /** Keep the process alive while a request or a command started through the helper is pending. */
  private refWhileBusy(): void {
    if (this.pending.size === 1) this.channelRef(true);
  }

  private unrefWhenIdle(): void {
    if (this.pending.size === 0) this.channelRef(false);
  }

  private channelRef(on: boolean): void {
    const h = this.helper;
    if (!h) return;
    const ch = h.channel as { ref?: () => void; unref?: () => void } | undefined;
    if (on) {
      h.ref();
      ch?.ref?.();
    } else {
      h.unref();
      ch?.unref?.();
    }
  }
}

/** Options of a Spawner. */
export interface SpawnerOptions {
  /** Helper processes to fork from (default 2, at most MAX_SPAWN_HELPERS). */
  helpers?: number;
}

/** Default number of spawn helpers (see "How many" at the top). */
export const DEFAULT_SPAWN_HELPERS = 2;
/** Upper bound on spawn helpers: each is a Node process of its own. */
export const MAX_SPAWN_HELPERS = 16;

/**
 * Spawns commands through a few helper processes, each started on first use.
 * A request goes to the helper with the fewest commands still being handed
 * over, the first one on a tie: one command at a time always goes to the
 * same (warm) helper, and a second helper starts only once two commands are
 * starting together.
 */
export class Spawner {
  private readonly links: HelperLink[];

  constructor(options: SpawnerOptions = {}) {
    const n = options.helpers ?? DEFAULT_SPAWN_HELPERS;
    if (!(Number.isInteger(n) && n >= 1 && n <= MAX_SPAWN_HELPERS)) {
      throw new ComputerError(
        "EINVAL",
        `spawnHelpers must be an integer from 1 to ${MAX_SPAWN_HELPERS}, not ${String(n)}`,
      );
    }
    this.links = Array.from({ length: n }, () => new HelperLink());
  }

  /** Spawn through a helper; resolves once the pipes are here. Rejects as spawn() would throw. */
  spawn(req: SpawnRequest): Promise<SpawnedChild> {
    let best = this.links[0]!;
    for (const link of this.links) if (link.starting < best.starting) best = link;
    return best.spawn(req);
  }

  /** Let the helpers go (each kills what it still runs: close after the executions ended). */
  close(): void {
    for (const link of this.links) link.close();
  }
}
