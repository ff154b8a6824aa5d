// The two byte sinks the pump writes to: an HTTP response and a WebSocket.
// Each turns a batch of frames into as few socket writes as it can and
// reports "full" the way its transport measures it, so the pump (pump.ts)
// applies the same backpressure to both.

import type { ServerResponse } from "node:http";
import type { WebSocket } from "ws";
import type { ByteSink, Frame } from "./pump.js";

function writeFrame(res: ServerResponse, frame: Frame): boolean {
  // Text frames are ASCII (see Frame in pump.ts): latin1 is a plain copy.
  return typeof frame === "string" ? res.write(frame, "latin1") : res.write(frame);
}

/** A ByteSink over an HTTP response: res.write() backpressure, 'close' ends it. */
export function responseSink(res: ServerResponse): ByteSink & { dispose(): void } {
  let closed = false;
  let waiters: (() => void)[] = [];
  const wake = () => {
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  const onClose = () => {
    closed = true;
    wake();
  };
  res.on("close", onClose);
  res.on("drain", wake);
  return {
    get closed() {
      return closed || res.destroyed;
    },
    write: (parts) => {
      if (parts.length === 1) return writeFrame(res, parts[0]!);
      // cork + writes + uncork = one writev of all parts, without copying them together
      res.cork();
      let ok = true;
      for (const p of parts) ok = writeFrame(res, p);
      res.uncork();
      return ok;
    },
    drained: () =>
      closed || !res.writableNeedDrain
        ? Promise.resolve()
        : new Promise<void>((resolve) => waiters.push(resolve)),
    dispose: () => {
      res.off("close", onClose);
      res.off("drain", wake);
    },
  };
}

/**
 * One WebSocket message of exec-wire lines from a batch of frames: a single
 * Buffer filled with one copy per frame (text frames are ASCII, so latin1; ws
 * would otherwise UTF-8-encode a string, a scan plus a copy).
 */
function joinFrames(parts: Frame[], totalBytes: number): Uint8Array {
  if (parts.length === 1 && typeof parts[0] !== "string") return parts[0]!;
  const out = Buffer.allocUnsafe(totalBytes);
  let at = 0;
  for (const p of parts) {
    if (typeof p === "string") at += out.write(p, at, "latin1");
    else {
      out.set(p, at);
      at += p.length;
    }
  }
  return out;
}

/** The part of the WebSocket's TCP socket the sink uses to coalesce writes. */
export interface CorkableSocket {
  cork(): void;
  uncork(): void;
}

/**
 * A ByteSink over a WebSocket, shared by every subscription on it: each batch
 * is one message (text lines, or binary records in binary mode); "full" while `bufferedAmount` is over `highWaterBytes`,
 * and waiters wake once the send callbacks bring it under half of that (or
 * the socket closed: call `close()` from the socket's 'close' handler).
 *
 * With `socket` (the connection's TCP socket), the messages sent in one turn
 * of the event loop leave in one write: the socket is corked at the first
 * send and uncorked in the next check phase. Every subscription's pump sends
 * its own message, so a client following many executions over one socket
 * cost one system call per line each side (~50 µs per send on a virtual
 * machine); now it costs one per turn (measured at 500 live executions: time
 * in writev -35%, docs/benchmarks.md "Scale"). Latency: at most one turn.
 */
export function webSocketSink(
  ws: WebSocket,
  highWaterBytes: number,
  /** Send each batch as a binary message (binary records) instead of text lines. */
  binary = false,
  socket?: CorkableSocket,
): ByteSink & { close(): void } {
  let corked = false;
  const uncork = () => {
    corked = false;
    socket!.uncork();
  };
  let closed = false;
  let waiters: (() => void)[] = [];
  const wake = () => {
    if (ws.bufferedAmount > highWaterBytes / 2 && !closed) return;
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  return {
    get closed() {
      return closed;
    },
    write(parts, totalBytes) {
      if (socket && !corked) {
        corked = true;
        socket.cork();
        setImmediate(uncork);
      }
      ws.send(joinFrames(parts, totalBytes), { binary }, wake);
      return ws.bufferedAmount < highWaterBytes;
    },
    drained() {
      if (closed || ws.bufferedAmount < highWaterBytes) return Promise.resolve();
      return new Promise((resolve) => waiters.push(resolve));
    },
    close() {
      closed = true;
      wake();
    },
  };
}
