// The in-process computer: spawns commands in the workspace, numbers their
// output into one gap-free seq per execution, writes it to the EventLog, and
// serves every subscriber (live or resuming) by reading that log. One code
// path for live and resumed streams means they cannot disagree.
//
// Shape decisions (docs/runtime.md has the user-facing version):
// - An execution is a process group (spawned detached: its own session and
//   group). kill/timeout signal the group: SIGTERM, then SIGKILL after
//   killGraceMs.
// - Grandchildren rule: when the main process exits, output pipes may still be
//   held open by background grandchildren. We keep reading until both pipes
//   reach EOF, for at most drainMs of unpaused time; then SIGKILL whatever is
//   left of the group, read to EOF (bounded again), and only then log `exit`.
//   The group is SIGKILLed after every exit, so nothing of it outlives its
//   `exit` event.
// - Backpressure: subscribers pull from the log. While a live subscriber in
//   this process is more than half the ring behind, the child's pipes are
//   paused (the child blocks on write) so the ring never evicts what a live
//   reader has not read. A subscriber that holds the child back and asks for
//   nothing for stallMs is cut off with ELAGGING; the others carry on.
// - Appends are batched: while one append is in flight, new output queues and
//   goes in the next append.

import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { stat } from "node:fs/promises";
import { constants as osConstants } from "node:os";
import path from "node:path";
import { StringDecoder } from "node:string_decoder";
import {
  DEFAULT_LOG_MAX_BYTES,
  DEFAULT_RETENTION_MS,
  EVENT_OVERHEAD_BYTES,
  eventSize,
} from "../store/common.js";
import { type EventLogSpec, openEventLog } from "../store/open-log.js";
import type { EventLog, ExecRecord } from "../store/types.js";
import { ComputerError, hasCode } from "../wire/errors.js";
import { parseAfter, resolveAfter } from "../wire/position.js";
import type { Chunk, ExecEvent, ExitReason, LoggedEvent } from "../wire/types.js";
import { relativeToWorkspace, resolveInWorkspace } from "./paths.js";
import type {
  ComputerApi,
  EventsOptions,
  ExecHandle,
  ExecOptions,
  ExecResult,
  ExecSpec,
} from "./types.js";

/** Control of executions owned by another node (cluster); see INTEGRATION.md. */
export interface RemoteControl {
  kill(rec: ExecRecord, signal: string): Promise<void>;
  write(rec: ExecRecord, chunk: Uint8Array | string): Promise<void>;
  end(rec: ExecRecord): Promise<void>;
  dispose(rec: ExecRecord): Promise<void>;
}

/** Hooks for metrics and logging; exceptions thrown by them are ignored. */
export interface ComputerObserver {
  started?(rec: ExecRecord): void;
  finished?(rec: ExecRecord): void;
}

export interface ComputerOptions {
  /** Workspace root; commands run inside it. Created if missing. */
  workspace: string;
  /** Event log: "memory" (default), "sqlite:PATH", { sqlite: PATH }, or an EventLog. */
  log?: EventLogSpec;
  /** Id of this node, stored on each record (default "local"). */
  nodeId?: string;
  /** Running executions at once before exec fails with ELIMIT (default 256). */
  maxConcurrent?: number;
  /** Ring size per execution for logs this computer opens (default 16 MiB). */
  logMaxBytes?: number;
  /** How long finished executions are kept (default 5 min). */
  retentionMs?: number;
  /** SIGKILL this long after SIGTERM (default 5000). */
  killGraceMs?: number;
  /** Heartbeat interval for live subscribers; 0 disables (default 15000). */
  heartbeatMs?: number;
  /** Cut off a subscriber holding the child back without reading for this long (default 30000). */
  stallMs?: number;
  /** Per-stream bound of result() output, keeping the tail (default 16 MiB). */
  resultMaxBytes?: number;
  /** After the main process exits, wait this long for the pipes to close (default 250). */
  drainMs?: number;
  /**
   * Output read from the child but not yet accepted by the log, per execution,
   * above which the child's pipes pause until the log catches up (default 4 MiB).
   * This is what keeps a slow or unreachable log (Redis) from growing the node's memory.
   */
  maxUnflushedBytes?: number;
  /** Base environment (replaces the default base; exec's env overlays it). */
  env?: Record<string, string>;
  observer?: ComputerObserver;
  remote?: RemoteControl;
}

const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/** Variables carried from the server's own environment into the default base. */
const INHERITED_ENV = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LC_ALL",
  "TZ",
  "TMPDIR",
];

/** The documented default base environment (docs/runtime.md). */
export function defaultBaseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of INHERITED_ENV) {
    const v = process.env[k];
    if (v !== undefined) env[k] = v;
  }
  env.PATH ??= DEFAULT_PATH;
  env.LANG ??= "C.UTF-8";
  return env;
}

/** Signals after which the process is expected to end: they make the reason "killed". */
const TERMINATING = new Set(["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGKILL"]);
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const READ_BATCH = 64;
/** Bound on waiting for EOF after the group was SIGKILLed (writers outside the group). */
const POST_KILL_DRAIN_MS = 1000;

