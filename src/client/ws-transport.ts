// The SDK's websocket transport (`transport: "websocket"`): every execution
// the client starts or follows is a subscription multiplexed on one socket to
// /v1/ws (docs/api.md, "WebSocket /v1/ws").
//
// Shape decisions:
// - Resuming is not done here: each subscription is one "connection" of the
//   project's resume loop (wire/resume.ts), opened by `subscribe(id, after)`.
//   When the socket drops, every subscription on it fails with ENETWORK; each
//   loop reconnects (the first opens a new socket, the others join it) and
//   resumes after its last seq, exactly as over HTTP.
// - Binary records (wire/ws-binary.ts) are asked for by subprotocol; text
//   messages (error frames, acknowledgements, or everything from a server
//   that does not speak binary) are decoded too, so either answer works.
// - Routing follows the documented rule: each line or record goes to the
//   subscription of its id, an error frame ends that subscription only.
// - The server keys subscriptions by id per socket, so an id is never on one
//   socket twice: a second follower of the same execution (or one whose
//   unsubscribe is not yet acknowledged, whose frames may still arrive) gets
//   another socket of the pool. Extra sockets close once empty.
// - Backpressure: a multiplexed socket cannot stop one subscription, so when
//   the events queued for consumers pass HIGH_WATER bytes the socket is
//   paused (Node), the server's pumps stop on its bufferedAmount, and the
//   commands wait, as with an unread HTTP stream. Browsers cannot pause a
//   WebSocket: there the queue grows with a consumer that stops reading.

import { ComputerError, toErrorCode } from "../wire/errors.js";
import { decodeExecFrame } from "../wire/exec-wire/decode.js";
import { ExecWireDecoder, ExecWireError } from "../wire/exec-wire/index.js";
import { type BatchQueue, batchQueue } from "../wire/resume.js";
import type { ExecEvent } from "../wire/types.js";
import { BINARY_SUBPROTOCOL, decodeBinaryMessage } from "../wire/ws-binary.js";
import { defaultWebSocketFactory, type WebSocketFactory, type WsLike } from "./ws-socket.js";

const HIGH_WATER = 8 * 1024 * 1024;
const LOW_WATER = 2 * 1024 * 1024;
/** An empty primary socket closes after this long without subscriptions. */
const IDLE_CLOSE_MS = 2000;

export interface WsTransportOptions {
  /** Base URL of the server (http or https). */
  url: string;
  /** Headers for the upgrade (authorization among them). */
  headers: Record<string, string>;
  webSocket?: WebSocketFactory;
  /** Ask for binary records (default true). */
  binary?: boolean;
}

/** The events of one subscription from its first frame, until the resume loop leaves it. */
export interface OpenedSubscription {
  /** The subscription as a connection of the resume loop; `heartbeats: false` filters them out. */
  take(heartbeats: boolean, signal: AbortSignal): AsyncIterable<ExecEvent[]>;
  /** Stops it (the handle will not read it). */
  release(): void;
}

interface Deferred {
  resolve(): void;
  reject(err: unknown): void;
}

/** One subscription on one socket. */
interface Sub {
  id: string;
  socket: Socket;
  queue: BatchQueue<ExecEvent>;
  heartbeats: boolean;
  /** Bytes of output queued, not yet taken by the resume loop. */
  bytes: number;
  /** An exec waiting for its start to be confirmed. */
  start?: Deferred;
}

interface Socket {
  ws: WsLike;
  opened: Promise<void>;
  open: boolean;
  closed: boolean;
  subs: Map<string, Sub>;
  /**
   * Ids unsubscribed whose acknowledgement has not arrived (their frames may
   * still come), each with a promise settled by the acknowledgement or the close.
   */
  leaving: Map<string, { done: Promise<void>; settle(): void }>;
  queuedBytes: number;
  paused: boolean;
  idleTimer?: ReturnType<typeof setTimeout>;
}

const sizeOf = (ev: ExecEvent) =>
  ev.name === "stdout" || ev.name === "stderr" ? ev.value.length + 64 : 64;

export class WsTransport {
  private readonly sockets: Socket[] = [];
  private readonly wsUrl: string;
  private factory: Promise<WebSocketFactory> | undefined;

