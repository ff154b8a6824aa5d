// Heartbeats for subscribers that are caught up and waiting: after
// `heartbeatMs` of silence a subscriber gets a `heartbeat` event carrying the
// latest logged seq, the pid and how long the command has been running and
// quiet. They are never logged or replayed. One shared timer per computer
// serves every parked subscriber (a timer per subscriber would cost a
// setTimeout/clearTimeout on every wait of every stream); it stops itself
// once nobody is parked.

import type { ExecRecord } from "../store/types.js";
import type { HeartbeatEvent } from "../wire/types.js";

/** A subscriber waiting for output, as the ticker sees it. */
export interface Parked {
  /** When the subscriber last handed out anything (epoch ms). */
  since: number;
  /** Hand out a heartbeat now (and move `since`). */
  beat(): void;
}

export class HeartbeatTicker {
  private readonly parked = new Set<Parked>();
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly heartbeatMs: number) {}

  park(p: Parked): void {
    this.parked.add(p);
    if (this.timer) return;
    const every = Math.max(10, Math.floor(this.heartbeatMs / 4));
    this.timer = setInterval(() => {
      const now = Date.now();
      for (const x of this.parked) if (now - x.since >= this.heartbeatMs) x.beat();
      if (this.parked.size === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    }, every);
    this.timer.unref?.();
  }

  unpark(p: Parked): void {
    this.parked.delete(p);
  }
}

/** The heartbeat for an execution whose latest logged event has seq `seq`. */
export function heartbeatEvent(
  id: string,
  seq: number,
  record: ExecRecord,
  lastOutputAt: number,
  now: number,
): HeartbeatEvent {
  return {
    id,
    seq,
    name: "heartbeat",
    value: {
      pid: record.pid ?? 0,
      elapsedMs: now - record.startedAt,
      lastOutputMs: now - lastOutputAt,
    },
  };
}
