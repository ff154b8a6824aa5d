// WebSocket /v1/ws: many executions multiplexed on one socket (docs/api.md).
//
// Client -> server, JSON text messages:
//   {"type":"subscribe","id":"r1","after":0|"tail","heartbeats":true}
//   {"type":"resume","id":"r1","after":41}     (same as subscribe; after required)
//   {"type":"unsubscribe","id":"r1"}
// Server -> client, text messages holding one or more complete exec-wire lines
// (each ending in "\n"), so a client feeds every message to the same JSONL
// decoder it uses over HTTP. A subscription ends after its exit frame, or with
// an exec-wire error frame carrying its id (ENOENT, ELOG_TRUNCATED with
// earliestSeq, ...). A bad message gets an error frame without id (EINVAL).
//
// Each subscription is its own pump over the execution's event stream, so a
// slow execution never stalls another. Backpressure is per socket: while
// `bufferedAmount` is over the high-water mark every pump on that socket stops
// reading and resumes when the send callbacks bring it back down.

import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { type WebSocket, WebSocketServer } from "ws";
import { encodeErrorFrame } from "../wire/exec-wire/index.js";
import type { ErrorFrame } from "../wire/types.js";
import type { ServerDeps } from "./deps.js";
import { openFrameEncoder } from "./encode-cache.js";
import { assertRetained, HttpError, toHttpError } from "./http-errors.js";
import { type ByteSink, type Frame, pumpEvents } from "./pump.js";
import type { Router } from "./router.js";

const MAX_MESSAGE_BYTES = 64 * 1024;
const PING_MS = 30_000;

interface Subscription {
  ac: AbortController;
}

