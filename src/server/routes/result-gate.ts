// Bounds how many `GET /v1/execs/:id/result` answers are assembled at once.
// Each one holds up to the result size of both streams, plus its base64 and
// JSON copies (tens of MiB for a chatty command), so twenty concurrent calls
// could add a gigabyte. A call first waits for the execution to end without
// keeping anything (it reads the live events and drops them), then takes one
// of `max` slots to collect and send the result; waiting for a slot costs
// nothing, and a client that goes away gives its place up.

import type { ExecHandle } from "../../runtime/types.js";

export class ResultGate {
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  /** Most slots ever held at once (observability and tests). */
  peak = 0;

  constructor(private readonly max: number) {}

  /** Runs `fn` holding a slot; `signal` aborts the wait for one. */
  async run<T>(fn: () => Promise<T>, signal: AbortSignal): Promise<T> {
    if (this.active >= this.max) {
      await new Promise<void>((resolve, reject) => {
        const go = () => {
          signal.removeEventListener("abort", quit);
          resolve();
        };
        const quit = () => {
          const i = this.waiting.indexOf(go);
          if (i >= 0) this.waiting.splice(i, 1);
          reject(signal.reason);
        };
        this.waiting.push(go);
        signal.addEventListener("abort", quit, { once: true });
      });
    } else this.active++;
    this.peak = Math.max(this.peak, this.active);
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next)
        next(); // the slot passes on: `active` is unchanged
      else this.active--;
    }
  }
}

/** Waits until the execution has ended, keeping none of its output. */
export async function waitForEnd(handle: ExecHandle, signal: AbortSignal): Promise<void> {
  const rec = await handle.info();
  if (rec.state !== "running") return;
  const reader = handle.events({ after: rec.lastSeq, heartbeats: false, signal }).getReader();
  try {
    for (;;) {
      const { done } = await reader.read();
      if (done) return;
    }
  } catch {
    // a truncated or cut stream: the collector reports what is left
  } finally {
    reader.releaseLock();
  }
}
