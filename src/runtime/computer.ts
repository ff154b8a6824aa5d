// The in-process computer: spawns commands in the workspace, numbers their
// output into one gap-free seq per execution, writes it to the event log, and
// serves every subscriber (live or resuming) by reading that log. One code
// path for live and resumed streams means they cannot disagree.
//
// This file is the facade (options, exec/get/list/kill/dispose/close and the
// routing of a call to the process running here or to RemoteControl); the
// parts live beside it: process.ts (one child process and its group),
// sequencer.ts (seq numbering and batched appends), backpressure.ts,
// subscription.ts (events()/subscribe()), heartbeat.ts, result.ts,
// exec-spec.ts (what exec accepts). docs/runtime.md is the user-facing version.

import { randomUUID } from "node:crypto";
import { mkdirSync, statSync } from "node:fs";
import path from "node:path";
import { DEFAULT_LOG_MAX_BYTES, DEFAULT_RETENTION_MS, isExecutionId } from "../store/common.js";
import { type EventLogSpec, openEventLog } from "../store/open-log.js";
import type { SpillOptions } from "../store/spill.js";
import type { EventLog, ExecRecord } from "../store/types.js";
import { ComputerError, hasCode } from "../wire/errors.js";
import type { ExecEvent } from "../wire/types.js";
import { prepareExec, type Sandbox } from "./confine.js";
import { checkEnv, checkId, checkSignal, defaultBaseEnv, parseSpec } from "./exec-spec.js";
import { HeartbeatTicker } from "./heartbeat.js";
import { relativeToWorkspace, resolveInWorkspace } from "./paths.js";
import { LocalExec, stdinClosed } from "./process.js";
import { checkPtySize, initialPtyState, type PtySize } from "./pty.js";
import { EXEC_KEY_ENV, execKey, killExecution, killGroup, reapLost } from "./reaper.js";
import { collectResult } from "./result.js";
import { ScreenSnapshots } from "./screen.js";
import { checkSpawnSize, MAX_TIMEOUT_MS, spawnError } from "./spawn-limits.js";
import { SpawnQueue } from "./spawn-queue.js";
import { Spawner } from "./spawner.js";
import { eventStream, type SubscriptionSource, subscribeStream } from "./subscription.js";
import type {
  ComputerApi,
  EventsOptions,
  ExecHandle,
  ExecOptions,
  ExecResult,
  ExecSpec,
  ScreenSnapshot,
} from "./types.js";

/**
 * Control of executions owned by another node (cluster mode, see
 * docs/operations.md): the computer routes kill/write/end/dispose of an
 * execution that does not run in this process through it.
 */
export interface RemoteControl {
  kill(rec: ExecRecord, signal: string): Promise<void>;
  write(rec: ExecRecord, chunk: Uint8Array | string): Promise<void>;
  end(rec: ExecRecord): Promise<void>;
  dispose(rec: ExecRecord): Promise<void>;
  resize?(rec: ExecRecord, size: PtySize): Promise<void>;
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
  eventLog?: EventLogSpec;
  /** Id of this node, stored on each record (default "local"). */
  nodeId?: string;
  /** Running executions at once before exec fails with ELIMIT (default 256). */
  maxConcurrent?: number;
  /** Executions accepted but not yet spawned before exec fails with ELIMIT (default 256; spawn-queue.ts). */
  maxStarting?: number;
  /** Time spent spawning per turn of the event loop, at least one spawn (default 5 ms; spawn-queue.ts). */
  spawnSliceMs?: number;
  /**
   * Where commands are forked: "helper" (default: a small helper process
   * forks them, off this process's event loop; spawner.ts) or "inline"
   * (spawn() in this process). Terminals (pty) and confined executions
   * (whose sandbox wrapper must be this process's child) always start here.
   */
  spawner?: "helper" | "inline";
  /**
   * How many helper processes fork commands with spawner "helper" (default
   * 2, from 1 to 16): each starts one command at a time (spawner.ts).
   */
  spawnHelpers?: number;
  /**
   * Ring size per execution for logs this computer opens (default 16 MiB).
   * A ready EventLog brings its own (its `capacityBytes`).
   */
  logMaxBytes?: number;
  /** How long finished executions are kept (default 5 min). */
  retentionMs?: number;
  /** Disk retention of the memory log beyond its ring (docs/operations.md); ignored by other logs. */
  spill?: SpillOptions;
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
  /**
   * The sandbox every execution is spawned through (src/sandbox; startNode
   * creates one from its confine/network/limits options). Without one the
   * argv is spawned as given and only `network: "host"` is accepted.
   */
  sandbox?: Sandbox;
}

