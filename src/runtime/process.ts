// One command this computer runs, from spawn until its exit is logged: the
// child process and its group, signals and kill escalation, stdin, reading
// the two pipes, and the rule that decides when the execution is over.
//
// - An execution is a process group (spawned detached: its own session and
//   group). kill/timeout signal the whole group: SIGTERM, then SIGKILL after
//   killGraceMs.
// - Grandchildren rule: when the main process exits, background grandchildren
//   may still hold the output pipes open. Reading goes on until both pipes
//   reach EOF, for at most drainMs of unpaused time; then whatever is left of
//   the group is SIGKILLed, the pipes are read to EOF (bounded again), and
//   only then is `exit` logged. The group is SIGKILLed after every exit, so
//   nothing of it outlives its `exit` event, nor do processes that left the
//   group (`setsid`): they carry the execution's marker and are found by it
//   (reaper.ts). The leader's pid and start time are recorded so that a
//   restarted server can finish the job after a crash.
// - The pipes flow only while neither a lagging reader (Backpressure) nor a
//   lagging log (Sequencer) holds them; the two pause and resume independently.
//
// - The spawn recipe comes from the sandbox (confine.ts): what is spawned may
//   be a wrapper around the command, and how it ended (a limit) is asked of
//   the sandbox once the group is done, before the exit is logged.
//
// The state lives in private fields; the Computer and the subscriptions use
// the few methods below.

import { type ChildProcess, spawn } from "node:child_process";
import { constants as osConstants } from "node:os";
import { StringDecoder } from "node:string_decoder";
import type { EventLog, ExecRecord } from "../store/types.js";
import { ComputerError, codeOf } from "../wire/errors.js";
import type { ExitReason } from "../wire/types.js";
import { Backpressure, type Reader } from "./backpressure.js";
import { exitOf, type Prepared } from "./confine.js";
import { LiveTail, type TailWait } from "./live-tail.js";
import { PtyChild, type PtySize, recordResize, signalSession } from "./pty.js";
import { disown, killExecution, killGroup, own, processStart } from "./reaper.js";
import { Sequencer } from "./sequencer.js";
import type { SpawnedChild } from "./spawner.js";
import type { ExecOptions } from "./types.js";

/** Signals after which the process is expected to end: they make the reason "killed". */
const TERMINATING = new Set(["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGKILL"]);
/** Bound on waiting for EOF after the group was SIGKILLed (writers outside the group). */
const POST_KILL_DRAIN_MS = 1000;

export interface LocalExecOptions {
  id: string;
  /** The record as created in the log; its `pid` is filled in once spawned. */
  record: ExecRecord;
  /** Hold the command for the reader the caller subscribes next (ExecOptions.awaitReader). */
  awaitReader?: boolean;
  /** The command's program, for the message when it cannot be started. */
  file: string;
  /** What to spawn (the sandbox's recipe) and how to read and release it after the exit. */
  prepared: Prepared;
  /** The recipe already spawned elsewhere (spawner.ts); else it is spawned here. */
  spawned?: SpawnedChild;
  /** The execution's marker (reaper.ts), set in the recipe's env under EXEC_KEY_ENV. */
  execKey: string;
  stdin: ExecOptions["stdin"];
  /** Run on a pseudo-terminal of this size (pty.ts); stdin is then "pipe". */
  pty?: PtySize;
  timeoutMs: number | undefined;
  eventLog: EventLog;
  killGraceMs: number;
  drainMs: number;
  stallMs: number;
  maxUnflushedBytes: number;
  /** Called once the exit event was handed to the log, before `done` resolves. */
  onFinished(exe: LocalExec): Promise<void>;
}

export class LocalExec {
  readonly id: string;
  /** This process's copy of the record (pid, startedAt; the log has the current one). */
  readonly record: ExecRecord;
  /** Resolves once the exit event was logged and onFinished ran. */
  readonly done: Promise<void>;
  private readonly child: ChildProcess;
  private readonly file: string;
  private readonly execKey: string;
  private readonly stdinMode: "pipe" | "closed";
  /** Input to write then close; dropped once handed to the pipe. */
  private input: string | Uint8Array | undefined;
  private readonly timeoutMs: number | undefined;
  private readonly sequencer: Sequencer;
  private readonly backpressure: Backpressure;
  /** Hands accepted batches to readers waiting at the live end. */
  private readonly tail = new LiveTail();
  /** The reader awaited by `awaitReader`, until the first real one follows. */
  private placeholder: Reader | undefined;
  private readonly decoders: { stdout: StringDecoder; stderr: StringDecoder } | undefined;
  private readonly killGraceMs: number;
  private readonly drainMs: number;
  private readonly onFinished: (exe: LocalExec) => Promise<void>;
  private resolveDone!: () => void;
  private openPipes = 2;
  private leaderExit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  private reason: ExitReason | null = null;
  private killTimer: ReturnType<typeof setTimeout> | undefined;
  private timeoutTimer: ReturnType<typeof setTimeout> | undefined;
  private drainTimer: ReturnType<typeof setTimeout> | undefined;
  private drainWhenResumed = false;
  private lastOutput: number;
  private isFinished = false;
  private readonly prepared: Prepared;
  /** The child when the spawn helper started it (spawner.ts). */
  private readonly spawned: SpawnedChild | undefined;
  /** The runtime-enforced limit that ended the execution (output), if any. */
  private runtimeLimit: "output" | null = null;
  private outputBytes = 0;
  /** The code of the log's refusal of this execution's output, once refused. */
  private logRefused: string | undefined;