  constructor(private readonly options: WsTransportOptions) {
    const u = new URL(`${options.url}/v1/ws`);
    u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
    this.wsUrl = u.href;
  }

  /**
   * Starts execution `id` with the fields of POST /v1/execs (the `exec`
   * message) and subscribes to it from seq 0 in the same message. Resolves
   * once the server confirmed the start; rejects with its error (EINVAL,
   * EEXEC_BUSY, …) otherwise.
   */
  async exec(id: string, body: Record<string, unknown>): Promise<OpenedSubscription> {
    const socket = await this.socketFor(id);
    const sub = this.register(socket, id, true);
    const started = new Promise<void>((resolve, reject) => {
      sub.start = { resolve, reject };
    });
    socket.ws.send(JSON.stringify({ ...body, type: "exec", id, heartbeats: true }));
    try {
      await started;
    } catch (err) {
      this.leave(sub);
      this.forget(sub);
      throw err;
    }
    let taken = false;
    return {
      take: (heartbeats, signal) => {
        taken = true;
        sub.heartbeats = heartbeats;
        this.onAbort(sub, signal);
        return this.iterable(sub);
      },
      release: () => {
        if (taken) return;
        this.leave(sub);
        this.forget(sub); // its queued events will never be read
      },
    };
  }

  /** One connection of the resume loop: subscribe (or resume) `id` after `after`. */
  async subscribe(
    id: string,
    after: number,
    heartbeats: boolean,
    signal: AbortSignal,
  ): Promise<AsyncIterable<ExecEvent[]>> {
    const socket = await this.socketFor(id);
    if (signal.aborted) throw new ComputerError("EABORTED", "aborted");
    const sub = this.register(socket, id, heartbeats);
    this.onAbort(sub, signal);
    socket.ws.send(
      JSON.stringify(
        after > 0
          ? { type: "resume", id, after, heartbeats }
          : { type: "subscribe", id, after: 0, heartbeats },
      ),
    );
    return this.iterable(sub);
  }

  /** Closes every socket; later calls open new ones only if the client is used again. */
  close(): void {
    for (const s of [...this.sockets]) s.ws.close(1000, "client closed");
  }

  // ---- subscriptions -----------------------------------------------------------

  private register(socket: Socket, id: string, heartbeats: boolean): Sub {
    const sub: Sub = { id, socket, queue: batchQueue<ExecEvent>(), heartbeats, bytes: 0 };
    socket.subs.set(id, sub);
    if (socket.idleTimer) clearTimeout(socket.idleTimer);
    socket.idleTimer = undefined;
    socket.ws.setIdle?.(false);
    return sub;
  }

  private onAbort(sub: Sub, signal: AbortSignal): void {
    if (signal.aborted) this.leave(sub);
    else signal.addEventListener("abort", () => this.leave(sub), { once: true });
  }

  /** The resume loop left this subscription: stop the server's side if it is still streaming. */
  private leave(sub: Sub): void {
    const { socket } = sub;
    if (socket.subs.get(sub.id) !== sub) return;
    const streaming = !sub.queue.settled;
    this.forget(sub);
    sub.queue.end();
    if (streaming && socket.open && !socket.leaving.has(sub.id)) {
      let settle!: () => void;
      const done = new Promise<void>((r) => (settle = r));
      socket.leaving.set(sub.id, { done, settle });
      socket.ws.send(JSON.stringify({ type: "unsubscribe", id: sub.id }));
    }
    this.maybeIdle(socket);
  }

  /** Removes `sub` from its socket's routing and gives back its queued bytes. */
  private forget(sub: Sub): void {
    const { socket } = sub;
    if (socket.subs.get(sub.id) === sub) socket.subs.delete(sub.id);
    this.account(socket, -sub.bytes);
    sub.bytes = 0;
  }

