// WebSocket keepalive for every WebSocket the server accepts (/v1/ws and the
// A@UI relay's): ping every 30 s and terminate a socket whose previous ping
// got no pong. A peer that vanished without a close (a laptop lid, a dropped
// NAT mapping) would otherwise keep its subscriptions, its buffers and its
// subscriber slots forever. The interval is unref'd so it never keeps a
// process alive.

/** Ping interval. */
export const PING_MS = 30_000;

/** The part of a `ws` WebSocket the keepalive uses. */
export interface Pingable {
  ping(): void;
  terminate(): void;
  on(event: "pong" | "close", listener: () => void): unknown;
}

/** Starts the ping/pong loop on `ws`; it stops by itself when the socket closes. */
export function keepAlive(ws: Pingable, intervalMs = PING_MS): void {
  let pong = true;
  const timer = setInterval(() => {
    if (!pong) {
      ws.terminate();
      return;
    }
    pong = false;
    ws.ping();
  }, intervalMs);
  timer.unref();
  ws.on("pong", () => {
    pong = true;
  });
  ws.on("close", () => clearInterval(timer));
}
