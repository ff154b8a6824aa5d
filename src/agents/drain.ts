// Reading an execution's events for a tool call: from a seq, until the exit,
// a deadline, or a seq known to be the current end. Every tool that shows
// output (exec_command, write_stdin, read_output, kill_session, bash) reads
// through here, so "what did the caller see" is always a seq: the last event
// handed to `onEvent`. Nothing is consumed from the execution by reading, so
// a read cut short by the deadline loses nothing; the next read starts after
// the last seq delivered.
//
// A start position the log no longer retains (the ring dropped it) is not an
// error here: reading continues at the earliest retained seq and the result
// says how many seqs were skipped, since failing would leave the caller with
// no way forward.

import type { ExecHandle } from "../runtime/types.js";
import { hasCode } from "../wire/errors.js";
import type { ExitEvent, LoggedEvent } from "../wire/types.js";

export interface DrainOptions {
  /** Read events with seq > after. */
  after: number;
  /** Stop waiting at this time (epoch ms); events already there are still read first. */
  deadline: number;
  /** Stop after this seq (read_output: the end as of the call). */
  untilSeq?: number;
  /** Stop once `onEvent` returns true (bash: its command boundary). */
  onEvent(ev: LoggedEvent): boolean | undefined;
  signal?: AbortSignal;
}

export interface DrainResult {
  /** Seq of the last event delivered (= `after` when none). */
  lastSeq: number;
  exit?: ExitEvent;
  /** Set when the log had dropped events after `after`: reading resumed at this seq. */
  resumedAt?: number;
}

export async function drain(handle: ExecHandle, options: DrainOptions): Promise<DrainResult> {
  const result: DrainResult = { lastSeq: options.after };
  if (options.untilSeq !== undefined && options.untilSeq <= options.after) return result;
  const ac = new AbortController();
  const onAbort = () => ac.abort();
  options.signal?.addEventListener("abort", onAbort, { once: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  let reader: ReadableStreamDefaultReader | undefined;
  try {
    let stream: ReadableStream;
    try {
      stream = await handle.subscribe({
        after: options.after,
        heartbeats: false,
        signal: ac.signal,
      });
    } catch (err) {
      const earliest = (err as { earliestSeq?: number }).earliestSeq;
      if (!hasCode(err, "ELOG_TRUNCATED") || earliest === undefined) throw err;
      result.resumedAt = earliest;
      result.lastSeq = earliest - 1;
      stream = await handle.subscribe({
        after: earliest - 1,
        heartbeats: false,
        signal: ac.signal,
      });
    }
    reader = stream.getReader();
    const expired = new Promise<"deadline">((resolve) => {
      timer = setTimeout(() => resolve("deadline"), Math.max(0, options.deadline - Date.now()));
    });
    for (;;) {
      const r = await Promise.race([reader.read(), expired]);
      if (r === "deadline" || r.done) break;
      const ev = r.value as LoggedEvent | { name: "heartbeat" };
      if (ev.name === "heartbeat") continue;
      result.lastSeq = ev.seq;
      const stop = options.onEvent(ev);
      if (ev.name === "exit") {
        result.exit = ev;
        break;
      }
      if (stop) break;
      if (options.untilSeq !== undefined && ev.seq >= options.untilSeq) break;
    }
    return result;
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener("abort", onAbort);
    reader?.cancel().catch(() => {});
    ac.abort();
  }
}
