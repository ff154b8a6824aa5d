// The EventLog contract: the source of truth for an execution's events and its
// record. Every implementation (memory, SQLite, Redis Streams) passes the same
// contract suite. It is asynchronous and free of process-local assumptions
// (no callbacks into the runtime, no shared object identity) so a log shared by
// many nodes fits it unchanged: a live subscriber and a resuming one both just
// `read` from a seq and `waitFor` more, on whichever node they are.

import type { ExitReason, LoggedEvent } from "../wire/types.js";

/** Lifecycle of an execution. Derived from the exit event's reason when it is appended. */
export type ExecState = "running" | ExitReason;

/** What is known about an execution, stored beside its events. */
export interface ExecRecord {
  id: string;
  /** Shell command line, or the argv when run without a shell. */
  command: string | string[];
  /** Working directory, relative to the workspace root ("" is the root). */
  cwd: string;
  encoding: "b64" | "utf8";
  /** Id of the node that runs (ran) the process; "local" on a single node. */
  node: string;
  pid?: number;
  /**
   * Identity of the process `pid` when it was spawned ("<start ticks>@<boot
   * id>", see src/runtime/reaper.ts): lets a restarted server kill what is
   * left of a `lost` execution without ever hitting a reused pid. Cleared
   * once that was done.
   */
  pidStart?: string;
  /** For a `lost` execution: what became of its processes (killed, gone, or not killable from the node that closed it). */
  lostNote?: string;
  state: ExecState;
  /** Epoch ms. */
  startedAt: number;
  endedAt?: number;
  exitCode?: number;
  signal?: string;
  /** Highest seq appended so far (0 before any event). */
  lastSeq: number;
  /** Lowest seq still retained (lastSeq + 1 when nothing is retained). */
  earliestSeq: number;
  /** Present when the execution runs on a pseudo-terminal (docs/runtime.md, "Terminals"). */
  pty?: PtyState;
}

/** A pseudo-terminal's size now, and every size it had with the seq each one follows. */
export interface PtyState {
  cols: number;
  rows: number;
  /** In order; `after` is the seq of the last event before the size took effect (0: from the start). */
  sizes: { after: number; cols: number; rows: number }[];
}

/** Fields a caller supplies when creating a record; the log fills in the rest. */
export type NewExecRecord = Omit<ExecRecord, "lastSeq" | "earliestSeq" | "state"> & {
  state?: "running";
};

export interface ReadOptions {
  /** At most this many events (default: implementation's batch size). */
  limit?: number;
}

export interface EventLog {
  /**
   * Bytes of events (counted by `eventSize`: payload plus a fixed overhead)
   * this log retains per execution. Once an execution's events exceed it, the
   * oldest are dropped (a log may trim below it in one step: SQLite trims to
   * 3/4) and reading before them is `ELOG_TRUNCATED`; the last event always
   * stays. `Infinity` for a log that never drops events. A writer that must
   * not lose events a reader has not read yet (the runtime's backpressure)
   * keeps that reader well within this bound.
   */
  readonly capacityBytes: number;
  /**
   * Start the log of a new execution. Fails with `EEXEC_BUSY` when the id exists
   * and is still running; a finished execution with the same id is replaced.
   */
  create(record: NewExecRecord): Promise<void>;
  /**
   * Append events whose seqs continue the log exactly (lastSeq+1, +2, ...);
   * anything else is `EINVAL`. Appending `exit` finishes the record (state,
   * exitCode, signal, endedAt) and starts its retention clock.
   * Appending an already-stored seq with identical content is a no-op
   * (seq is the idempotency key for retried writes).
   */
  append(id: string, events: LoggedEvent[]): Promise<void>;
  /**
   * Events with seq > after, in order, possibly fewer than exist (batching).
   * `ENOENT` for an unknown id; `ELOG_TRUNCATED` (with `earliestSeq`) when
   * after + 1 < earliestSeq, i.e. some requested events were dropped.
   */
  read(id: string, after: number, options?: ReadOptions): Promise<LoggedEvent[]>;
  /**
   * Resolves once the log holds an event with seq > after, or the execution is
   * finished, or it was disposed; rejects with `EABORTED` when `signal` aborts.
   */
  waitFor(id: string, after: number, signal?: AbortSignal): Promise<void>;
  get(id: string): Promise<ExecRecord | undefined>;
  /** All known executions, oldest first. */
  list(): Promise<ExecRecord[]>;
  /** Update mutable fields of the record (pid, state for `lost`, ...). */
  update(id: string, patch: Partial<Omit<ExecRecord, "id">>): Promise<void>;
  /**
   * Optional, for logs behind a network connection (Redis): undefined when
   * the backend can be used now (waiting up to `waitMs` for a dropped
   * connection to come back), else why not. API calls and /healthz ask it so
   * that an outage fails fast with `EUNAVAILABLE` instead of hanging.
   */
  unavailable?(waitMs?: number): Promise<string | undefined>;
  /** Forget an execution and its events now. Unknown ids are a no-op. */
  dispose(id: string): Promise<void>;
  close(): Promise<void>;
}