  /** Spawns the child; call start() next (after registering the execution). */
  constructor(o: LocalExecOptions) {
    this.id = o.id;
    this.record = o.record;
    this.file = o.file;
    this.execKey = o.execKey;
    this.stdinMode = o.stdin === "pipe" ? "pipe" : "closed";
    this.input = o.stdin === "pipe" ? undefined : o.stdin;
    this.prepared = o.prepared;
    this.spawned = o.spawned;
    const wall = o.prepared.limits.wallTimeMs;
    this.timeoutMs = wall > 0 ? Math.min(wall, o.timeoutMs ?? wall) : o.timeoutMs;
    this.killGraceMs = o.killGraceMs;
    this.drainMs = o.drainMs;
    this.onFinished = o.onFinished;
    this.lastOutput = o.record.startedAt;
    this.done = new Promise((r) => {
      this.resolveDone = r;
    });
    this.decoders =
      o.record.encoding === "utf8"
        ? { stdout: new StringDecoder("utf8"), stderr: new StringDecoder("utf8") }
        : undefined;
    this.backpressure = new Backpressure(o.id, o.eventLog.capacityBytes, o.stallMs, () =>
      this.applyPipes(),
    );
    if (o.awaitReader) {
      // Stands at seq 0 for the reader the caller will subscribe, until it does.
      const placeholder: Reader = {
        after: 0,
        lastPull: Date.now(),
        cut: () => {
          if (this.placeholder === placeholder) this.placeholder = undefined;
        },
      };
      this.placeholder = placeholder;
      this.backpressure.add(placeholder);
    }
    this.sequencer = new Sequencer(o.id, o.eventLog, o.maxUnflushedBytes, this.backpressure, {
      blockedChanged: () => this.applyPipes(),
      // The log refused (closed, unreachable, full): the process must not keep
      // running unobserved. Its pipes then run to EOF so the exit is noticed,
      // and the exit says why (see finish).
      accepted: (batch) => this.tail.accepted(batch),
      appendFailed: (err) => {
        this.tail.wakeAll();
        this.logRefused ??= codeOf(err) ?? "EINTERNAL";
        this.signal("SIGKILL", "killed");
        signalAll(this.child.pid, "SIGKILL");
      },
    });
    const p = o.prepared;
    // A warm sandbox (Prepared.adopt) is already spawned: it is handed the command.
    this.child = o.pty
      ? (new PtyChild(p.file, p.args, { cwd: p.cwd, env: p.env, size: o.pty }) as never)
      : p.adopt
        ? p.adopt(o.stdin === undefined ? "ignore" : "pipe")
        : (o.spawned ??
          spawn(p.file, p.args, {
            cwd: p.cwd,
            env: p.env,
            detached: true,
            stdio: [o.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
            windowsHide: true,
          }));
    // A failed spawn emits "error" on the next tick, which may come before
    // start() (the spawn queue resolves the caller in a later microtask).
    this.child.on("error", () => {});
    if (this.child.pid !== undefined) {
      this.record.pid = this.child.pid;
      const start = o.spawned?.pidStart ?? processStart(this.child.pid);
      if (start !== undefined) this.record.pidStart = start;
      own(this.child.pid, this.execKey);
    }
  }

  /** The child's pid; undefined when it could not be started. */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** True once the exit is decided (it may still be on its way to the log). */
  get finished(): boolean {
    return this.isFinished;
  }

  /** Seq of the last event numbered (it may not be in the log yet). */
  get lastSeq(): number {
    return this.sequencer.lastSeq;
  }

  /** When the child last wrote output (epoch ms). */
  get lastOutputAt(): number {
    return this.lastOutput;
  }

  /**
   * Wire the pipes, stdin and the timeout; or, when the spawn failed (argv[0]
   * not found or not executable), behave like a shell: the message on stderr
   * and exit 127.
   */
  start(): void {
    if (this.child.pid === undefined) {
      this.spawnFailed();
      return;
    }
    const { child, input, timeoutMs } = this;
    this.input = undefined;
    if (child.stdin) {
      // EPIPE when the child exits without reading all of its input is normal.
      child.stdin.on("error", () => {});
      if (input !== undefined) child.stdin.end(input);
    }
    const onPipeDone = () => {
      if (--this.openPipes === 0) this.maybeFinish();
    };
    // A child spawned elsewhere (spawner.ts) may have closed an empty pipe,
    // or exited, before this runs: both are taken as they are.
    for (const name of ["stdout", "stderr"] as const) {
      const pipe = child[name]!;
      pipe.on("data", (chunk: Buffer) => this.onOutput(name, chunk));
      pipe.on("error", () => {});
      if (pipe.closed === true) queueMicrotask(onPipeDone);
      else pipe.once("close", onPipeDone);
    }
    child.on("error", () => {}); // reported through exit; never crash the host
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      // The spawn helper died under it: it was killed from here (spawner.ts).
      if (this.spawned?.helperLost) this.reason ??= "killed";
      this.leaderExit = { code, signal };
      if (this.timeoutTimer) clearTimeout(this.timeoutTimer);
      if (this.openPipes === 0) this.maybeFinish();
      else this.armDrain();
    };
    if (typeof child.exitCode === "number" || typeof child.signalCode === "string") {
      queueMicrotask(() => onExit(child.exitCode, child.signalCode));
    } else {
      child.once("exit", onExit);
    }
    if (timeoutMs !== undefined) {
      this.timeoutTimer = setTimeout(() => this.signal("SIGTERM", "timeout"), timeoutMs);
    }
  }