/** A subscriber parked waiting for output, as the heartbeat ticker sees it. */
interface IdleSub {
  since: number;
  info: ExecRecord | undefined;
  live: LocalExec | undefined;
  beat(): void;
}

interface Subscriber {
  /** Seq of the last event handed to the consumer. */
  pos: number;
  lastPull: number;
  cut(err: ComputerError): void;
}

/** A process this computer runs. Lives from spawn until its exit is logged. */
class LocalExec {
  readonly subs = new Set<Subscriber>();
  seq = 0;
  /** Sum of eventSize() of everything produced. */
  cum = 0;
  /** markCum[i] = cum after the event with seq markBase + i (a window of about one ring). */
  markCum: number[] = [];
  markBase = 1;
  markHead = 0;
  pending: LoggedEvent[] = [];
  flushing: Promise<void> | null = null;
  /** Pipes paused because a live subscriber lags (see updatePause). */
  paused = false;
  /** Bytes produced but not yet accepted by the log (pending + the batch in flight). */
  unflushed = 0;
  /** The part of `unflushed` that is still in `pending`. */
  pendingBytes = 0;
  /** Pipes paused because the log is behind by more than maxUnflushedBytes. */
  logBlocked = false;
  openPipes = 2;
  leaderExit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  reason: ExitReason | null = null;
  killTimer?: ReturnType<typeof setTimeout>;
  timeoutTimer?: ReturnType<typeof setTimeout>;
  drainTimer?: ReturnType<typeof setTimeout>;
  drainWhenResumed = false;
  stallTimer?: ReturnType<typeof setInterval>;
  lastOutputAt: number;
  finished = false;
  appendError: unknown = null;
  readonly done: Promise<void>;
  resolveDone!: () => void;
  decoders?: { stdout: StringDecoder; stderr: StringDecoder };

  constructor(
    readonly id: string,
    readonly rec: ExecRecord,
    readonly child: ChildProcess,
    readonly stdinMode: "pipe" | "closed",
  ) {
    this.lastOutputAt = rec.startedAt;
    this.done = new Promise((r) => {
      this.resolveDone = r;
    });
    if (rec.encoding === "utf8") {
      this.decoders = { stdout: new StringDecoder("utf8"), stderr: new StringDecoder("utf8") };
    }
  }

  /** cum after event `seq` (what a subscriber at pos `seq` has consumed). */
  cumAt(seq: number): number {
    if (seq >= this.seq) return this.cum;
    const i = this.markHead + (seq - this.markBase);
    if (i < this.markHead) return this.markCum[this.markHead]! - 1; // older than the window: far behind
    return this.markCum[i]!;
  }
}

export class Computer implements ComputerApi {
  readonly workspace: string;
  readonly nodeId: string;
  private readonly opts: Required<
    Pick<
      ComputerOptions,
      | "maxConcurrent"
      | "logMaxBytes"
      | "retentionMs"
      | "killGraceMs"
      | "heartbeatMs"
      | "stallMs"
      | "resultMaxBytes"
      | "drainMs"
    >
  >;
  private readonly baseEnv: Record<string, string>;
  private readonly observer: ComputerObserver | undefined;
  private readonly remote: RemoteControl | undefined;
  private readonly logP: Promise<EventLog>;
  private readonly local = new Map<string, LocalExec>();
  private readonly reserved = new Set<string>();
  private closing: Promise<void> | null = null;
  private realRoot: string | undefined;
  /** The log once open (the hot path skips awaiting logP). */
  private logObj: EventLog | undefined;
  /** Subscribers parked in waitFor that want heartbeats. */
  readonly idle = new Set<IdleSub>();
  private ticker: ReturnType<typeof setInterval> | undefined;
  /** Lag (bytes) above which the child's pipes pause, and below which they resume. */
  private readonly pauseAt: number;
  private readonly resumeAt: number;
  private readonly maxUnflushed: number;

  constructor(options: ComputerOptions) {
    if (!options || typeof options.workspace !== "string" || options.workspace === "") {
      throw new ComputerError("EINVAL", "Computer needs a workspace directory");
    }
    this.workspace = path.resolve(options.workspace);
    mkdirSync(this.workspace, { recursive: true });
    this.nodeId = options.nodeId ?? "local";
    this.opts = {
      maxConcurrent: options.maxConcurrent ?? 256,
      logMaxBytes: options.logMaxBytes ?? DEFAULT_LOG_MAX_BYTES,
      retentionMs: options.retentionMs ?? DEFAULT_RETENTION_MS,
      killGraceMs: options.killGraceMs ?? 5000,
      heartbeatMs: options.heartbeatMs ?? 15_000,
      stallMs: options.stallMs ?? 30_000,
      resultMaxBytes: options.resultMaxBytes ?? 16 * 1024 * 1024,
      drainMs: options.drainMs ?? 250,
    };
    // Half a ring: what a pipe delivers after pause() (a chunk or two) still
    // fits before the ring would have to evict unread events.
    this.pauseAt = Math.floor(this.opts.logMaxBytes / 2);
    this.resumeAt = Math.floor(this.pauseAt / 2);
    this.maxUnflushed = options.maxUnflushedBytes ?? 4 * 1024 * 1024;
    if (!(this.maxUnflushed > 0)) {
      throw new ComputerError("EINVAL", "maxUnflushedBytes must be a positive number");
    }
    this.baseEnv = options.env ? { ...options.env } : defaultBaseEnv();
    this.observer = options.observer;
    this.remote = options.remote;
    this.logP = openEventLog(options.log ?? "memory", {
      logMaxBytes: this.opts.logMaxBytes,
      retentionMs: this.opts.retentionMs,
    });
    // Unhandled until someone awaits it; keep a failed open from crashing the process.
    this.logP.then(
      (l) => {
        this.logObj = l;
      },
      () => {},
    );
  }

