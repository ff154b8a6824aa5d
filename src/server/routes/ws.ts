// WebSocket /v1/ws: many executions multiplexed on one socket (docs/api.md).
//
// Client -> server, JSON text messages:
//   {"type":"subscribe","id":"r1","after":0|"tail","heartbeats":true}
//   {"type":"resume","id":"r1","after":41}     (same as subscribe; after required)
//   {"type":"unsubscribe","id":"r1"}          (answered {"id":"r1","name":"unsubscribed"})
//   {"type":"stdin","id":"r1","data":"ls\r"}   (or "b64": bytes; in order per socket)
//   {"type":"resize","id":"r1","cols":120,"rows":40}   (pty executions, routes/pty.ts)
//   {"type":"exec","id":"r1","command":"bash","pty":{"cols":80,"rows":24},"heartbeats":true}
//     (starts execution r1 with the fields of POST /v1/execs, validated by the
//     same function, and subscribes to it from seq 0; it is queued with the
//     stdin/resize messages so input sent right after it reaches the new command)
// Server -> client, text messages holding one or more complete exec-wire lines
// (each ending in "\n"), so a client feeds every message to the same JSONL
// decoder it uses over HTTP. A subscription ends after its exit frame, with
// an `end` extension frame (the stream ended without one: a tail of a
// finished execution), or with an exec-wire error frame carrying its id
// (ENOENT, ELOG_TRUNCATED with earliestSeq, ...). An `exec` that started is
// acknowledged by a `started` extension frame. A bad message gets an error
// frame without id (EINVAL).
// Binary mode: a client that offers the subprotocol BINARY_SUBPROTOCOL gets
// every subscription's events as binary messages of records (wire/ws-binary.ts:
// raw output bytes, no base64); error frames and acknowledgements stay text
// lines. Clients that do not ask get text, as before.
//
// Each subscription is its own pump over the execution's event stream, so a
// slow execution never stalls another. Backpressure is per socket: while
// `bufferedAmount` is over the high-water mark every pump on that socket stops
// reading and resumes when the send callbacks bring it back down.

import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { type WebSocket, WebSocketServer } from "ws";
import type { ExecHandle } from "../../runtime/types.js";
import { ComputerError } from "../../wire/errors.js";
import { encodeErrorFrame } from "../../wire/exec-wire/index.js";
import { type After, parseAfter } from "../../wire/position.js";
import type { ErrorFrame, ExecEvent } from "../../wire/types.js";
import {
  BINARY_SUBPROTOCOL,
  encodeBinaryRecord,
  encodeBinaryRecordHeader,
} from "../../wire/ws-binary.js";
import type { ServerDeps } from "../deps.js";
import { errorFrame } from "../http/errors.js";
import type { Router } from "../http/router.js";
import { keepAlive } from "../streaming/keepalive.js";
import { type ByteSink, pumpEvents } from "../streaming/pump.js";
import { webSocketSink } from "../streaming/sinks.js";
import { openSubscription } from "../streaming/subscribe.js";
import { EXEC_FIELDS, parseExecBody } from "./exec.js";
import { applyTerminalMessage, parseTerminalMessage, TERMINAL_MESSAGE_FIELDS } from "./pty.js";

const MAX_MESSAGE_BYTES = 64 * 1024;
const MESSAGE_FIELDS = [
  "type",
  "id",
  "after",
  "heartbeats",
  ...TERMINAL_MESSAGE_FIELDS,
  ...EXEC_FIELDS,
];

/** A subscribe/resume/unsubscribe/exec message, validated. */
type Message =
  | { type: "unsubscribe"; id: string }
  | { type: "subscribe"; id: string; after: After; heartbeats: boolean }
  | ({ type: "exec"; id: string; heartbeats: boolean } & ReturnType<typeof parseExecBody>);

/** An "exec" message: the POST /v1/execs fields (its `id` is the execution's id) plus heartbeats. */
function parseExecMessage(msg: Record<string, unknown> & { id: string }): Message {
  const { type: _type, heartbeats, ...body } = msg;
  if (heartbeats !== undefined && typeof heartbeats !== "boolean") {
    throw new ComputerError("EINVAL", "heartbeats must be a boolean");
  }
  return { type: "exec", id: msg.id, heartbeats: heartbeats !== false, ...parseExecBody(body) };
}

