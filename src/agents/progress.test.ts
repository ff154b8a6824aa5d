// Progress while a tool call waits, on fake timers: nothing without a
// callback, output reported at most once per 200 ms, a tick when the command
// is silent (skipped right after an output report), nothing after stop(),
// and a throwing callback never fails the call.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { startProgress } from "./progress.js";

describe("startProgress", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("does nothing and starts no timer when the caller takes no progress", () => {
    const p = startProgress({}, "exec", 1000);
    p.output(10, 1);
    expect(vi.getTimerCount()).toBe(0);
    p.stop();
  });

  it("reports output with its label, bytes and seq, at most once per 200 ms", () => {
    const seen: string[] = [];
    const p = startProgress({ onProgress: (m) => seen.push(m) }, "exec e1", 60_000);
    p.output(5, 1);
    p.output(9, 2);
    vi.advanceTimersByTime(199);
    p.output(12, 3);
    vi.advanceTimersByTime(1);
    p.output(20, 4);
    expect(seen).toEqual(["exec e1: 5 bytes, seq 1", "exec e1: 20 bytes, seq 4"]);
    p.stop();
  });

  it("ticks while the command is silent with running time and the latest position", () => {
    const seen: string[] = [];
    const p = startProgress({ onProgress: (m) => seen.push(m) }, "bash", 1000);
    vi.advanceTimersByTime(3000);
    expect(seen).toEqual([
      "bash: running for 1 s, 0 bytes, seq 0",
      "bash: running for 2 s, 0 bytes, seq 0",
      "bash: running for 3 s, 0 bytes, seq 0",
    ]);
    p.stop();
  });

  it("skips a tick that comes less than half an interval after an output report", () => {
    const seen: string[] = [];
    const p = startProgress({ onProgress: (m) => seen.push(m) }, "x", 1000);
    vi.advanceTimersByTime(700);
    p.output(1, 1); // reported at 700
    vi.advanceTimersByTime(300); // tick at 1000: 300 ms after the report
    expect(seen).toEqual(["x: 1 bytes, seq 1"]);
    vi.advanceTimersByTime(1000); // tick at 2000
    expect(seen).toHaveLength(2);
    expect(seen[1]).toBe("x: running for 2 s, 1 bytes, seq 1");
    p.stop();
  });

  it("reports nothing after stop()", () => {
    const seen: string[] = [];
    const p = startProgress({ onProgress: (m) => seen.push(m) }, "x", 100);
    p.stop();
    vi.advanceTimersByTime(1000);
    expect(seen).toEqual([]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("swallows a throwing callback", () => {
    const p = startProgress(
      {
        onProgress: () => {
          throw new Error("client gone");
        },
      },
      "x",
      100,
    );
    expect(() => p.output(1, 1)).not.toThrow();
    expect(() => vi.advanceTimersByTime(500)).not.toThrow();
    p.stop();
  });
});