  /** The event log this computer writes to (for the server and tests). */
  log(): Promise<EventLog> {
    return this.logP;
  }

  /** Ids of executions running in this process. */
  running(): string[] {
    return [...this.local.keys()];
  }

  async exec(spec: ExecSpec, options: ExecOptions = {}): Promise<ExecHandle> {
    if (this.closing) throw new ComputerError("ECLOSED", "computer is closed");
    const { file, args, command } = parseSpec(spec);
    const encoding = options.encoding ?? "b64";
    if (encoding !== "b64" && encoding !== "utf8") {
      throw new ComputerError("EINVAL", `encoding must be "b64" or "utf8"`);
    }
    const timeoutMs = options.timeoutMs;
    if (timeoutMs !== undefined && !(typeof timeoutMs === "number" && timeoutMs > 0)) {
      throw new ComputerError("EINVAL", "timeoutMs must be a positive number");
    }
    const stdin = options.stdin;
    if (
      stdin !== undefined &&
      stdin !== "pipe" &&
      typeof stdin !== "string" &&
      !(stdin instanceof Uint8Array)
    ) {
      throw new ComputerError("EINVAL", 'stdin must be a string, bytes, or "pipe"');
    }
    const overlay = checkEnv(options.env);
    const id = options.id ?? randomUUID();
    if (typeof id !== "string" || !ID_RE.test(id)) {
      throw new ComputerError("EINVAL", "id must be 1-128 characters of [A-Za-z0-9._:-]");
    }
    if (this.local.has(id) || this.reserved.has(id)) {
      throw new ComputerError("EEXEC_BUSY", `execution ${id} is still running`);
    }
    if (this.local.size + this.reserved.size >= this.opts.maxConcurrent) {
      throw new ComputerError(
        "ELIMIT",
        `too many concurrent executions (maxConcurrent ${this.opts.maxConcurrent})`,
      );
    }
    this.reserved.add(id);
    try {
      const cwdAbs = await this.resolveCwd(options.cwd ?? "");
      // The root's real path, resolved once (it is not expected to move).
      this.realRoot ??= await resolveInWorkspace(this.workspace, "");
      const realRoot = this.realRoot;
      const log = await this.logP;
      const rec: ExecRecord = {
        id,
        command,
        cwd: relativeToWorkspace(realRoot, cwdAbs),
        encoding,
        node: this.nodeId,
        state: "running",
        startedAt: Date.now(),
        lastSeq: 0,
        earliestSeq: 1,
      };
      await log.create({
        id,
        command,
        cwd: rec.cwd,
        encoding,
        node: this.nodeId,
        startedAt: rec.startedAt,
      });
      const env = { ...this.baseEnv, PWD: cwdAbs, AGENT_COMPUTER_EXEC_ID: id, ...overlay };
      const child = spawn(file, args, {
        cwd: cwdAbs,
        env,
        detached: true,
        stdio: [stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
        windowsHide: true,
      });
      const exe = new LocalExec(id, rec, child, stdin === "pipe" ? "pipe" : "closed");
      this.local.set(id, exe);
      this.reserved.delete(id);
      if (child.pid === undefined) {
        // Spawn failed (argv[0] not found or not executable). Behave like a
        // shell: the message on stderr and exit 127 (126 when not executable).
        this.spawnFailed(exe, file);
      } else {
        // Listeners first: the child's exit or output must not slip past while
        // the log is busy with the update.
        rec.pid = child.pid;
        this.wire(exe, stdin, timeoutMs);
        await log.update(id, { pid: child.pid });
      }
      safe(() => this.observer?.started?.({ ...rec }));
      return new Handle(this, id);
    } finally {
      this.reserved.delete(id);
    }
  }

  async get(id: string): Promise<ExecHandle> {
    if (this.local.has(id)) return new Handle(this, id);
    const rec = await (await this.logP).get(id);
    if (!rec) throw notFound(id);
    return new Handle(this, id);
  }

  async list(): Promise<ExecRecord[]> {
    return (await this.logP).list();
  }

  async kill(id: string, signal = "SIGTERM"): Promise<void> {
    const sig = checkSignal(signal);
    const exe = this.local.get(id);
    if (exe) return this.signalLocal(exe, sig, "killed");
    const rec = await this.record(id);
    if (rec.state !== "running") return;
    if (!this.remote) throw notLocal(id);
    await this.remote.kill(rec, sig);
  }

  async write(id: string, chunk: Uint8Array | string): Promise<void> {
    if (typeof chunk !== "string" && !(chunk instanceof Uint8Array)) {
      throw new ComputerError("EINVAL", "stdin chunk must be a string or bytes");
    }
    const exe = this.local.get(id);
    if (!exe) {
      const rec = await this.record(id);
      if (rec.state !== "running") throw stdinClosed(id);
      if (!this.remote) throw notLocal(id);
      return this.remote.write(rec, chunk);
    }
    const stdin = this.stdinOf(exe);
    await new Promise<void>((resolve, reject) => {
      stdin.write(chunk, (err) =>
        err ? reject(new ComputerError("ECLOSED", `stdin of ${id}: ${err.message}`)) : resolve(),
      );
    });
  }

  async end(id: string): Promise<void> {
    const exe = this.local.get(id);
    if (!exe) {
      const rec = await this.record(id);
      if (rec.state !== "running") return;
      if (!this.remote) throw notLocal(id);
      return this.remote.end(rec);
    }
    if (exe.stdinMode !== "pipe") {
      throw new ComputerError("EINVAL", `execution ${id} was not started with stdin: "pipe"`);
    }
    const stdin = exe.child.stdin;
    if (!stdin || stdin.writableEnded || stdin.destroyed) return;
    await new Promise<void>((resolve) => stdin.end(() => resolve()));
  }

  async dispose(id: string): Promise<void> {
    const exe = this.local.get(id);
    if (exe) {
      await this.signalLocal(exe, "SIGKILL", "killed");
      await exe.done;
    } else {
      const rec = await this.record(id);
      if (rec.state === "running") {
        if (!this.remote) throw notLocal(id);
        return this.remote.dispose(rec);
      }
    }
    await (await this.logP).dispose(id);
  }

  /** Kill every running execution (SIGTERM, SIGKILL after the grace), then close the log. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const all = [...this.local.values()];
      await Promise.all(
        all.map(async (exe) => {
          await this.signalLocal(exe, "SIGTERM", "killed");
          await exe.done;
        }),
      );
      const log = await this.logP.catch(() => undefined);
      await log?.close();
    })();
    return this.closing;
  }

  // ---- events -------------------------------------------------------------

  events(id: string, options: EventsOptions = {}): ReadableStream<ExecEvent> {
    const computer = this;
    const after = options.after ?? 0;
    const wantHeartbeats = options.heartbeats !== false && this.opts.heartbeatMs > 0;
    const userSignal = options.signal;
    const inner = new AbortController();
    let sub: Subscriber | null = null;
    let exe: LocalExec | undefined;
    let log: EventLog;
    let buf: LoggedEvent[] = [];
    let bi = 0;
    let done = false;
    const hb: IdleSub | null = wantHeartbeats
      ? {
          since: 0,
          info: undefined,
          live: undefined,
          beat: () => {
            if (done || !hb!.info) return;
            const t = Date.now();
            lastSeenAt = hb!.since = t;
            const info = hb!.info;
            ctl.enqueue({
              id,
              seq: cursor.pos,
              name: "heartbeat",
              value: {
                pid: info.pid ?? 0,
                elapsedMs: t - info.startedAt,
                lastOutputMs: t - (hb!.live ? hb!.live.lastOutputAt : lastEventAt),
              },
            });
          },
        }
      : null;
    /** Last time anything (event or heartbeat) was handed out, and the last logged event. */
    let lastSeenAt = Date.now();
    let lastEventAt = lastSeenAt;
    let ctl!: ReadableStreamDefaultController<ExecEvent>;
    /** Seq of the last event handed out (mirrored in `sub.pos` for backpressure). */
    const cursor = { pos: 0 };

    const finish = () => {
      done = true;
      if (sub && exe) {
        exe.subs.delete(sub);
        computer.updatePause(exe);
      }
      inner.abort();
      userSignal?.removeEventListener("abort", onAbort);
    };
    const fail = (err: unknown) => {
      if (done) return;
      finish();
      ctl.error(err);
    };
    const onAbort = () => fail(new ComputerError("EABORTED", "event stream aborted"));

    return new ReadableStream<ExecEvent>(
      {
        async start(controller) {
          ctl = controller;
          if (userSignal?.aborted) throw new ComputerError("EABORTED", "event stream aborted");
          userSignal?.addEventListener("abort", onAbort, { once: true });
          const from = parseAfter(after);
          log = await computer.logP;
          exe = computer.local.get(id);
          const rec = await log.get(id);
          if (!rec) throw notFound(id);
          const lastSeq = exe && !exe.finished ? Math.max(exe.seq, rec.lastSeq) : rec.lastSeq;
          const pos = resolveAfter(id, from, { lastSeq, earliestSeq: rec.earliestSeq });
          if (exe && !exe.finished) {
            sub = {
              pos,
              lastPull: Date.now(),
              cut: (err) => fail(err),
            };
            exe.subs.add(sub);
            computer.updatePause(exe);
          } else {
            exe = undefined;
          }
          cursor.pos = pos;
        },
        async pull(controller) {
          if (done) return;
          const now = Date.now();
          if (sub) sub.lastPull = now;
          try {
            for (;;) {
              if (done) return;
              if (bi < buf.length) {
                const ev = buf[bi++]!;
                cursor.pos = ev.seq;
                if (sub) {
                  sub.pos = ev.seq;
                  if (exe!.paused) computer.updatePause(exe!);
                }
                lastSeenAt = lastEventAt = Date.now();
                controller.enqueue(ev as ExecEvent);
                if (ev.name === "exit") {
                  finish();
                  controller.close();
                }
                return;
              }
              buf = await log.read(id, cursor.pos, { limit: READ_BATCH });
              bi = 0;
              if (buf.length > 0) continue;
              // A process running here is known to be running: skip the record
              // lookup on the hot path. Otherwise ask the log (another node may own it).
              const live = computer.local.get(id);
              let rec: ExecRecord | undefined;
              if (!live || live.finished) {
                rec = await log.get(id);
                if (!rec) throw notFound(id);
                if (rec.lastSeq > cursor.pos) continue;
                if (rec.state !== "running") {
                  finish();
                  controller.close();
                  return;
                }
              }
              // No abort signal for a local execution: its waiter is woken by its
              // next output or exit anyway, and signal listeners cost per wait.
              // While parked, the computer's shared ticker may hand out
              // heartbeats on this stream (they answer the pending read).
              if (hb) {
                hb.since = lastSeenAt;
                hb.info = live?.rec ?? rec!;
                hb.live = live;
                computer.parkIdle(hb);
              }
              try {
                await log.waitFor(id, cursor.pos, live ? undefined : inner.signal);
              } finally {
                if (hb) computer.idle.delete(hb);
              }
            }
          } catch (err) {
            if (done) return; // aborted or cut while waiting: already reported
            fail(err);
          }
        },
        cancel() {
          finish();
        },
      },
      { highWaterMark: 0 },
    );
  }