/** The JSON object of a text message with a non-empty string `id`; EINVAL otherwise. */
function parseEnvelope(data: unknown, isBinary: boolean): Record<string, unknown> & { id: string } {
  if (isBinary) throw new ComputerError("EINVAL", "messages must be JSON text");
  let parsed: unknown;
  try {
    parsed = JSON.parse(String(data));
  } catch {
    throw new ComputerError("EINVAL", "malformed JSON message");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new ComputerError("EINVAL", "message must be a JSON object");
  }
  const msg = parsed as Record<string, unknown>;
  const extra = Object.keys(msg).filter((k) => !MESSAGE_FIELDS.includes(k));
  if (extra.length) throw new ComputerError("EINVAL", `unknown field(s): ${extra.join(", ")}`);
  if (typeof msg.id !== "string" || msg.id === "") {
    throw new ComputerError("EINVAL", "id must be a non-empty string");
  }
  return msg as Record<string, unknown> & { id: string };
}

/** The rest of a message whose envelope is valid; errors belong to that id. */
function parseMessage(msg: Record<string, unknown> & { id: string }): Message {
  if (msg.type === "exec") return parseExecMessage(msg);
  const execOnly = EXEC_FIELDS.filter((k) => k !== "id" && msg[k] !== undefined);
  if (execOnly.length) {
    throw new ComputerError("EINVAL", `field(s) of exec messages only: ${execOnly.join(", ")}`);
  }
  if (msg.type === "unsubscribe") {
    if (msg.after !== undefined || msg.heartbeats !== undefined) {
      throw new ComputerError("EINVAL", "unsubscribe takes only id");
    }
    return { type: "unsubscribe", id: msg.id };
  }
  if (msg.type !== "subscribe" && msg.type !== "resume") {
    throw new ComputerError(
      "EINVAL",
      'type must be "exec", "subscribe", "resume", "unsubscribe", "stdin" or "resize"',
    );
  }
  if (msg.type === "resume" && msg.after === undefined) {
    throw new ComputerError("EINVAL", "resume requires after");
  }
  const after = parseAfter(msg.after);
  if (msg.heartbeats !== undefined && typeof msg.heartbeats !== "boolean") {
    throw new ComputerError("EINVAL", "heartbeats must be a boolean");
  }
  return { type: "subscribe", id: msg.id, after, heartbeats: msg.heartbeats !== false };
}

/**
 * The encoder of one binary-mode subscription: each event is one record
 * (wire/ws-binary.ts). Raw output is a small header (from Node's pool) plus
 * the event's own bytes, joined once into the socket message by the sink:
 * a record per chunk would allocate one more ArrayBuffer per chunk, the churn
 * that costs the server GC time. Not shared between subscribers (the text
 * encoders' fan-out cache is keyed by format).
 */