export class Computer implements ComputerApi {
  readonly workspace: string;
  readonly nodeId: string;
  private readonly maxConcurrent: number;
  private readonly killGraceMs: number;
  private readonly stallMs: number;
  private readonly resultMaxBytes: number;
  private readonly drainMs: number;
  private readonly maxUnflushedBytes: number;
  private readonly baseEnv: Record<string, string>;
  private readonly observer: ComputerObserver | undefined;
  private readonly remote: RemoteControl | undefined;
  private readonly sandbox: Sandbox | undefined;
  private readonly eventLogP: Promise<EventLog>;
  /** Executions whose process runs here, until their exit is logged. */
  private readonly local = new Map<string, LocalExec>();
  /** Ids being started (between the checks and the spawn). */
  private readonly reserved = new Set<string>();
  /** Spawns a few per turn of the event loop, so a burst never blocks it for long. */
  private readonly spawnQueue: SpawnQueue;
  /** Forks commands off this process (undefined: spawn() here). */
  private readonly spawner: Spawner | undefined;
  private readonly source: SubscriptionSource;
  private readonly screens = new ScreenSnapshots(() => this.eventLogP);
  private closing: Promise<void> | null = null;
  private realRoot: string | undefined;
  /** Resolves once the processes of executions found `lost` at start were dealt with. */
  readonly reaped: Promise<unknown>;

  constructor(options: ComputerOptions) {
    if (!options || typeof options.workspace !== "string" || options.workspace === "") {
      throw new ComputerError("EINVAL", "Computer needs a workspace directory");
    }
    this.workspace = path.resolve(options.workspace);
    mkdirSync(this.workspace, { recursive: true });
    this.nodeId = options.nodeId ?? "local";
    this.maxConcurrent = options.maxConcurrent ?? 256;
    this.spawnQueue = new SpawnQueue({
      ...(options.maxStarting !== undefined ? { maxStarting: options.maxStarting } : {}),
      ...(options.spawnSliceMs !== undefined ? { sliceMs: options.spawnSliceMs } : {}),
    });
    const spawnerMode = options.spawner ?? "helper";
    if (spawnerMode !== "helper" && spawnerMode !== "inline") {
      throw new ComputerError("EINVAL", 'spawner must be "helper" or "inline"');
    }
    this.spawner =
      spawnerMode === "helper"
        ? new Spawner(options.spawnHelpers !== undefined ? { helpers: options.spawnHelpers } : {})
        : undefined;
    this.killGraceMs = options.killGraceMs ?? 5000;
    this.stallMs = options.stallMs ?? 30_000;
    this.resultMaxBytes = options.resultMaxBytes ?? 16 * 1024 * 1024;
    this.drainMs = options.drainMs ?? 250;
    this.maxUnflushedBytes = options.maxUnflushedBytes ?? 4 * 1024 * 1024;
    if (!(this.maxUnflushedBytes > 0)) {
      throw new ComputerError("EINVAL", "maxUnflushedBytes must be a positive number");
    }
    const heartbeatMs = options.heartbeatMs ?? 15_000;
    this.baseEnv = options.env ? { ...options.env } : defaultBaseEnv();
    this.observer = options.observer;
    this.remote = options.remote;
    this.sandbox = options.sandbox;
    this.eventLogP = openEventLog(options.eventLog ?? "memory", {
      logMaxBytes: options.logMaxBytes ?? DEFAULT_LOG_MAX_BYTES,
      retentionMs: options.retentionMs ?? DEFAULT_RETENTION_MS,
      ...options.spill,
    }).then(checkCapacity);
    // Unhandled until someone awaits it; keep a failed open from crashing the process.
    this.eventLogP.catch(() => {});
    // Executions a previous server of this node left running were closed as
    // lost when the log opened: kill whatever is left of their processes.
    this.reaped = this.eventLogP.then((log) => reapLost(log, this.nodeId)).catch(() => undefined);
    this.source = {
      eventLog: this.eventLogP,
      local: (id) => this.local.get(id),
      heartbeats: heartbeatMs > 0 ? new HeartbeatTicker(heartbeatMs) : undefined,
    };
  }

