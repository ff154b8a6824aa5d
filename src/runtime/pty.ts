// Executions on a pseudo-terminal (docs/runtime.md, "Terminals"): spawning a
// command on a PTY with @lydell/node-pty, resizing it, and the record of its
// sizes that lets a replay reproduce the screen.
//
// The PTY is wrapped in a ChildProcess look-alike (pid, stdin, stdout, an
// always-empty stderr, `exit`) so LocalExec runs it with the same code as a
// piped child: one seq log, the same backpressure (pause/resume of the PTY's
// reader), the same drain and kill rules. A PTY's output is its bytes: it is
// logged as `stdout` events, untouched.
//
// A terminal's reads are merged into larger chunks while more output is
// waiting (pty-reads.ts): a fast program costs one event per 64 KiB, not one
// per 4 KiB read, and a lone short read (an echo) still goes out at once.
//
// The process is a session leader with the PTY as its controlling terminal
// (node-pty forks with setsid + TIOCSCTTY). An interactive shell puts each job
// in a process group of its own, so signalling the leader's group is not
// enough: `signalSession` also signals every process of the session.
//
// Resizes are not events (exec-wire stays stdout/stderr/exit): the record's
// `pty.sizes` lists every size with the seq it follows, so a replay applies
// each before the event after it.

import { EventEmitter } from "node:events";
import { readdirSync, readFileSync, readSync } from "node:fs";
import { constants as osConstants } from "node:os";
import { type Readable, Writable } from "node:stream";
import * as nodePty from "@lydell/node-pty";
import type { EventLog, ExecRecord, PtyState } from "../store/types.js";
import { ComputerError } from "../wire/errors.js";
import { ReadMerger } from "./pty-reads.js";

/** A terminal size in character cells. */
export interface PtySize {
  cols: number;
  rows: number;
}

export const MAX_COLS = 1000;
export const MAX_ROWS = 1000;
/** Sizes kept in a record; older ones are dropped (a replay from seq 0 is then approximate). */
const MAX_SIZES = 4096;
/** How long after its exit a PTY's session is still known to signalSession (late SIGKILLs). */
const SESSION_FORGET_MS = 30_000;

/** Checks a {cols, rows} given by a caller; EINVAL otherwise. */
export function checkPtySize(size: unknown, what = "pty"): PtySize {
  if (typeof size !== "object" || size === null || Array.isArray(size)) {
    throw new ComputerError("EINVAL", `${what} must be an object { cols, rows }`);
  }
  const { cols, rows } = size as Record<string, unknown>;
  const ok = (v: unknown, max: number) =>
    typeof v === "number" && Number.isInteger(v) && v >= 1 && v <= max;
  if (!ok(cols, MAX_COLS) || !ok(rows, MAX_ROWS)) {
    throw new ComputerError(
      "EINVAL",
      `${what}.cols and ${what}.rows must be integers from 1 to ${MAX_COLS}`,
    );
  }
  const extra = Object.keys(size).filter((k) => k !== "cols" && k !== "rows");
  if (extra.length) throw new ComputerError("EINVAL", `unknown field(s) in ${what}: ${extra}`);
  return { cols: cols as number, rows: rows as number };
}

/** Pids of live PTY session leaders (see signalSession). */
const sessions = new Set<number>();

/** The output side of a PTY, shaped like the readable pipe LocalExec reads. */
class PtyOutput extends EventEmitter {
  destroyed = false;
  private readonly merger = new ReadMerger((chunk) => {
    if (!this.destroyed) this.emit("data", chunk);
  });
  constructor(private readonly term: nodePty.IPty) {
    super();
  }
  /** One read of the terminal (merged with the next ones while more is waiting). */
  push(chunk: Buffer): void {
    if (!this.destroyed) this.merger.push(chunk);
  }
  /** Hand over what is held now. */
  flush(): void {
    this.merger.flush();
  }
  pause(): this {
    if (!this.destroyed) this.term.pause();
    return this;
  }
  resume(): this {
    if (!this.destroyed) this.term.resume();
    return this;
  }
  /** Stop reading (stragglers still hold the terminal after the drain): close now. */
  destroy(): this {
    if (this.destroyed) return this;
    this.merger.flush();
    this.destroyed = true;
    try {
      (this.term as unknown as { _socket?: { destroy(): void } })._socket?.destroy();
    } catch {
      // already closed
    }
    return this;
  }
}

/** A stderr that never carries anything: a PTY merges both streams. */
class NoOutput extends EventEmitter {
  constructor() {
    super();
    // LocalExec attaches its listeners in the same tick as the spawn.
    setImmediate(() => this.emit("close"));
  }
  pause(): this {
    return this;
  }
  resume(): this {
    return this;
  }
  destroy(): this {
    return this;
  }
}

/** A spawned PTY process, in the shape of the ChildProcess fields LocalExec uses. */
export class PtyChild extends EventEmitter {
  readonly pid: number | undefined;
  readonly stdin: Writable;
  readonly stdout: PtyOutput;
  readonly stderr: NoOutput;
  private readonly term: nodePty.IPty;
  private size: PtySize;

