// The transport-neutral face of an execution. The in-process `Computer` and the
// remote `ComputerClient` implement these same interfaces, so code written
// against them (and one contract suite) runs over either. Web-standard types
// only: ReadableStream, Uint8Array, AbortSignal; errors are ComputerError.

import type { Limits, NetworkPolicy } from "../sandbox/types.js";
import type { ExecRecord, ExecState } from "../store/types.js";
import type { Chunk, ExecEvent } from "../wire/types.js";

export type { ExecRecord, ExecState };

/** What to run: a shell command line (`/bin/sh -c`), or an argv without a shell. */
export type ExecSpec = string | { command: string } | { argv: string[] };

export interface ExecOptions {
  /** Caller-chosen id; minted when absent. `EEXEC_BUSY` if that id is still running. */
  id?: string;
  /** Working directory relative to the workspace; must stay inside it. */
  cwd?: string;
  /** Overlay on the base environment. */
  env?: Record<string, string>;
  /** Bytes/text written to stdin then closed, or "pipe" to keep stdin open for write()/end(). */
  stdin?: string | Uint8Array | "pipe";
  /** SIGTERM after this many ms, then SIGKILL after the kill grace. */
  timeoutMs?: number;
  /** "b64" (default): events carry Uint8Array. "utf8": strings, never splitting a character. */
  encoding?: "b64" | "utf8";
  /**
   * Resource limits of this execution (memoryBytes, pids, cpus, fileSizeBytes,
   * tmpBytes, openFiles, cpuSeconds, wallTimeMs, outputBytes); absent fields
   * take the server's defaults, a value over its maximum is `EINVAL`.
   */
  limits?: Partial<Limits>;
  /** Narrows the server's network for this execution ("none", or a subset of its allow-list); never widens it. */
  network?: NetworkPolicy;
  /**
   * Run on a pseudo-terminal of this size (TERM=xterm-256color): its output
   * arrives as `stdout`, its input is write(), resize() changes its size.
   * Implies `stdin: "pipe"` (another stdin is EINVAL).
   */
  pty?: { cols: number; rows: number };
  /**
   * The caller subscribes from seq 0 right after exec() (a server's
   * stream-on-create route): until that first reader arrives, the command is
   * held back as if it were already reading, so a fast command cannot fill
   * the log past what it retains in between. Released after the stall time
   * (30 s by default) when no reader comes.
   */
  awaitReader?: boolean;
}

/** The current screen of a pty execution, as GET /v1/execs/:id/screen returns it. */
export interface ScreenSnapshot {
  /** Escape sequences that redraw the screen (and scrollback) in an empty terminal of this size. */
  data: string;
  cols: number;
  rows: number;
  /** Cursor position, 0-based, in the active buffer's viewport. */
  cursor: { x: number; y: number };
  /** The snapshot reflects every event up to this seq; follow with `after: seq`. */
  seq: number;
  /** True when events before the log's earliest retained seq were dropped (the screen may be partial). */
  partial: boolean;
}

export interface EventsOptions {
  /** Replay events with seq > after then follow (default 0: everything); "tail": only new events. */
  after?: number | "tail";
  /** Deliver heartbeats (live only) when the computer emits them. Default true. */
  heartbeats?: boolean;
  signal?: AbortSignal;
}

export interface ExecResult<V extends Chunk = Chunk> {
  id: string;
  status: ExecState;
  exitCode: number | null;
  signal?: string;
  stdout: V;
  stderr: V;
  /** True when stdout/stderr were cut at the result size bound or the log was truncated. */
  truncated: boolean;
}

export interface ExecHandle<V extends Chunk = Chunk> {
  readonly id: string;
  /**
   * A fresh stream per call; any number at once, each at its own pace. A bad
   * start position errors the stream (use subscribe() to learn it first).
   */
  events(options?: EventsOptions): ReadableStream<ExecEvent<V>>;
  /**
   * The same stream, opened once its start position is known to be servable:
   * rejects with ENOENT, EINVAL (malformed, or beyond the last seq) or
   * ELOG_TRUNCATED (with `earliestSeq`) before any event is read. A server
   * uses it to answer such errors with a status instead of a broken stream.
   */
  subscribe(options?: EventsOptions): Promise<ReadableStream<ExecEvent<V>>>;
  /** Waits for exit and returns accumulated output (bounded) and the exit status. */
  result(options?: { signal?: AbortSignal }): Promise<ExecResult<V>>;
  /** The execution's current record. */
  info(): Promise<ExecRecord>;
  /** Signal the process group (default SIGTERM). No-op when already finished. */
  kill(signal?: string): Promise<void>;
  /** Write to stdin (requires `stdin: "pipe"`). */
  write(chunk: Uint8Array | string): Promise<void>;
  /** Close stdin (on a pty: type Ctrl-D). */
  end(): Promise<void>;
  /** Resize the pseudo-terminal (EINVAL when not started with `pty`). */
  resize(size: { cols: number; rows: number }): Promise<void>;
  /** The current screen of a pty execution (EINVAL when not started with `pty`). */
  screen(): Promise<ScreenSnapshot>;
}

/** What both `Computer` (in-process) and `ComputerClient` (HTTP) offer. */
export interface ComputerApi {
  exec(spec: ExecSpec, options?: ExecOptions): Promise<ExecHandle>;
  /** A handle to an existing execution; `ENOENT` when unknown. */
  get(id: string): Promise<ExecHandle>;
  list(): Promise<ExecRecord[]>;
  kill(id: string, signal?: string): Promise<void>;
  dispose(id: string): Promise<void>;
  close(): Promise<void>;
  /**
   * Optional: whether the event log can be used now (waiting up to `waitMs`
   * for a dropped backend connection). The server answers /healthz with it
   * and refuses exec API calls with 503 `EUNAVAILABLE` while it is not ok.
   */
  health?(waitMs?: number): Promise<{ ok: boolean; reason?: string }>;
}
