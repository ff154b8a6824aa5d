// The keepalive rule on a fake socket: a ping per interval, a missed pong
// terminates, a pong keeps the socket, and closing stops the loop.
import { EventEmitter } from "node:events";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { keepAlive } from "./keepalive.js";

class FakeSocket extends EventEmitter {
  pings = 0;
  terminated = 0;
  ping() {
    this.pings++;
  }
  terminate() {
    this.terminated++;
  }
}

describe("keepAlive", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("pings every interval and keeps a socket that answers", () => {
    const ws = new FakeSocket();
    keepAlive(ws, 1000);
    for (let i = 1; i <= 3; i++) {
      vi.advanceTimersByTime(1000);
      expect(ws.pings).toBe(i);
      ws.emit("pong");
    }
    expect(ws.terminated).toBe(0);
    ws.emit("close");
  });

  it("terminates a socket whose ping got no pong", () => {
    const ws = new FakeSocket();
    keepAlive(ws, 1000);
    vi.advanceTimersByTime(1000);
    expect(ws.pings).toBe(1);
    vi.advanceTimersByTime(1000);
    expect(ws.terminated).toBe(1);
    ws.emit("close");
  });

  it("stops when the socket closes", () => {
    const ws = new FakeSocket();
    keepAlive(ws, 1000);
    ws.emit("close");
    vi.advanceTimersByTime(5000);
    expect(ws.pings).toBe(0);
    expect(ws.terminated).toBe(0);
  });
});