  async result(id: string, options: { signal?: AbortSignal } = {}): Promise<ExecResult> {
    const rec0 = await this.record(id);
    const keep = this.opts.resultMaxBytes;
    const text = rec0.encoding === "utf8";
    const out = { stdout: new TailBuffer(keep, text), stderr: new TailBuffer(keep, text) };
    let truncated = false;
    let after = 0;
    let exit: LoggedEvent | undefined;
    for (;;) {
      const stream = this.events(id, { after, heartbeats: false, signal: options.signal });
      const reader = stream.getReader();
      try {
        for (;;) {
          const { value: ev, done } = await reader.read();
          if (done) break;
          after = ev.seq;
          if (ev.name === "exit") exit = ev;
          else if (ev.name === "stdout" || ev.name === "stderr") out[ev.name].push(ev.value);
        }
        break;
      } catch (err) {
        // Part of the log was dropped before we read it: keep what is left and say so.
        if (hasCode(err, "ELOG_TRUNCATED")) {
          truncated = true;
          after = (err as ComputerError).earliestSeq! - 1;
          continue;
        }
        throw err;
      }
    }
    const rec = await this.record(id);
    const res: ExecResult = {
      id,
      status: rec.state,
      exitCode: exit && exit.name === "exit" && exit.reason !== "lost" ? exit.value : null,
      stdout: out.stdout.value(),
      stderr: out.stderr.value(),
      truncated: truncated || out.stdout.truncated || out.stderr.truncated,
    };
    const signal = exit?.name === "exit" ? exit.signal : rec.signal;
    if (signal) res.signal = signal;
    return res;
  }

