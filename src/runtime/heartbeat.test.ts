// The shared heartbeat ticker on fake timers: a parked subscriber beats once
// heartbeatMs passed since it last handed anything out, an unparked one never
// does, and the one timer stops once nobody is parked. heartbeatEvent carries
// the watermark seq, pid and elapsed/quiet times.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { ExecRecord } from "../store/types.js";
import { HeartbeatTicker, heartbeatEvent, type Parked } from "./heartbeat.js";

function parked(): Parked & { beats: number } {
  const p = {
    since: Date.now(),
    beats: 0,
    beat() {
      p.beats++;
      p.since = Date.now();
    },
  };
  return p;
}

describe("HeartbeatTicker", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("beats a parked subscriber once per heartbeatMs of silence, not before", () => {
    const ticker = new HeartbeatTicker(1000);
    const p = parked();
    ticker.park(p);
    vi.advanceTimersByTime(999);
    expect(p.beats).toBe(0);
    vi.advanceTimersByTime(1);
    expect(p.beats).toBe(1);
    vi.advanceTimersByTime(1000);
    expect(p.beats).toBe(2);
    ticker.unpark(p);
  });

  it("does not beat a subscriber that handed out something recently", () => {
    const ticker = new HeartbeatTicker(1000);
    const p = parked();
    ticker.park(p);
    for (let i = 0; i < 10; i++) {
      vi.advanceTimersByTime(500);
      p.since = Date.now();
    }
    expect(p.beats).toBe(0);
    ticker.unpark(p);
  });

  it("never beats an unparked subscriber and serves many with one timer that stops when idle", () => {
    const ticker = new HeartbeatTicker(100);
    const a = parked();
    const b = parked();
    ticker.park(a);
    ticker.park(b);
    expect(vi.getTimerCount()).toBe(1);
    ticker.unpark(a);
    vi.advanceTimersByTime(100);
    expect(a.beats).toBe(0);
    expect(b.beats).toBe(1);
    ticker.unpark(b);
    vi.advanceTimersByTime(100);
    expect(vi.getTimerCount()).toBe(0);
    ticker.park(a);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(100);
    expect(a.beats).toBe(1);
    ticker.unpark(a);
  });
});

describe("heartbeatEvent", () => {
  const record: ExecRecord = {
    id: "e1",
    command: "sleep 9",
    cwd: "",
    encoding: "b64",
    node: "local",
    pid: 4242,
    state: "running",
    startedAt: 1_000,
    lastSeq: 7,
    earliestSeq: 1,
  };

  it("carries the latest logged seq, the pid, time since start and since the last output", () => {
    expect(heartbeatEvent("e1", 7, record, 4_000, 5_500)).toEqual({
      id: "e1",
      seq: 7,
      name: "heartbeat",
      value: { pid: 4242, elapsedMs: 4_500, lastOutputMs: 1_500 },
    });
  });

  it("reports pid 0 before the process has one", () => {
    const { pid: _pid, ...noPid } = record;
    expect(heartbeatEvent("e1", 0, noPid, 1_000, 1_000).value).toEqual({
      pid: 0,
      elapsedMs: 0,
      lastOutputMs: 0,
    });
  });
});