  /** The subscription's queue as the resume loop reads it, releasing its bytes as batches are taken. */
  private iterable(sub: Sub): AsyncIterable<ExecEvent[]> {
    const inner = sub.queue[Symbol.asyncIterator]();
    return {
      [Symbol.asyncIterator]: () => ({
        next: async () => {
          const r = await inner.next();
          if (!r.done) {
            let n = 0;
            for (const ev of r.value) n += sizeOf(ev);
            n = Math.min(n, sub.bytes);
            sub.bytes -= n;
            this.account(sub.socket, -n);
          }
          return r;
        },
        return: async () => {
          this.leave(sub);
          this.forget(sub);
          return inner.return?.() ?? { value: undefined, done: true };
        },
      }),
    };
  }

  /** Tracks bytes queued on a socket; pauses / resumes reading it at the marks. */
  private account(socket: Socket, delta: number): void {
    socket.queuedBytes += delta;
    if (!socket.ws.pause || socket.closed) return;
    if (!socket.paused && socket.queuedBytes > HIGH_WATER) {
      socket.paused = true;
      socket.ws.pause();
    } else if (socket.paused && socket.queuedBytes <= LOW_WATER) {
      socket.paused = false;
      socket.ws.resume?.();
    }
  }

  // ---- sockets -----------------------------------------------------------------

  /**
   * An open socket on which `id` is free: the first of the pool where it is
   * not subscribed (waiting for a pending unsubscribe of it to be
   * acknowledged), else a new one. Concurrent callers share one opening.
   */
  private async socketFor(id: string): Promise<Socket> {
    for (;;) {
      const s = this.sockets.find((x) => !x.closed && !x.subs.has(id)) ?? (await this.newSocket());
      await s.opened;
      const leaving = s.leaving.get(id);
      if (leaving) await leaving.done;
      else if (!s.closed && !s.subs.has(id)) return s;
    }
  }

  private opening: Promise<Socket> | undefined;

  /** Opens one more socket; callers that arrive while it is being created share it. */
  private newSocket(): Promise<Socket> {
    if (!this.opening) {
      this.opening = this.openSocket().finally(() => {
        this.opening = undefined;
      });
    }
    return this.opening;
  }

  private async openSocket(): Promise<Socket> {
    this.factory ??= this.options.webSocket
      ? Promise.resolve(this.options.webSocket)
      : defaultWebSocketFactory();
    const factory = await this.factory;
    let resolveOpen!: () => void;
    let rejectOpen!: (err: unknown) => void;
    const opened = new Promise<void>((resolve, reject) => {
      resolveOpen = resolve;
      rejectOpen = reject;
    });
    opened.catch(() => {});
    let error: ComputerError | undefined;
    const socket: Socket = {
      ws: undefined as unknown as WsLike,
      opened,
      open: false,
      closed: false,
      subs: new Map(),
      leaving: new Map(),
      queuedBytes: 0,
      paused: false,
    };
    const protocols = this.options.binary === false ? [] : [BINARY_SUBPROTOCOL];
    socket.ws = factory(this.wsUrl, protocols, this.options.headers, {
      onOpen: () => {
        socket.open = true;
        resolveOpen();
      },
      onMessage: (data, binary) => this.route(socket, data, binary),
      onError: (err) => {
        error ??= err;
      },
      onClose: () => {
        socket.open = false;
        socket.closed = true;
        if (socket.idleTimer) clearTimeout(socket.idleTimer);
        const i = this.sockets.indexOf(socket);
        if (i >= 0) this.sockets.splice(i, 1);
        const cut = error ?? new ComputerError("ENETWORK", "the WebSocket closed");
        rejectOpen(cut);
        for (const l of socket.leaving.values()) l.settle();
        socket.leaving.clear();
        for (const sub of [...socket.subs.values()]) this.fail(sub, cut);
      },
    });
    this.sockets.push(socket);
    return socket;
  }

  /** Closes a socket that has nothing left to carry: extra ones at once, the first after a pause. */
  private maybeIdle(socket: Socket): void {
    if (socket.closed || socket.subs.size > 0) return;
    socket.ws.setIdle?.(true);
    if (socket.leaving.size > 0) return; // closed once the acknowledgements are in
    if (this.sockets[0] !== socket) {
      socket.ws.close(1000, "idle");
      return;
    }
    if (socket.idleTimer) return;
    socket.idleTimer = setTimeout(() => {
      socket.idleTimer = undefined;
      if (socket.subs.size === 0) socket.ws.close(1000, "idle");
    }, IDLE_CLOSE_MS);
    (socket.idleTimer as { unref?: () => void }).unref?.();
  }