  async info(id: string): Promise<ExecRecord> {
    return this.record(id);
  }

  /** Register a parked subscriber with the shared heartbeat ticker (one timer for all). */
  parkIdle(sub: IdleSub): void {
    this.idle.add(sub);
    if (this.ticker) return;
    const every = Math.max(10, Math.floor(this.opts.heartbeatMs / 4));
    this.ticker = setInterval(() => {
      const now = Date.now();
      for (const x of this.idle) if (now - x.since >= this.opts.heartbeatMs) x.beat();
      if (this.idle.size === 0 && this.ticker) {
        clearInterval(this.ticker);
        this.ticker = undefined;
      }
    }, every);
    this.ticker.unref?.();
  }

  // ---- internals ----------------------------------------------------------

  private async record(id: string): Promise<ExecRecord> {
    const rec = await (await this.logP).get(id);
    if (!rec) throw notFound(id);
    return rec;
  }

  private async resolveCwd(cwd: string): Promise<string> {
    if (typeof cwd !== "string") throw new ComputerError("EINVAL", "cwd must be a string");
    let abs: string;
    try {
      abs = await resolveInWorkspace(this.workspace, cwd);
    } catch (err) {
      if (hasCode(err, "EFORBIDDEN") || hasCode(err, "EINVAL")) {
        throw new ComputerError("EINVAL", `cwd ${JSON.stringify(cwd)} is outside the workspace`, {
          cause: err,
        });
      }
      throw err;
    }
    const st = await stat(abs).catch(() => null);
    if (!st?.isDirectory()) {
      throw new ComputerError("EINVAL", `cwd ${JSON.stringify(cwd)} is not a directory`);
    }
    return abs;
  }