  constructor(
    file: string,
    args: string[],
    o: { cwd: string; env: Record<string, string>; size: PtySize },
  ) {
    super();
    this.size = o.size;
    this.term = nodePty.spawn(file, args, {
      name: "xterm-256color",
      cols: o.size.cols,
      rows: o.size.rows,
      cwd: o.cwd,
      env: { ...o.env, TERM: "xterm-256color" },
      encoding: null,
    });
    const term = this.term;
    this.pid = term.pid;
    sessions.add(term.pid);
    this.stdout = new PtyOutput(term);
    this.stderr = new NoOutput();
    this.stdin = new Writable({
      write: (chunk: Buffer, _enc, cb) => {
        try {
          term.write(chunk as unknown as string); // node-pty writes Buffers as they are
          cb();
        } catch (err) {
          cb(err as Error);
        }
      },
      // Closing a terminal's input is typing Ctrl-D (end of file at the start of a line).
      final: (cb) => {
        try {
          term.write("\x04");
        } catch {
          // the terminal is gone
        }
        cb();
      },
    });
    term.onData((data) => this.stdout.push(data as unknown as Buffer));
    keepTailOnClose(term);
    // node-pty reports the exit once the terminal's output is read to its end.
    term.onExit(({ exitCode, signal }) => {
      setTimeout(() => sessions.delete(term.pid), SESSION_FORGET_MS).unref();
      if (!this.stdout.destroyed) {
        this.stdout.flush();
        this.stdout.destroyed = true;
        this.stdout.emit("close");
      }
      const name = signal ? signalName(signal) : null;
      this.emit("exit", name ? null : exitCode, name);
    });
  }

  /** The current size. */
  get cols(): number {
    return this.size.cols;
  }
  get rows(): number {
    return this.size.rows;
  }

  /** Hand over the output read so far (held reads included) before anything is numbered after it. */
  flushOutput(): void {
    this.stdout.flush();
  }

  /** Set the terminal's size; the kernel sends SIGWINCH to its foreground job. */
  resize(size: PtySize): void {
    this.size = size;
    try {
      this.term.resize(size.cols, size.rows);
    } catch {
      // the terminal is already closed: nothing to resize
    }
  }
}

/** Bound on what is read from a closing terminal (stragglers may keep writing). */
const TAIL_MAX_BYTES = 1024 * 1024;

/**
 * node-pty closes the terminal 200 ms after its process exits when the
 * terminal has not reached its end by then (a reader paused by backpressure,
 * an event loop busy for longer than that, or stragglers holding the
 * terminal), and whatever the kernel still held was lost: the last lines of
 * the command. Before that close, read what is there: what the stream had
 * buffered (read() emits it as `data`), then the terminal itself until it
 * has nothing more (EAGAIN) or has ended (EIO), bounded.
 */
function keepTailOnClose(term: nodePty.IPty): void {
  const inner = term as unknown as {
    _socket?: Readable;
    _fd?: number;
  };
  const socket = inner._socket;
  const fd = inner._fd;
  if (!socket || typeof fd !== "number") return;
  const destroy = socket.destroy.bind(socket);
  socket.destroy = ((err?: Error) => {
    if (!socket.destroyed) {
      try {
        while (socket.read() !== null) {
          // each chunk read is emitted as `data`
        }
        const buf = Buffer.allocUnsafe(64 * 1024);
        for (let total = 0; total < TAIL_MAX_BYTES; ) {
          const n = readSync(fd, buf, 0, buf.length, null);
          if (n <= 0) break;
          total += n;
          socket.emit("data", Buffer.from(buf.subarray(0, n)));
        }
      } catch {
        // EAGAIN: nothing more for now; EIO: the terminal has ended
      }
    }
    return destroy(err);
  }) as typeof socket.destroy;
}

function signalName(n: number): NodeJS.Signals | null {
  for (const [name, num] of Object.entries(osConstants.signals)) {
    if (num === n) return name as NodeJS.Signals;
  }
  return null;
}

/**
 * Signal every process of a PTY's session besides its group (jobs an
 * interactive shell put in groups of their own). A no-op for other pids.
 */
export function signalSession(pid: number, signal: string): void {
  if (!sessions.has(pid)) return;
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return; // no procfs: the group signal is all there is
  }
  for (const name of entries) {
    const p = Number(name);
    if (!Number.isInteger(p) || p <= 1 || p === pid) continue;
    try {
      const stat = readFileSync(`/proc/${p}/stat`, "utf8");
      // Fields after the command (which may hold spaces and parens): state ppid pgrp session.
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(rest[3]) === pid) process.kill(p, signal as NodeJS.Signals);
    } catch {
      // gone meanwhile, or not ours
    }
  }
}

/** The record's terminal state at the start: one size, after seq 0. */
export function initialPtyState(size: PtySize): PtyState {
  return { cols: size.cols, rows: size.rows, sizes: [{ after: 0, ...size }] };
}

/**
 * Resize the terminal and record the size after the last event numbered
 * (`lastSeq()`, asked once the output read before the resize is numbered): a
 * replay applies it between that event and the next. Updates of one record
 * are chained so they reach the log in order.
 */
export function recordResize(
  child: unknown,
  rec: ExecRecord,
  lastSeq: () => number,
  size: PtySize,
  eventLog: EventLog,
): Promise<void> {
  if (!(child instanceof PtyChild) || !rec.pty) {
    return Promise.reject(
      new ComputerError("EINVAL", `execution ${rec.id} was not started with a pty`),
    );
  }
  child.flushOutput();
  const after = lastSeq();
  child.resize(size);
  const state = rec.pty;
  const last = state.sizes[state.sizes.length - 1];
  if (last && last.after === after) state.sizes.pop();
  state.sizes.push({ after, ...size });
  if (state.sizes.length > MAX_SIZES) state.sizes.splice(0, state.sizes.length - MAX_SIZES);
  state.cols = size.cols;
  state.rows = size.rows;
  const snapshot = structuredClone(state);
  const prev = updates.get(rec) ?? Promise.resolve();
  const next = prev.then(() => eventLog.update(rec.id, { pty: snapshot })).catch(() => {});
  updates.set(rec, next);
  return next;
}

const updates = new WeakMap<ExecRecord, Promise<void>>();