function errorFrame(id: string | undefined, err: unknown): ErrorFrame {
  const e = toHttpError(err);
  const frame: ErrorFrame = { name: "error", code: e.code, message: e.message };
  if (id !== undefined) frame.id = id;
  if (e.earliestSeq !== undefined) frame.earliestSeq = e.earliestSeq;
  return frame;
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

export interface WsEndpoint {
  wss: WebSocketServer;
  closeAll(): void;
}

export function registerWebSocket(router: Router, deps: ServerDeps): WsEndpoint {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_MESSAGE_BYTES,
    perMessageDeflate: false, // compression costs more CPU than loopback bandwidth saves
  });

  router.upgrade("/v1/ws", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (deps.isClosing()) throw new HttpError(503, "EUNAVAILABLE", "server is shutting down");
    wss.handleUpgrade(req, socket, head, (ws) => onConnection(ws, req));
  });

  function onConnection(ws: WebSocket, req: IncomingMessage): void {
    req.socket.setNoDelay(true);
    const subs = new Map<string, Subscription>();
    const high = deps.limits.wsHighWaterBytes;
    let waiters: (() => void)[] = [];
    let closed = false;
    const wake = () => {
      if (ws.bufferedAmount > high / 2 && !closed) return;
      const w = waiters;
      waiters = [];
      for (const f of w) f();
    };
    const sink: ByteSink = {
      get closed() {
        return closed;
      },
      write(parts, totalBytes) {
        ws.send(joinFrames(parts, totalBytes), { binary: false }, wake);
        return ws.bufferedAmount < high;
      },
      drained() {
        if (closed || ws.bufferedAmount < high) return Promise.resolve();
        return new Promise((resolve) => waiters.push(resolve));
      },
    };
    const sendFrame = (frame: ErrorFrame) => {
      if (!closed) ws.send(encodeErrorFrame(frame), { binary: false });
    };
    const alive = { pong: true };
    const ping = setInterval(() => {
      if (!alive.pong) {
        ws.terminate();
        return;
      }
      alive.pong = false;
      ws.ping();
    }, PING_MS);
    ping.unref();
    ws.on("pong", () => {
      alive.pong = true;
    });

    const unsubscribe = (id: string) => {
      const s = subs.get(id);
      if (s) {
        subs.delete(id);
        s.ac.abort();
      }
    };

    const subscribe = async (id: string, after: number | "tail", heartbeats: boolean) => {
      unsubscribe(id); // re-subscribing is a resume: the new position wins
      if (deps.subscriptions.count >= deps.limits.maxSubscribers) {
        throw new HttpError(429, "ELIMIT", "too many subscribers");
      }
      const sub: Subscription = { ac: new AbortController() };
      subs.set(id, sub);
      deps.subscriptions.count++;
      deps.metrics.subscribers.inc({ transport: "ws" });
      try {
        const handle = await deps.computer.get(id);
        if (typeof after === "number") {
          assertRetained(after, await handle.info());
        }
        if (sub.ac.signal.aborted) return;
        const stream = handle.events({
          after,
          heartbeats: heartbeats && deps.heartbeats,
          signal: sub.ac.signal,
        });
        const subSink: ByteSink = {
          get closed() {
            return closed || sub.ac.signal.aborted;
          },
          write: sink.write,
          drained: sink.drained,
        };
        const encoder = openFrameEncoder("ndjson", id);
        const end = await pumpEvents(stream, subSink, {
          encode: encoder.encode,
          batchBytes: high / 4,
          onBytes: (n) => deps.metrics.bytesStreamed.inc({ transport: "ws" }, n),
        }).finally(encoder.close);
        if (end.kind === "error") throw end.error;
      } finally {
        if (subs.get(id) === sub) subs.delete(id);
        deps.subscriptions.count--;
        deps.metrics.subscribers.dec({ transport: "ws" });
      }
    };

    ws.on("message", (data, isBinary) => {
      let msg: Record<string, unknown>;
      try {
        if (isBinary) throw new HttpError(400, "EINVAL", "messages must be JSON text");
        const parsed: unknown = JSON.parse(String(data));
        if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
          throw new HttpError(400, "EINVAL", "message must be a JSON object");
        }
        msg = parsed as Record<string, unknown>;
        const allowed = ["type", "id", "after", "heartbeats"];
        const extra = Object.keys(msg).filter((k) => !allowed.includes(k));
        if (extra.length)
          throw new HttpError(400, "EINVAL", `unknown field(s): ${extra.join(", ")}`);
        if (typeof msg.id !== "string" || msg.id === "") {
          throw new HttpError(400, "EINVAL", "id must be a non-empty string");
        }
      } catch (err) {
        const e =
          err instanceof SyntaxError ? new HttpError(400, "EINVAL", "malformed JSON message") : err;
        deps.metrics.errors.inc({ code: toHttpError(e).code });
        sendFrame(errorFrame(undefined, e));
        return;
      }
      const id = msg.id as string;
      try {
        if (msg.type === "unsubscribe") {
          if (msg.after !== undefined || msg.heartbeats !== undefined) {
            throw new HttpError(400, "EINVAL", "unsubscribe takes only id");
          }
          unsubscribe(id);
          return;
        }
        if (msg.type !== "subscribe" && msg.type !== "resume") {
          throw new HttpError(400, "EINVAL", 'type must be "subscribe", "resume" or "unsubscribe"');
        }
        let after: number | "tail" = 0;
        if (msg.after !== undefined) {
          if (msg.after === "tail") after = "tail";
          else if (
            typeof msg.after === "number" &&
            Number.isSafeInteger(msg.after) &&
            msg.after >= 0
          ) {
            after = msg.after;
          } else
            throw new HttpError(400, "EINVAL", 'after must be a non-negative integer or "tail"');
        } else if (msg.type === "resume") {
          throw new HttpError(400, "EINVAL", "resume requires after");
        }
        if (msg.heartbeats !== undefined && typeof msg.heartbeats !== "boolean") {
          throw new HttpError(400, "EINVAL", "heartbeats must be a boolean");
        }
        subscribe(id, after, msg.heartbeats !== false).catch((err) => {
          const frame = errorFrame(id, err);
          deps.metrics.errors.inc({ code: frame.code });
          sendFrame(frame);
        });
      } catch (err) {
        const frame = errorFrame(id, err);
        deps.metrics.errors.inc({ code: frame.code });
        sendFrame(frame);
      }
    });

    ws.on("close", () => {
      closed = true;
      clearInterval(ping);
      for (const id of [...subs.keys()]) unsubscribe(id);
      wake();
    });
    ws.on("error", () => ws.terminate());
  }

  return {
    wss,
    closeAll() {
      for (const ws of wss.clients) ws.close(1001, "server shutting down");
    },
  };
}