  private stdinOf(exe: LocalExec) {
    if (exe.stdinMode !== "pipe") {
      throw new ComputerError("EINVAL", `execution ${exe.id} was not started with stdin: "pipe"`);
    }
    const stdin = exe.child.stdin;
    if (!stdin || stdin.writableEnded || stdin.destroyed || exe.finished) throw stdinClosed(exe.id);
    return stdin;
  }

  private wire(exe: LocalExec, stdin: ExecOptions["stdin"], timeoutMs: number | undefined): void {
    const child = exe.child;
    if (child.stdin) {
      // EPIPE when the child exits without reading all of its input is normal.
      child.stdin.on("error", () => {});
      if (stdin !== "pipe" && stdin !== undefined) child.stdin.end(stdin);
    }
    const onPipeDone = () => {
      if (--exe.openPipes === 0) this.maybeFinish(exe);
    };
    for (const name of ["stdout", "stderr"] as const) {
      const pipe = child[name]!;
      pipe.on("data", (chunk: Buffer) => this.onOutput(exe, name, chunk));
      pipe.on("error", () => {});
      pipe.once("close", onPipeDone);
    }
    child.on("error", () => {}); // reported through exit; never crash the host
    child.once("exit", (code, signal) => {
      exe.leaderExit = { code, signal };
      if (exe.timeoutTimer) clearTimeout(exe.timeoutTimer);
      if (exe.openPipes === 0) this.maybeFinish(exe);
      else this.armDrain(exe);
    });
    if (timeoutMs !== undefined) {
      exe.timeoutTimer = setTimeout(() => {
        void this.signalLocal(exe, "SIGTERM", "timeout");
      }, timeoutMs);
    }
  }

  private onOutput(exe: LocalExec, name: "stdout" | "stderr", chunk: Buffer): void {
    exe.lastOutputAt = Date.now();
    let value: Chunk;
    if (exe.decoders) {
      value = exe.decoders[name].write(chunk);
      if (value === "") return; // only part of a character so far
    } else {
      value = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    }
    this.produce(exe, { id: exe.id, seq: exe.seq + 1, name, value });
  }

  private produce(exe: LocalExec, ev: LoggedEvent): void {
    exe.seq = ev.seq;
    const size = eventSize(ev);
    exe.cum += size;
    exe.markCum.push(exe.cum);
    // Keep the mark window to about one ring of bytes (older events are gone from the ring too).
    const floor = exe.cum - this.opts.logMaxBytes - EVENT_OVERHEAD_BYTES;
    while (exe.markCum.length - exe.markHead > 1 && exe.markCum[exe.markHead]! < floor) {
      exe.markHead++;
      exe.markBase++;
    }
    if (exe.markHead > 4096 && exe.markHead * 2 > exe.markCum.length) {
      exe.markCum = exe.markCum.slice(exe.markHead);
      exe.markHead = 0;
    }
    exe.pending.push(ev);
    exe.pendingBytes += size;
    exe.unflushed += size;
    if (!exe.logBlocked && exe.unflushed > this.maxUnflushed) {
      exe.logBlocked = true;
      this.applyPipes(exe);
    }
    if (!exe.paused && exe.subs.size > 0) this.updatePause(exe);
    exe.flushing ??= this.flush(exe);
  }

  private async flush(exe: LocalExec): Promise<void> {
    try {
      const log = this.logObj ?? (await this.logP);
      while (exe.pending.length > 0) {
        const batch = exe.pending;
        const batchBytes = exe.pendingBytes;
        exe.pending = [];
        exe.pendingBytes = 0;
        await log.append(exe.id, batch);
        exe.unflushed -= batchBytes;
        if (exe.logBlocked && exe.unflushed <= this.maxUnflushed / 2) {
          exe.logBlocked = false;
          this.applyPipes(exe);
        }
      }
    } catch (err) {
      // The log refused (closed, unreachable): the output can no longer be
      // recorded, so the process must not keep running unobserved.
      exe.appendError ??= err;
      exe.pending = [];
      exe.pendingBytes = 0;
      exe.unflushed = 0;
      killGroup(exe.child.pid, "SIGKILL");
      // Let the pipes run to EOF so the exit is noticed; nothing more is kept.
      if (exe.logBlocked) {
        exe.logBlocked = false;
        this.applyPipes(exe);
      }
    } finally {
      exe.flushing = null;
    }
  }

  /** Pause the pipes while a live subscriber lags by more than half a ring; resume below a quarter. */
  updatePause(exe: LocalExec): void {
    let maxLag = 0;
    for (const s of exe.subs) {
      const lag = exe.cum - exe.cumAt(s.pos);
      if (lag > maxLag) maxLag = lag;
    }
    if (!exe.paused && maxLag > this.pauseAt) {
      exe.paused = true;
      this.applyPipes(exe);
      const every = Math.max(10, Math.min(1000, Math.floor(this.opts.stallMs / 4)));
      exe.stallTimer = setInterval(() => this.checkStalls(exe), every);
      exe.stallTimer.unref?.();
    } else if (exe.paused && maxLag <= this.resumeAt) {
      exe.paused = false;
      if (exe.stallTimer) clearInterval(exe.stallTimer);
      exe.stallTimer = undefined;
      this.applyPipes(exe);
    }
  }