function binaryEncoder(): { encode(ev: ExecEvent): Uint8Array | Uint8Array[]; close(): void } {
  return {
    encode: (ev) => {
      const header = encodeBinaryRecordHeader(ev, Buffer.allocUnsafe);
      return header ? [header, ev.value as Uint8Array] : encodeBinaryRecord(ev, Buffer.allocUnsafe);
    },
    close() {},
  };
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
    // Binary output records when the client asks for them; otherwise what `ws`
    // does by default (the first protocol offered), so nothing changes for others.
    handleProtocols: (offered: Set<string>) =>
      offered.has(BINARY_SUBPROTOCOL)
        ? BINARY_SUBPROTOCOL
        : (offered.values().next().value ?? false),
  });

  router.upgrade("/v1/ws", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (deps.isClosing()) throw new ComputerError("EUNAVAILABLE", "server is shutting down");
    wss.handleUpgrade(req, socket, head, (ws) => onConnection(ws, req));
  });

  function onConnection(ws: WebSocket, req: IncomingMessage): void {
    req.socket.setNoDelay(true);
    const subs = new Map<string, AbortController>();
    const high = deps.limits.wsHighWaterBytes;
    const binary = ws.protocol === BINARY_SUBPROTOCOL;
    const sink = webSocketSink(ws, high, binary, req.socket);
    /** An extension frame (skipped by exec-wire decoders that do not know it). */
    const sendNotice = (id: string, name: "unsubscribed" | "started" | "end") => {
      if (!sink.closed) ws.send(`${JSON.stringify({ id, name })}\n`, { binary: false });
    };
    const sendFrame = (frame: ErrorFrame) => {
      deps.metrics.errors.inc({ code: frame.code });
      if (!sink.closed) ws.send(encodeErrorFrame(frame), { binary: false });
    };
    keepAlive(ws);
    /** Terminal input and resizes, applied one after another in arrival order. */
    let inputs: Promise<void> = Promise.resolve();

    const unsubscribe = (id: string) => {
      const ac = subs.get(id);
      if (ac) {
        subs.delete(id);
        ac.abort();
      }
    };

    /**
     * Streams one subscription until its end; reports its failure as an error
     * frame with its id. `open` yields the execution (default: look it up).
     */
    const subscribe = async (
      id: string,
      after: After,
      heartbeats: boolean,
      open: () => Promise<ExecHandle> = () => deps.computer.get(id),
    ) => {
      unsubscribe(id); // re-subscribing is a resume: the new position wins
      const ac = new AbortController();
      subs.set(id, ac);
      try {
        const handle = await open();
        const sub = await openSubscription(deps, handle, {
          after,
          heartbeats,
          signal: ac.signal,
          transport: "ws",
        });
        const encoder = binary ? binaryEncoder() : deps.encoders.open("ndjson", id);
        try {
          if (ac.signal.aborted) {
            sub.stream.cancel().catch(() => {});
            return;
          }
          const subSink: ByteSink = {
            get closed() {
              return sink.closed || ac.signal.aborted;
            },
            write: sink.write,
            drained: sink.drained,
          };
          const end = await pumpEvents(sub.stream, subSink, {
            encode: encoder.encode,
            batchBytes: high / 4,
            onBytes: (n) => deps.metrics.bytesStreamed.inc({ transport: "ws" }, n),
          });
          if (end.kind === "error") throw end.error;
          // Ended without an exit frame (a tail of a finished execution): say so,
          // or the client could not tell it from a subscription still waiting.
          if (end.kind === "eof" && !ac.signal.aborted) sendNotice(id, "end");
        } finally {
          encoder.close();
          sub.release();
        }
      } catch (err) {
        // Aborted by the client (unsubscribe, a newer subscribe/resume of the
        // same id, or the socket closed): the subscription ends silently. An
        // EABORTED frame here would reach the client under the id of its new
        // subscription and read as that one failing.
        if (!ac.signal.aborted) sendFrame(errorFrame(id, err));
      } finally {
        if (subs.get(id) === ac) subs.delete(id);
      }
    };

    ws.on("message", (data, isBinary) => {
      let envelope: Record<string, unknown> & { id: string };
      try {
        envelope = parseEnvelope(data, isBinary);
      } catch (err) {
        sendFrame(errorFrame(undefined, err));
        return;
      }
      const id = envelope.id;
      try {
        const input = parseTerminalMessage(envelope);
        if (input) {
          inputs = inputs.then(() =>
            applyTerminalMessage(deps, input).catch((err) => sendFrame(errorFrame(id, err))),
          );
          return;
        }
        const msg = parseMessage(envelope);
        if (msg.type === "unsubscribe") {
          unsubscribe(id);
          // Acknowledged with an extension frame (an unknown name with an id,
          // which exec-wire decoders skip), never an error frame: after it no
          // frame of that subscription follows.
          sendNotice(id, "unsubscribed");
          return;
        }
        if (msg.type === "exec") {
          if (deps.isClosing()) throw new ComputerError("EUNAVAILABLE", "server is shutting down");
          const { spec, options } = msg;
          // Started in the input queue: stdin/resize sent after it find the command.
          const started = inputs.then(() =>
            deps.computer.exec(spec, { ...options, id, awaitReader: true }),
          );
          inputs = started.then(
            () => sendNotice(id, "started"),
            () => {},
          );
          void subscribe(id, 0, msg.heartbeats, () => started);
          return;
        }
        void subscribe(id, msg.after, msg.heartbeats);
      } catch (err) {
        sendFrame(errorFrame(id, err));
      }
    });

    ws.on("close", () => {
      sink.close();
      for (const id of [...subs.keys()]) unsubscribe(id);
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