  /** Signal the group; a terminating signal escalates to SIGKILL after the grace. */
  signal(signal: string, reason: ExitReason): void {
    // The leader is gone; only stragglers may be left, and the drain handles them.
    if (this.isFinished || this.leaderExit) return;
    if (TERMINATING.has(signal)) this.reason ??= reason;
    signalAll(this.child.pid, signal);
    if (TERMINATING.has(signal) && signal !== "SIGKILL" && !this.killTimer) {
      this.killTimer = setTimeout(() => signalAll(this.child.pid, "SIGKILL"), this.killGraceMs);
      this.killTimer.unref?.();
    }
  }

  /** Write to stdin; resolves when the chunk was handed to the pipe. */
  async write(chunk: Uint8Array | string): Promise<void> {
    this.requirePipe();
    const stdin = this.child.stdin;
    if (!stdin || stdin.writableEnded || stdin.destroyed || this.isFinished) {
      throw stdinClosed(this.id);
    }
    await new Promise<void>((resolve, reject) => {
      stdin.write(chunk, (err) =>
        err
          ? reject(new ComputerError("ECLOSED", `stdin of ${this.id}: ${err.message}`))
          : resolve(),
      );
    });
  }

  /** Close stdin; a no-op when it is closed already. */
  async end(): Promise<void> {
    this.requirePipe();
    const stdin = this.child.stdin;
    if (!stdin || stdin.writableEnded || stdin.destroyed) return;
    await new Promise<void>((resolve) => stdin.end(() => resolve()));
  }

  /** Resize the pseudo-terminal and record the size (pty executions only). */
  resize(size: PtySize, eventLog: EventLog): Promise<void> {
    return recordResize(this.child, this.record, () => this.lastSeq, size, eventLog);
  }

  /** A live reader starts holding the pipes back when it lags. */
  follow(reader: Reader): void {
    this.backpressure.add(reader);
    const placeholder = this.placeholder;
    if (placeholder) {
      this.placeholder = undefined;
      this.backpressure.remove(placeholder);
    }
  }

  unfollow(reader: Reader): void {
    this.backpressure.remove(reader);
  }

  /** Seq of the last event the log accepted (what a log read can return, at most). */
  get acceptedSeq(): number {
    return this.tail.lastAccepted;
  }

  /**
   * Wait at the live end, having handed out everything up to `after`: the
   * next batch the log accepts if it continues there, else [] (read the log).
   */
  waitTail(after: number): TailWait {
    return this.tail.wait(after);
  }

  /** A reader moved its position (set `reader.after` first). */
  advanced(): void {
    this.backpressure.advanced();
  }

  private requirePipe(): void {
    if (this.stdinMode !== "pipe") {
      throw new ComputerError("EINVAL", `execution ${this.id} was not started with stdin: "pipe"`);
    }
  }

