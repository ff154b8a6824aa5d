// The relay's WebSocket transport (`GET /v1/ui/:channel/ws`, upgrade): one
// command per text message and `[DONE]` when the channel ends; with
// `?cursors=1` each command comes as `{"cursor":N,"command":{…}}` (so a page
// knows its position without SSE ids) and a rejected UI event is answered
// with `{"error":{code,message}}`. Page -> server messages are UI events, or
// `{"type":"aui:resume","after":N}` to start over from a seq on the same
// socket. A resume the channel cannot serve closes the socket with 4410.
//
// A slow page never holds up publishers: past `maxSubscriberBuffer` buffered
// bytes it is terminated and resumes from its last seq. Dead peers are found by the
// same ping/pong keepalive as the exec WebSocket (keepalive.ts).

import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { type WebSocket, WebSocketServer } from "ws";
import { ComputerError, codeOf } from "../../wire/errors.js";
import { keepAlive } from "../streaming/keepalive.js";
import type { EndMode, RelayEntry, Subscription, UiChannel } from "./channel.js";

/** Largest page -> server message (a UI event). */
const MAX_MESSAGE_BYTES = 1024 * 1024;

export interface WsOptions {
  maxSubscriberBuffer: number;
}

/** The relay's WebSocket endpoint: one per server, sessions per page. */
export class RelayWebSockets {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES });

  constructor(private readonly options: WsOptions) {}

  /**
   * Completes an upgrade the route has already checked (the channel can
   * serve `after`: a 410 must go out before switching protocols).
   */
  accept(
    ch: UiChannel,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    after: number,
    envelope: boolean,
  ): void {
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      keepAlive(ws);
      session(ch, ws, socket, after, envelope, this.options);
    });
  }
}

function session(
  ch: UiChannel,
  ws: WebSocket,
  socket: Duplex,
  after: number,
  envelope: boolean,
  options: WsOptions,
): void {
  let sub: Subscription | undefined;
  let corked = false;
  const send = (e: RelayEntry | EndMode) => {
    if (ws.readyState !== ws.OPEN) return;
    if (e === "cut") {
      ws.close(1001, "server shutting down");
      return;
    }
    if (e === "done") {
      ws.send("[DONE]");
      ws.close(1000, "done");
      return;
    }
    // A burst (a batch publish, a replay) goes out in as few TCP segments as
    // possible: cork the upgraded socket (the one ws writes to) until the
    // current tick's sends are queued.
    if (!corked) {
      corked = true;
      socket.cork();
      setImmediate(() => {
        corked = false;
        socket.uncork();
      });
    }
    ws.send(
      envelope ? JSON.stringify({ cursor: e.seq, command: e.command }) : JSON.stringify(e.command),
    );
    if (ws.bufferedAmount > options.maxSubscriberBuffer) ws.terminate(); // too slow: it resumes from its last seq
  };
  const start = (from: number) => {
    sub?.unsubscribe();
    try {
      sub = ch.subscribe(from, send);
    } catch (err) {
      const code = codeOf(err) ?? "EINTERNAL";
      ws.close(4410, `${code}: ${(err as Error).message}`.slice(0, 120));
      return;
    }
    for (const e of sub.replay) send(e);
    if (ch.closed) send(ch.endMode);
  };
  // Server -> page messages are commands only (the A@UI protocol), so a
  // rejected UI event is reported only to pages that asked for envelopes.
  const reject = (err: unknown) => {
    if (envelope && ws.readyState === ws.OPEN) {
      const code = codeOf(err) ?? "EINTERNAL";
      ws.send(JSON.stringify({ error: { code, message: (err as Error).message } }));
    }
  };
  start(after);
  ws.on("message", (data, isBinary) => {
    if (isBinary) {
      ws.close(1003, "text messages only");
      return;
    }
    let msg: unknown;
    try {
      msg = JSON.parse(String(data));
    } catch {
      reject(new ComputerError("EINVAL", "malformed JSON"));
      return;
    }
    const m = msg as { type?: unknown; after?: unknown };
    if (m && m.type === "aui:resume") {
      // Re-subscribe on the same socket from a seq (e.g. after the page reset itself).
      start(typeof m.after === "number" && m.after >= 0 ? Math.floor(m.after) : 0);
      return;
    }
    try {
      ch.postEvent(msg);
    } catch (err) {
      reject(err);
    }
  });
  ws.on("close", () => sub?.unsubscribe());
  ws.on("error", () => sub?.unsubscribe());
}