  /** Whether the event log can be used now (see ComputerApi.health). */
  async health(waitMs = 0): Promise<{ ok: boolean; reason?: string }> {
    if (this.closing) return { ok: false, reason: "the computer is closed" };
    let eventLog: EventLog;
    try {
      eventLog = await this.eventLogP;
    } catch (err) {
      return { ok: false, reason: `the event log could not be opened: ${(err as Error).message}` };
    }
    const reason = await eventLog.unavailable?.(waitMs);
    return reason === undefined ? { ok: true } : { ok: false, reason };
  }

  /** The event log this computer writes to. */
  eventLog(): Promise<EventLog> {
    return this.eventLogP;
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
    if (
      timeoutMs !== undefined &&
      !(typeof timeoutMs === "number" && timeoutMs > 0 && timeoutMs <= MAX_TIMEOUT_MS)
    ) {
      throw new ComputerError(
        "EINVAL",
        `timeoutMs must be a positive number of at most ${MAX_TIMEOUT_MS} (about 24.8 days)`,
      );
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
    const pty = options.pty === undefined ? undefined : checkPtySize(options.pty);
    if (pty && stdin !== undefined && stdin !== "pipe") {
      throw new ComputerError(
        "EINVAL",
        'a pty takes its input through write(): stdin must be "pipe"',
      );
    }
    const overlay = checkEnv(options.env);
    const id = checkId(options.id ?? randomUUID());
    if (this.local.has(id) || this.reserved.has(id)) {
      throw new ComputerError("EEXEC_BUSY", `execution ${id} is still running`);
    }
    if (this.local.size + this.reserved.size >= this.maxConcurrent) {
      throw new ComputerError(
        "ELIMIT",
        `too many concurrent executions (maxConcurrent ${this.maxConcurrent})`,
      );
    }
    const ticket = this.spawnQueue.admit();
    this.reserved.add(id);
    try {
      const cwdAbs = await this.resolveCwd(options.cwd ?? "");
      // The root's real path, resolved once (it is not expected to move).
      this.realRoot ??= await resolveInWorkspace(this.workspace, "");
      const eventLog = await this.eventLogP;
      const startedAt = Date.now();
      const key = execKey(id, startedAt);
      const env = {
        ...this.baseEnv,
        PWD: cwdAbs,
        AGENT_COMPUTER_EXEC_ID: id,
        ...overlay,
        [EXEC_KEY_ENV]: key,
      };
      // What the kernel would refuse (E2BIG) is refused before the record exists.
      checkSpawnSize(file, args, env);
      const prepared = await prepareExec(this.sandbox, {
        argv: [file, ...args],
        cwd: cwdAbs,
        env,
        ...(options.limits !== undefined ? { limits: options.limits } : {}),
        ...(options.network !== undefined ? { network: options.network } : {}),
        warm: pty === undefined,
      });
      const rec: ExecRecord = {
        id,
        command,
        cwd: relativeToWorkspace(this.realRoot, cwdAbs),
        encoding,
        node: this.nodeId,
        state: "running",
        startedAt,
        lastSeq: 0,
        earliestSeq: 1,
      };
      if (pty) rec.pty = initialPtyState(pty);
      await eventLog
        .create({
          id,
          command,
          cwd: rec.cwd,
          encoding,
          node: this.nodeId,
          startedAt: rec.startedAt,
          ...(rec.pty ? { pty: structuredClone(rec.pty) } : {}),
        })
        .catch(async (err: unknown) => {
          await prepared.dispose();
          throw err;
        });
      let exe: LocalExec;
      try {
        // A confined recipe must be spawned by this process (its wrapper
        // checks its parent: the parent-death signal is tied to it).
        const spawned =
          this.spawner && !pty && !prepared.adopt && !prepared.confined
            ? await this.spawner.spawn({
                file: prepared.file,
                args: prepared.args,
                cwd: prepared.cwd,
                env: prepared.env,
                stdin: stdin === undefined ? "ignore" : "pipe",
                marker: `${EXEC_KEY_ENV}=${key}`,
              })
            : undefined;
        exe = await ticket.spawn(() => {
          if (this.closing) {
            killGroup(spawned?.pid, "SIGKILL");
            throw new ComputerError("ECLOSED", "computer is closed");
          }
          return new LocalExec({
            spawned,
            id,
            record: rec,
            file,
            prepared,
            execKey: key,
            stdin: pty ? "pipe" : stdin,
            pty,
            awaitReader: options.awaitReader === true,
            timeoutMs,
            eventLog,
            killGraceMs: this.killGraceMs,
            drainMs: this.drainMs,
            stallMs: this.stallMs,
            maxUnflushedBytes: this.maxUnflushedBytes,
            onFinished: (e) => this.finished(e, eventLog),
          });
        });
      } catch (err) {
        // spawn() itself threw: nothing runs, so nothing of it is left behind.
        // The spawn helper died before handing the command over: it may have
        // started it, so whatever carries its marker is killed.
        if (hasCode(err, "EUNAVAILABLE")) await killExecution(undefined, key);
        await eventLog.dispose(id).catch(() => {});
        await prepared.dispose().catch(() => {});
        throw spawnError(err);
      }
      this.local.set(id, exe);
      this.reserved.delete(id);
      try {
        // Listeners first: the child's exit or output must not slip past while
        // the log is busy with the update.
        exe.start();
        if (exe.pid !== undefined) {
          await eventLog.update(id, {
            pid: exe.pid,
            ...(rec.pidStart !== undefined ? { pidStart: rec.pidStart } : {}),
          });
        }
      } catch (err) {
        // The caller gets no handle: the command must not run unobserved. Its
        // exit is logged as usual (reason "killed"), so the record finishes.
        exe.signal("SIGKILL", "killed");
        throw err;
      }
      safe(() => this.observer?.started?.({ ...rec }));
      return new Handle(this, id);
    } finally {
      ticket.release();
      this.reserved.delete(id);
    }
  }

  async get(id: string): Promise<ExecHandle> {
    if (this.local.has(id)) return new Handle(this, id);
    await this.info(id);
    return new Handle(this, id);
  }

  async list(): Promise<ExecRecord[]> {
    return (await (await this.eventLogP).list()).filter((r) => isExecutionId(r.id));
  }

  async kill(id: string, signal = "SIGTERM"): Promise<void> {
    const sig = checkSignal(signal);
    const exe = this.local.get(id);
    if (exe) return exe.signal(sig, "killed");
    const rec = await this.info(id);
    if (rec.state !== "running") return;
    if (!this.remote) throw notLocal(id);
    await this.remote.kill(rec, sig);
  }

  async write(id: string, chunk: Uint8Array | string): Promise<void> {
    if (typeof chunk !== "string" && !(chunk instanceof Uint8Array)) {
      throw new ComputerError("EINVAL", "stdin chunk must be a string or bytes");
    }
    const exe = this.local.get(id);
    if (exe) return exe.write(chunk);
    const rec = await this.info(id);
    if (rec.state !== "running") throw stdinClosed(id);
    if (!this.remote) throw notLocal(id);
    return this.remote.write(rec, chunk);
  }

  async end(id: string): Promise<void> {
    const exe = this.local.get(id);
    if (exe) return exe.end();
    const rec = await this.info(id);
    if (rec.state !== "running") return;
    if (!this.remote) throw notLocal(id);
    return this.remote.end(rec);
  }

  /** Resize a pty execution's terminal (EINVAL when it has none). */
  async resize(id: string, size: PtySize): Promise<void> {
    const checked = checkPtySize(size, "size");
    const exe = this.local.get(id);
    if (exe) return exe.resize(checked, await this.eventLogP);
    const rec = await this.info(id);
    if (!rec.pty) throw new ComputerError("EINVAL", `execution ${id} was not started with a pty`);
    if (rec.state !== "running") return;
    if (!this.remote?.resize) throw notLocal(id);
    return this.remote.resize(rec, checked);
  }

  /** The current screen of a pty execution (see screen.ts). */
  screen(id: string): Promise<ScreenSnapshot> {
    return this.screens.snapshot(id);
  }

  async dispose(id: string): Promise<void> {
    const exe = this.local.get(id);
    if (exe) {
      exe.signal("SIGKILL", "killed");
      await exe.done;
    } else {
      const rec = await this.info(id);
      if (rec.state === "running") {
        if (!this.remote) throw notLocal(id);
        return this.remote.dispose(rec);
      }
    }
    await (await this.eventLogP).dispose(id);
  }

  /** Kill every running execution (SIGTERM, SIGKILL after the grace), then close the log. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const all = [...this.local.values()];
      await Promise.all(
        all.map(async (exe) => {
          exe.signal("SIGTERM", "killed");
          await exe.done;
        }),
      );
      this.screens.close();
      this.spawner?.close();
      const eventLog = await this.eventLogP.catch(() => undefined);
      await eventLog?.close();
    })();
    return this.closing;
  }

  /** A fresh stream of the execution's events; a bad start position errors the stream. */
  events(id: string, options: EventsOptions = {}): ReadableStream<ExecEvent> {
    return eventStream(this.source, id, options);
  }

  /** The same stream, once its start position is known to be servable (rejects otherwise). */
  subscribe(id: string, options: EventsOptions = {}): Promise<ReadableStream<ExecEvent>> {
    return subscribeStream(this.source, id, options);
  }

  result(id: string, options: { signal?: AbortSignal } = {}): Promise<ExecResult> {
    return collectResult(this, id, this.resultMaxBytes, options);
  }

  async info(id: string): Promise<ExecRecord> {
    const rec = await (await this.eventLogP).get(id);
    if (!rec) throw notFound(id);
    return rec;
  }

  /** The exit of a local execution is in the log: it no longer runs here. */
  private async finished(exe: LocalExec, eventLog: EventLog): Promise<void> {
    this.local.delete(exe.id);
    const rec = await eventLog.get(exe.id).catch(() => undefined);
    safe(() => this.observer?.finished?.(rec ?? { ...exe.record, state: "exited" }));
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
    // Synchronous: a local stat is ~5 µs, through the thread pool ~200 µs of CPU (paths.ts).
    const st = statSync(abs, { throwIfNoEntry: false });
    if (!st?.isDirectory()) {
      throw new ComputerError("EINVAL", `cwd ${JSON.stringify(cwd)} is not a directory`);
    }
    return abs;
  }
}

/** An execution seen through its computer: the ExecHandle the in-process API returns. */
class Handle implements ExecHandle {
  constructor(
    private readonly computer: Computer,
    readonly id: string,
  ) {}
  events(options?: EventsOptions): ReadableStream<ExecEvent> {
    return this.computer.events(this.id, options);
  }
  subscribe(options?: EventsOptions): Promise<ReadableStream<ExecEvent>> {
    return this.computer.subscribe(this.id, options);
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
  resize(size: { cols: number; rows: number }): Promise<void> {
    return this.computer.resize(this.id, size);
  }
  screen(): Promise<ScreenSnapshot> {
    return this.computer.screen(this.id);
  }
}

/** The runtime's backpressure depends on the stated capacity: refuse a log without one. */
function checkCapacity(eventLog: EventLog): EventLog {
  const capacity = eventLog.capacityBytes;
  if (!(typeof capacity === "number" && capacity > 0)) {
    throw new ComputerError(
      "EINVAL",
      "the event log must state its capacityBytes (a positive number, Infinity when unbounded)",
    );
  }
  return eventLog;
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

function safe(f: () => void): void {
  try {
    f();
  } catch {
    // observers must not break the runtime
  }
}
