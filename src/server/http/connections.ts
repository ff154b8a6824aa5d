// Connection limits, so that clients without a token cannot lock everyone
// out by holding sockets open (each costs a file descriptor; at the
// descriptor limit accept() fails for every client, token or not).
// - Header time: a connection must finish its request headers within
//   `headersTimeoutMs` (Node's headersTimeout, checked every second) or it is
//   closed. The body is only read after the auth check, so a slow body from
//   a client without the token is never waited for either.
// - A cap on open connections. When it is reached, a new connection does not
//   push out a working client: the oldest connection that has not yet
//   completed a request is closed to make room (a slowloris holds only such
//   connections), and only when every connection is serving a request is the
//   newcomer refused. The default cap is half the process's soft open-files
//   limit (the other half is for commands' pipes, files and logs), at most
//   10,000.

import { readFileSync } from "node:fs";
import type { Server } from "node:http";
import type { Socket } from "node:net";

export interface ConnectionLimits {
  /** Open connections (HTTP and WebSocket). */
  maxConnections: number;
  /** Time to receive a request's headers (ms). */
  headersTimeoutMs: number;
}

/** Half the soft RLIMIT_NOFILE (from /proc/self/limits), between 64 and 10,000. */
export function defaultMaxConnections(): number {
  let soft = 1024;
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync("/proc/self/limits", "utf8"));
    if (m && m[1] !== "unlimited") soft = Number(m[1]);
    else if (m) soft = 20_000;
  } catch {
    // not Linux: assume the common default
  }
  return Math.min(10_000, Math.max(64, Math.floor(soft / 2)));
}

/** Applies the limits to `server`; returns a function that counts connections (for tests/metrics). */
export function limitConnections(server: Server, limits: ConnectionLimits): () => number {
  server.headersTimeout = limits.headersTimeoutMs;
  // The body of an upload may legitimately take long; it is read only after auth.
  server.requestTimeout = 0;
  // Idle sockets (no request yet) are tracked in insertion order: oldest first.
  const idle = new Set<Socket>();
  let open = 0;
  server.on("connection", (socket: Socket) => {
    if (open >= limits.maxConnections) {
      const oldest = idle.values().next().value as Socket | undefined;
      if (oldest === undefined) {
        socket.destroy();
        return;
      }
      idle.delete(oldest);
      oldest.destroy();
    }
    open++;
    idle.add(socket);
    socket.once("close", () => {
      open--;
      idle.delete(socket);
    });
  });
  const busy = (socket: Socket) => idle.delete(socket);
  server.on("request", (req, res) => {
    // The socket as it is now: by "finish" the request may have let go of it.
    const socket = req.socket;
    busy(socket);
    // Between two requests a kept-alive connection is idle again: it may make room.
    res.once("finish", () => {
      if (socket && !socket.destroyed) idle.add(socket);
    });
  });
  server.on("upgrade", (req) => busy(req.socket));
  return () => open;
}