  /**
   * The pipes flow only when neither a lagging subscriber nor a lagging log
   * holds them; the two reasons pause and resume independently.
   */
  private applyPipes(exe: LocalExec): void {
    if (exe.paused || exe.logBlocked) {
      exe.child.stdout?.pause();
      exe.child.stderr?.pause();
      return;
    }
    exe.child.stdout?.resume();
    exe.child.stderr?.resume();
    if (exe.drainWhenResumed) {
      exe.drainWhenResumed = false;
      this.armDrain(exe);
    }
  }

  private checkStalls(exe: LocalExec): void {
    const now = Date.now();
    for (const s of [...exe.subs]) {
      const lag = exe.cum - exe.cumAt(s.pos);
      if (lag > this.resumeAt && now - s.lastPull >= this.opts.stallMs) {
        exe.subs.delete(s);
        s.cut(
          new ComputerError(
            "ELAGGING",
            `subscriber to ${exe.id} read nothing for ${this.opts.stallMs} ms while holding the process back`,
          ),
        );
      }
    }
    this.updatePause(exe);
  }

  private armDrain(exe: LocalExec): void {
    if (exe.drainTimer || exe.finished) return;
    exe.drainTimer = setTimeout(() => {
      exe.drainTimer = undefined;
      if (exe.openPipes === 0) return;
      if (exe.paused || exe.logBlocked) {
        // Output is waiting for a reader or for the log, not held by a stray grandchild.
        exe.drainWhenResumed = true;
        return;
      }
      // Grandchildren still hold the pipes: end the group, then give the
      // pipes a bounded time to deliver what was written before the kill.
      killGroup(exe.child.pid, "SIGKILL");
      setTimeout(() => {
        if (exe.openPipes > 0 && !exe.paused && !exe.logBlocked) {
          exe.child.stdout?.destroy();
          exe.child.stderr?.destroy();
        } else if (exe.openPipes > 0) {
          exe.drainWhenResumed = true;
        }
      }, POST_KILL_DRAIN_MS).unref?.();
    }, this.opts.drainMs);
    exe.drainTimer.unref?.();
  }

  private maybeFinish(exe: LocalExec): void {
    if (exe.finished || !exe.leaderExit || exe.openPipes > 0) return;
    exe.finished = true;
    void this.finish(exe);
  }

  private async finish(exe: LocalExec): Promise<void> {
    const { code, signal } = exe.leaderExit!;
    // Nothing of the group outlives its exit event (docs/runtime.md).
    killGroup(exe.child.pid, "SIGKILL");
    for (const t of [exe.killTimer, exe.timeoutTimer, exe.drainTimer]) if (t) clearTimeout(t);
    if (exe.stallTimer) clearInterval(exe.stallTimer);
    if (exe.decoders) {
      for (const name of ["stdout", "stderr"] as const) {
        const rest = exe.decoders[name].end();
        if (rest) this.produce(exe, { id: exe.id, seq: exe.seq + 1, name, value: rest });
      }
    }
    const exitEv: LoggedEvent = {
      id: exe.id,
      seq: exe.seq + 1,
      name: "exit",
      value: code ?? 128 + (signal ? (osConstants.signals[signal] ?? 0) : 0),
      reason: exe.reason ?? "exited",
    };
    if (signal) exitEv.signal = signal;
    this.produce(exe, exitEv);
    while (exe.flushing) await exe.flushing;
    this.local.delete(exe.id);
    // Subscribers that are behind keep reading from the log; they just no longer hold a process.
    exe.subs.clear();
    const rec = await (await this.logP).get(exe.id).catch(() => undefined);
    safe(() => this.observer?.finished?.(rec ?? { ...exe.rec, state: "exited" }));
    exe.resolveDone();
  }

  private spawnFailed(exe: LocalExec, file: string): void {
    exe.child.on("error", () => {});
    exe.openPipes = 0;
    exe.child.stdout?.destroy();
    exe.child.stderr?.destroy();
    const msg = `agent-computer: cannot run ${file}: not found or not executable\n`;
    this.produce(exe, {
      id: exe.id,
      seq: 1,
      name: "stderr",
      value: exe.decoders ? msg : new TextEncoder().encode(msg),
    });
    exe.leaderExit = { code: 127, signal: null };
    this.maybeFinish(exe);
  }

  private async signalLocal(exe: LocalExec, signal: string, reason: ExitReason): Promise<void> {
    if (exe.finished || exe.leaderExit) {
      // The leader is gone; only stragglers may be left, and the drain handles them.
      return;
    }
    if (TERMINATING.has(signal)) exe.reason ??= reason;
    killGroup(exe.child.pid, signal);
    if (TERMINATING.has(signal) && signal !== "SIGKILL" && !exe.killTimer) {
      exe.killTimer = setTimeout(() => killGroup(exe.child.pid, "SIGKILL"), this.opts.killGraceMs);
      exe.killTimer.unref?.();
    }
  }
}

