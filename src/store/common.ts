// Helpers shared by every EventLog implementation (memory, SQLite, Redis), so
// they agree on the details the contract suite checks: how an event is sized
// for the byte cap, which state an exit reason yields, how a batch is checked
// for seq continuity, and what an idempotent re-append is.

import { ComputerError } from "../wire/errors.js";
import type { ExitEvent, ExitReason, LoggedEvent } from "../wire/types.js";
import type { SpillOptions } from "./spill.js";
import type { ExecRecord, ExecState } from "./types.js";

/** Default bound on one execution's retained events (a log's `capacityBytes`): 16 MiB. */
export const DEFAULT_LOG_MAX_BYTES = 16 * 1024 * 1024;
/** Default time a finished execution is kept: 5 min after its exit. */
export const DEFAULT_RETENTION_MS = 5 * 60 * 1000;

/** The first character of every record id that is not an execution's (isExecutionId). */
export const NON_EXECUTION_ID_PREFIX = "~";

/**
 * Whether a record of the log is an execution. Records whose id starts with
 * "~" (execution ids cannot) belong to other users of the same log: the A@UI
 * relay's channel journal, MCP streams. No process runs them, so nothing may
 * close them as lost (a journal closed that way refuses every later write):
 * the Redis log keeps them out of its nodes' running sets, which the
 * cluster's liveness sweeps close. Listings of executions leave them out.
 */
export function isExecutionId(id: string): boolean {
  return !id.startsWith(NON_EXECUTION_ID_PREFIX);
}

/** Options every log constructor accepts (the contract suite passes small values). The spill options concern the memory log only. */
export interface EventLogOptions extends SpillOptions {
  /** Cap on the retained size of one execution's events (see eventSize); the log's `capacityBytes`. */
  logMaxBytes?: number;
  /** How long a finished execution is kept before it is swept. */
  retentionMs?: number;
}

/**
 * Fixed per-event overhead counted against the cap. Without it a stream of
 * one-byte events would let millions of event objects through a 16 MiB cap.
 * The runtime uses the same function for its backpressure accounting, so its
 * view of "how far behind is a subscriber" matches what the ring will evict.
 */
export const EVENT_OVERHEAD_BYTES = 64;

/** Bytes an event counts for against `logMaxBytes`. */
export function eventSize(ev: LoggedEvent): number {
  if (ev.name === "exit") return EVENT_OVERHEAD_BYTES;
  const v = ev.value;
  return EVENT_OVERHEAD_BYTES + (typeof v === "string" ? Buffer.byteLength(v) : v.byteLength);
}

/**
 * The record state an exit reason finishes an execution with: the same word.
 * Records written before state and reason were spelled alike say `timed_out`.
 */
export function stateForReason(reason: ExitReason | undefined): ExecState {
  return reason ?? "exited";
}

/** A stored state as today's spelling (`timed_out` from older logs reads as `timeout`). */
export function normalizeState(state: string): ExecState | undefined {
  if (state === "timed_out") return "timeout";
  return state === "running" ||
    state === "exited" ||
    state === "killed" ||
    state === "timeout" ||
    state === "lost" ||
    state === "oom" ||
    state === "limit"
    ? state
    : undefined;
}

/** The record fields an exit event sets. */
export function finishPatch(ev: ExitEvent, now = Date.now()): Partial<ExecRecord> {
  const patch: Partial<ExecRecord> = {
    state: stateForReason(ev.reason),
    exitCode: ev.value,
    endedAt: now,
  };
  if (ev.signal !== undefined) patch.signal = ev.signal;
  return patch;
}

/** True when two logged events have the same content (seq is compared too). */
export function sameEvent(a: LoggedEvent, b: LoggedEvent): boolean {
  if (a.seq !== b.seq || a.name !== b.name) return false;
  if (a.name === "exit" || b.name === "exit") {
    const x = a as ExitEvent;
    const y = b as ExitEvent;
    return x.value === y.value && x.signal === y.signal && x.reason === y.reason;
  }
  const va = a.value;
  const vb = b.value;
  if (typeof va === "string" || typeof vb === "string") return va === vb;
  if (va.byteLength !== vb.byteLength) return false;
  return Buffer.from(va.buffer, va.byteOffset, va.byteLength).equals(
    Buffer.from(vb.buffer, vb.byteOffset, vb.byteLength),
  );
}

/**
 * Validate a batch against the log's lastSeq. Returns the index of the first
 * event that is new (events before it are re-appends of stored seqs, which the
 * caller checks for identity where it still has them). Throws EINVAL when the
 * new part does not continue the log exactly, or continues past an exit.
 */
export function checkBatch(
  id: string,
  lastSeq: number,
  finished: boolean,
  events: LoggedEvent[],
): number {
  let first = 0;
  while (first < events.length && events[first]!.seq <= lastSeq) first++;
  let expect = lastSeq + 1;
  for (let i = first; i < events.length; i++) {
    const ev = events[i]!;
    if (!Number.isSafeInteger(ev.seq) || ev.seq !== expect) {
      throw new ComputerError(
        "EINVAL",
        `append to ${id}: expected seq ${expect}, got ${String(ev.seq)}`,
      );
    }
    if (ev.id !== undefined && ev.id !== id) {
      throw new ComputerError("EINVAL", `append to ${id}: event carries id ${ev.id}`);
    }
    if (finished || (ev.name === "exit" && i !== events.length - 1)) {
      throw new ComputerError("EINVAL", `append to ${id}: events after exit`);
    }
    if (ev.name === "exit") finished = true;
    expect++;
  }
  // Re-appended seqs must still be in order (a retried batch, not a shuffle).
  for (let i = 1; i < first; i++) {
    if (events[i]!.seq !== events[i - 1]!.seq + 1) {
      throw new ComputerError("EINVAL", `append to ${id}: seqs out of order`);
    }
  }
  return first;
}

export function notFound(id: string): ComputerError {
  return new ComputerError("ENOENT", `no such execution: ${id}`);
}

export function truncated(id: string, after: number, earliestSeq: number): ComputerError {
  return new ComputerError(
    "ELOG_TRUNCATED",
    `events of ${id} after seq ${after} were dropped; the earliest retained seq is ${earliestSeq}`,
    { earliestSeq },
  );
}

export function busy(id: string): ComputerError {
  return new ComputerError("EEXEC_BUSY", `execution ${id} is still running`);
}

export function closedError(): ComputerError {
  return new ComputerError("ECLOSED", "the event log is closed");
}

export function abortedError(signal?: AbortSignal): ComputerError {
  return new ComputerError("EABORTED", "aborted", { cause: signal?.reason });
}

/**
 * A set of parked `waitFor` promises for one execution, woken together. Kept
 * here because memory and SQLite logs (single process) wake them the same way.
 */
export class Waiters {
  private readonly set = new Set<() => void>();

  get size(): number {
    return this.set.size;
  }

  wait(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortedError(signal));
    return new Promise<void>((resolve, reject) => {
      const wake = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = () => {
        this.set.delete(wake);
        reject(abortedError(signal));
      };
      this.set.add(wake);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  wakeAll(): void {
    if (this.set.size === 0) return;
    const all = [...this.set];
    this.set.clear();
    for (const w of all) w();
  }
}