  private onOutput(name: "stdout" | "stderr", chunk: Buffer): void {
    this.lastOutput = Date.now();
    const max = this.prepared.limits.outputBytes;
    if (max > 0) {
      this.outputBytes += chunk.byteLength;
      if (this.outputBytes > max && this.runtimeLimit === null) {
        this.runtimeLimit = "output";
        this.signal("SIGKILL", "limit");
      }
    }
    if (this.decoders) {
      const text = this.decoders[name].write(chunk);
      if (text === "") return; // only part of a character so far
      this.sequencer.output(name, text);
    } else {
      this.sequencer.output(name, new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    }
  }

  private applyPipes(): void {
    const child = this.child;
    if (this.backpressure.paused || this.sequencer.blocked) {
      child.stdout?.pause();
      child.stderr?.pause();
      return;
    }
    child.stdout?.resume();
    child.stderr?.resume();
    if (this.drainWhenResumed) {
      this.drainWhenResumed = false;
      this.armDrain();
    }
  }

  private armDrain(): void {
    if (this.drainTimer || this.isFinished) return;
    this.drainTimer = setTimeout(() => {
      this.drainTimer = undefined;
      if (this.openPipes === 0) return;
      if (this.backpressure.paused || this.sequencer.blocked) {
        // Output is waiting for a reader or for the log, not held by a stray grandchild.
        this.drainWhenResumed = true;
        return;
      }
      // Grandchildren still hold the pipes: end the group, then give the
      // pipes a bounded time to deliver what was written before the kill.
      signalAll(this.child.pid, "SIGKILL");
      setTimeout(() => {
        if (this.openPipes === 0) return;
        if (!this.backpressure.paused && !this.sequencer.blocked) {
          this.child.stdout?.destroy();
          this.child.stderr?.destroy();
        } else {
          this.drainWhenResumed = true;
        }
      }, POST_KILL_DRAIN_MS).unref?.();
    }, this.drainMs);
    this.drainTimer.unref?.();
  }

  private maybeFinish(): void {
    if (this.isFinished || !this.leaderExit || this.openPipes > 0) return;
    this.isFinished = true;
    void this.finish();
  }

  private async finish(): Promise<void> {
    // Nothing of the group, nor anything that left it, outlives its exit event.
    await killExecution(this.child.pid, this.execKey);
    disown(this.child.pid);
    const status = this.leaderExit!;
    const verdict = await this.prepared
      .afterExit(status)
      .catch(() => ({ code: status.code, signal: status.signal, hit: [] }));
    const exit = exitOf(verdict, this.reason, this.runtimeLimit, this.prepared.limits);
    const { code, signal } = exit;
    for (const t of [this.killTimer, this.timeoutTimer, this.drainTimer]) if (t) clearTimeout(t);
    this.backpressure.stop();
    if (this.decoders) {
      for (const name of ["stdout", "stderr"] as const) {
        const rest = this.decoders[name].end();
        if (rest) this.sequencer.output(name, rest);
      }
    }
    if (this.spawned?.helperLost) {
      exit.notice = `${exit.notice ?? ""}agent-computer: the process that started this command died; the command was killed\n`;
    }
    if (this.logRefused) {
      exit.notice = `${exit.notice ?? ""}agent-computer: the event log refused this execution's output (${this.logRefused}); output was lost and the command was killed\n`;
    }
    if (exit.notice) {
      this.sequencer.output(
        "stderr",
        this.decoders ? exit.notice : new TextEncoder().encode(exit.notice),
        true,
      );
    }
    this.sequencer.exit(
      code ?? 128 + (signal ? (osConstants.signals[signal] ?? 0) : 0),
      exit.reason,
      signal,
    );
    await this.sequencer.drained();
    this.tail.close();
    await this.prepared.dispose().catch(() => {});
    await this.onFinished(this);
    this.resolveDone();
  }

  private spawnFailed(): void {
    this.child.on("error", () => {});
    this.openPipes = 0;
    this.child.stdout?.destroy();
    this.child.stderr?.destroy();
    const msg = `agent-computer: cannot run ${this.file}: not found or not executable\n`;
    this.sequencer.output("stderr", this.decoders ? msg : new TextEncoder().encode(msg));
    this.leaderExit = { code: 127, signal: null };
    this.maybeFinish();
  }
}

/**
 * Signal an execution's process group, and on a pty also the jobs its shell
 * put in groups of their own (the whole session).
 */
function signalAll(pid: number | undefined, signal: string): void {
  if (!pid) return;
  killGroup(pid, signal);
  signalSession(pid, signal);
}

export function stdinClosed(id: string): ComputerError {
  return new ComputerError("ECLOSED", `stdin of ${id} is closed`);
}