class Handle implements ExecHandle {
  constructor(
    private readonly computer: Computer,
    readonly id: string,
  ) {}
  events(options?: EventsOptions): ReadableStream<ExecEvent> {
    return this.computer.events(this.id, options);
  }
  async subscribe(options: EventsOptions = {}): Promise<ReadableStream<ExecEvent>> {
    const from = parseAfter(options.after);
    const rec = await this.computer.info(this.id);
    resolveAfter(this.id, from, rec);
    return this.computer.events(this.id, options);
  }
  result(options?: { signal?: AbortSignal }): Promise<ExecResult> {
    return this.computer.result(this.id, options);
  }
  info(): Promise<ExecRecord> {
    return this.computer.info(this.id);
  }
  kill(signal?: string): Promise<void> {
    return this.computer.kill(this.id, signal);
  }
  write(chunk: Uint8Array | string): Promise<void> {
    return this.computer.write(this.id, chunk);
  }
  end(): Promise<void> {
    return this.computer.end(this.id);
  }
}

/** Keeps the last `max` bytes of a stream of chunks (bytes or text). */
class TailBuffer {
  private chunks: Chunk[] = [];
  private sizes: number[] = [];
  private bytes = 0;
  truncated = false;
  constructor(
    private readonly max: number,
    private readonly text: boolean,
  ) {}
  push(v: Chunk): void {
    const size = typeof v === "string" ? Buffer.byteLength(v) : v.byteLength;
    this.chunks.push(v);
    this.sizes.push(size);
    this.bytes += size;
    while (this.bytes - this.sizes[0]! >= this.max && this.chunks.length > 1) {
      this.bytes -= this.sizes.shift()!;
      this.chunks.shift();
      this.truncated = true;
    }
  }
  value(): Chunk {
    let buf = Buffer.concat(
      this.chunks.map((c) =>
        typeof c === "string" ? Buffer.from(c) : Buffer.from(c.buffer, c.byteOffset, c.byteLength),
      ),
    );
    if (buf.length > this.max) {
      buf = buf.subarray(buf.length - this.max);
      this.truncated = true;
      if (this.text) {
        // Do not start in the middle of a character.
        let i = 0;
        while (i < buf.length && (buf[i]! & 0xc0) === 0x80) i++;
        buf = buf.subarray(i);
      }
    }
    if (this.text) return buf.toString("utf8");
    return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  }
}

function parseSpec(spec: ExecSpec): { file: string; args: string[]; command: string | string[] } {
  if (typeof spec === "string") {
    if (spec === "") throw new ComputerError("EINVAL", "empty command");
    return { file: "/bin/sh", args: ["-c", spec], command: spec };
  }
  if (spec && typeof spec === "object") {
    if ("argv" in spec) {
      const argv = spec.argv;
      if (
        !Array.isArray(argv) ||
        argv.length === 0 ||
        argv.some((a) => typeof a !== "string" || a.includes("\0")) ||
        argv[0] === ""
      ) {
        throw new ComputerError("EINVAL", "argv must be a non-empty array of strings");
      }
      return { file: argv[0]!, args: argv.slice(1), command: [...argv] };
    }
    if ("command" in spec && typeof spec.command === "string") return parseSpec(spec.command);
  }
  throw new ComputerError("EINVAL", "exec needs a command string, { command } or { argv }");
}

function checkEnv(env: Record<string, string> | undefined): Record<string, string> {
  if (env === undefined) return {};
  if (typeof env !== "object" || env === null) {
    throw new ComputerError("EINVAL", "env must be an object of strings");
  }
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    if (
      k === "" ||
      k.includes("=") ||
      k.includes("\0") ||
      typeof v !== "string" ||
      v.includes("\0")
    ) {
      throw new ComputerError("EINVAL", `bad environment variable ${JSON.stringify(k)}`);
    }
    out[k] = v;
  }
  return out;
}

function checkSignal(signal: string): string {
  if (typeof signal !== "string" || !(signal in osConstants.signals)) {
    throw new ComputerError("EINVAL", `unknown signal ${String(signal)}`);
  }
  return signal;
}

/** Signal a whole process group; a group that is already gone is fine. */
function killGroup(pid: number | undefined, signal: string): void {
  if (!pid) return;
  try {
    process.kill(-pid, signal as NodeJS.Signals);
  } catch {
    // ESRCH: nothing left in the group.
  }
}

function notFound(id: string): ComputerError {
  return new ComputerError("ENOENT", `no such execution: ${id}`);
}

function notLocal(id: string): ComputerError {
  return new ComputerError(
    "ENOENT",
    `execution ${id} runs on another node and no remote control is configured`,
  );
}

function stdinClosed(id: string): ComputerError {
  return new ComputerError("ECLOSED", `stdin of ${id} is closed`);
}

function safe(f: () => void): void {
  try {
    f();
  } catch {
    // observers must not break the runtime
  }
}