  // ---- routing -----------------------------------------------------------------

  private route(socket: Socket, data: string | Uint8Array, binary: boolean): void {
    let events: ExecEvent[] = [];
    const notices: { id: string; name: string }[] = [];
    const onUnknownFrame = (frame: Record<string, unknown>) => {
      notices.push({ id: String(frame.id), name: String(frame.name) });
    };
    try {
      if (binary) events = decodeBinaryMessage(data as Uint8Array, { onUnknownFrame });
      else if (typeof data === "string") {
        for (const line of data.split("\n")) {
          if (line === "") continue;
          const ev = decodeExecFrame(line, { onUnknownFrame });
          if (ev) events.push(ev);
        }
      } else {
        const decoder = new ExecWireDecoder({ onUnknownFrame });
        events = decoder.push(data as Uint8Array);
        events.push(...decoder.end());
      }
    } catch (err) {
      const before = (err as { events?: ExecEvent[] }).events ?? events;
      this.deliver(socket, before);
      this.onNotices(socket, notices);
      const frameId =
        err instanceof ExecWireError && typeof err.frame?.id === "string"
          ? err.frame.id
          : undefined;
      const e = err instanceof ComputerError ? err : new ComputerError("EINVAL", String(err));
      if (frameId !== undefined) {
        const sub = socket.subs.get(frameId);
        if (sub) this.fail(sub, remoteError(e));
      } else if (!(err instanceof ExecWireError && err.frame)) {
        // Malformed output from the server: nothing on this socket can be trusted.
        for (const sub of [...socket.subs.values()]) this.fail(sub, e);
        socket.ws.close(1002, "malformed message");
      }
      // An error frame without id answers a malformed message of ours: nothing to route.
      return;
    }
    this.deliver(socket, events);
    this.onNotices(socket, notices);
  }

  private deliver(socket: Socket, events: ExecEvent[]): void {
    let sub: Sub | undefined;
    for (const ev of events) {
      if (sub?.id !== ev.id) sub = socket.subs.get(ev.id);
      if (!sub) continue; // an id we no longer follow
      if (sub.start) {
        sub.start.resolve();
        sub.start = undefined;
      }
      if (ev.name === "heartbeat" && !sub.heartbeats) continue;
      const n = sizeOf(ev);
      sub.bytes += n;
      sub.queue.push(ev);
      this.account(socket, n);
      if (ev.name === "exit") {
        // The server's subscription is over: the id is free on this socket.
        sub.queue.end();
        socket.subs.delete(sub.id);
        sub = undefined;
        this.maybeIdle(socket);
      }
    }
  }

  private onNotices(socket: Socket, notices: { id: string; name: string }[]): void {
    for (const { id, name } of notices) {
      if (name === "unsubscribed") {
        socket.leaving.get(id)?.settle();
        socket.leaving.delete(id);
        this.maybeIdle(socket);
        continue;
      }
      const sub = socket.subs.get(id);
      if (!sub) continue;
      if (name === "started" && sub.start) {
        sub.start.resolve();
        sub.start = undefined;
      } else if (name === "end") {
        // The stream ended without an exit frame; the resume loop asks the record why.
        socket.subs.delete(id);
        sub.queue.end();
        this.maybeIdle(socket);
      }
    }
  }

  private fail(sub: Sub, err: ComputerError): void {
    if (sub.socket.subs.get(sub.id) === sub) sub.socket.subs.delete(sub.id);
    sub.start?.reject(err);
    sub.start = undefined;
    sub.queue.fail(err);
    this.maybeIdle(sub.socket);
  }
}

/** An error frame as the SDK's error (its code, message and earliestSeq). */
function remoteError(err: ComputerError): ComputerError {
  const frame = (err as ExecWireError).frame;
  if (!frame) return err;
  return new ComputerError(
    toErrorCode(frame.code),
    typeof frame.message === "string" ? frame.message : err.message,
    typeof frame.earliestSeq === "number" ? { earliestSeq: frame.earliestSeq } : undefined,
  );
}
