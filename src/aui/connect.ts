// connectAAtUI: feeds a widget runtime from a relay channel over SSE, WebSocket
// or HTTP (long-)polling, and sends the runtime's UI events back, reconnecting
// and resuming until aborted.
//
// Shape decisions:
// - The reconnecting is the project's one resume loop (src/wire/resume.ts);
//   this file only plugs in the three transports and the page's policies.
// - One cursor per connection, advanced only after a command was dispatched
//   (or when the server says where its replay ended). Every reconnect asks for
//   "after cursor" (SSE `Last-Event-ID`, WebSocket `?after=`, poll `?after=`),
//   so a command is neither repeated nor skipped across reconnects. Positions
//   may skip (compaction merges updates), so there is no gap check.
// - Each command's stream position goes to `runtime.dispatch` so a runtime
//   built with `relayWidgetId` mints `w<position>`, the id the relay already
//   told the agent.
// - 410 (`ELOG_TRUNCATED`: the relay no longer has what came after our cursor,
//   or it restarted) is not an error for the person looking at the page: the
//   runtime is reset and the channel replayed from its current state.
// - 401/403 are final (retrying cannot fix a token) and reported with a reason
//   the page can show. A browser WebSocket cannot see an upgrade's HTTP status,
//   so after a failed open we ask the poll route once to learn it. Anything
//   else is reported and retried for as long as the page is open.
// - Web standards only (fetch, WebSocket, AbortSignal); Node passes `WebSocket`
//   from `ws` when it has no global one.

import { ComputerError, errorFromResponse } from "../wire/errors.js";
import { batchQueue, resumable } from "../wire/resume.js";
import { AAtUIStreamConsumer } from "./consume.js";
import type { AAtUIRuntime } from "./runtime.js";
import type { Command, UiEvent } from "./types.js";

export type AAtUITransport = "sse" | "websocket" | "poll";

export type ConnectionState =
  | "connecting"
  | "open"
  | "reconnecting"
  | "done"
  | "closed"
  | "unauthorized";

export interface TransportError {
  source: "transport" | "stream";
  code: string;
  message: string;
  /** HTTP status when one was received. */
  status?: number;
  raw?: string;
}

/** Minimal WebSocket constructor shape (browser global or the `ws` package). */
export type WebSocketCtor = new (url: string, protocols?: string | string[]) => WebSocket;

export interface ConnectOptions {
  transport?: AAtUITransport;
  /** Bearer token; omit in a page that authenticated with the cookie. */
  token?: string;
  signal?: AbortSignal;
  /** Start after this cursor (default 0: the channel's current state). */
  after?: number;
  fetch?: typeof fetch;
  WebSocket?: WebSocketCtor;
  /** Long-poll wait in ms (default 25,000). */
  pollWaitMs?: number;
  /** Reconnect delay bounds in ms (default 100 .. 5,000, doubling). */
  minRetryMs?: number;
  maxRetryMs?: number;
  onState?: (state: ConnectionState, detail?: TransportError) => void;
  onError?: (error: TransportError) => void;
}

export interface AAtUIConnection {
  /** Sends a UI event to the channel (over the socket when open, else POST). In order. */
  send(event: UiEvent): Promise<void>;
  /** The last stream position applied. */
  readonly cursor: number;
  readonly state: ConnectionState;
  /** Resolves when the channel ended (`[DONE]`), the signal aborted, or auth failed. */
  readonly closed: Promise<ConnectionState>;
  close(): void;
}

/** What a connection yields: a command at its stream position, a bare position (where a replay ended), or the end. */
type Item =
  | { kind: "command"; command: unknown; position: number | undefined }
  | { kind: "position"; position: number }
  | { kind: "done" };

const DONE: Item = { kind: "done" };

/** A position from the wire, when it is one (an SSE id is text; anything else is ignored). */
function positionOf(value: unknown): number | undefined {
  const n = typeof value === "string" && value !== "" ? Number(value) : value;
  return typeof n === "number" && Number.isSafeInteger(n) ? n : undefined;
}

/**
 * Connects `runtime` to a relay channel. `url` is the channel's base URL,
 * e.g. `http://127.0.0.1:7070/v1/ui/default` (relative URLs work in a page).
 */
export function connectAAtUI(
  url: string,
  runtime: AAtUIRuntime,
  options: ConnectOptions = {},
): AAtUIConnection {
  const transport = options.transport ?? "sse";
  const doFetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  const base = new URL(url, (globalThis as { location?: Location }).location?.href).href.replace(
    /\/+$/,
    "",
  );
  const inner = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, inner.signal]) : inner.signal;
  const headers: Record<string, string> = {};
  if (options.token) headers.authorization = `Bearer ${options.token}`;

  let cursor = options.after ?? 0;
  let state: ConnectionState = "connecting";
  let socket: WebSocket | undefined;
  let sendChain: Promise<void> = Promise.resolve();
  let resolveClosed!: (s: ConnectionState) => void;
  const closed = new Promise<ConnectionState>((r) => (resolveClosed = r));
  /** Errors built from an HTTP answer: only these report a `status`. */
  const answered = new WeakSet<object>();

  const setState = (s: ConnectionState, detail?: TransportError) => {
    if (state === s) return;
    state = s;
    options.onState?.(s, detail);
  };
  const report = (e: TransportError) => options.onError?.(e);

  const httpError = async (res: Response): Promise<ComputerError> => {
    const e = await errorFromResponse(res);
    answered.add(e);
    return e;
  };
  const transportError = (e: ComputerError): TransportError => ({
    source: "transport",
    code: e.code,
    message: e.message,
    ...(answered.has(e) ? { status: e.status } : {}),
  });

  // ---- one connection per transport: an async iterable of item batches ----

  async function sse(after: number, connSignal: AbortSignal): Promise<AsyncIterable<Item[]>> {
    const h: Record<string, string> = { ...headers, accept: "text/event-stream" };
    if (after > 0) h["last-event-id"] = String(after);
    const res = await doFetch(`${base}/stream`, {
      headers: h,
      signal: connSignal,
      credentials: "same-origin",
      cache: "no-store",
    });
    if (!res.ok) throw await httpError(res);
    if (!res.body) throw new ComputerError("ENETWORK", "event stream response has no body");
    return sseItems(res.body);
  }

  async function* sseItems(body: ReadableStream<Uint8Array>): AsyncGenerator<Item[]> {
    let batch: Item[] = [];
    const take = () => {
      const b = batch;
      batch = [];
      return b;
    };
    const consumer = new AAtUIStreamConsumer({
      dispatch: (command: Command, meta) => {
        batch.push({ kind: "command", command, position: positionOf(meta.position) });
      },
      handleError: (error, context) => {
        report({ source: "stream", code: error.code, message: error.message, raw: context.raw });
      },
      onPosition: (id) => {
        const position = positionOf(id);
        if (position !== undefined) batch.push({ kind: "position", position });
      },
    });
    const reader = body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) {
          consumer.end();
          if (batch.length > 0) yield take();
          return; // cut without [DONE]: reconnect
        }
        if (consumer.push(value)) {
          batch.push(DONE);
          yield take();
          return;
        }
        if (batch.length > 0) yield take();
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  async function poll(after: number, connSignal: AbortSignal): Promise<AsyncIterable<Item[]>> {
    const once = async (wait: number) => {
      const res = await doFetch(`${base}/poll?after=${after}&wait=${wait}`, {
        headers: { ...headers, accept: "application/json" },
        signal: connSignal,
        credentials: "same-origin",
        cache: "no-store",
      });
      if (!res.ok) throw await httpError(res);
      return (await res.json()) as {
        commands?: unknown[];
        positions?: number[];
        cursor?: number;
        done?: boolean;
      };
    };
    const itemsOf = (body: Awaited<ReturnType<typeof once>>): Item[] => {
      const batch: Item[] = [];
      const commands = Array.isArray(body.commands) ? body.commands : [];
      for (let i = 0; i < commands.length; i++) {
        const position = positionOf(body.positions?.[i]);
        batch.push({ kind: "command", command: commands[i], position });
        if (position !== undefined && position > after) after = position;
      }
      const position = positionOf(body.cursor);
      if (position !== undefined) {
        batch.push({ kind: "position", position });
        if (position > after) after = position;
      }
      if (body.done) batch.push(DONE);
      return batch;
    };
    // Asks for what follows as soon as an answer came, while the page applies
    // it: a long-poll is always waiting at the relay (so a channel's end, or a
    // command, reaches the page at once). Polling has no backpressure to keep.
    const ask = (batch: Item[]) => {
      if (batch.at(-1) === DONE) return undefined;
      const p = once(options.pollWaitMs ?? 25_000);
      p.catch(() => {}); // awaited below, unless the loop leaves first
      return p;
    };
    // The first answer (no wait) is what "open" means for polling.
    let batch = itemsOf(await once(0));
    let next = ask(batch);
    return (async function* () {
      for (;;) {
        if (batch.length > 0) yield batch;
        if (!next) return;
        batch = itemsOf(await next);
        next = ask(batch);
      }
    })();
  }

  function websocket(after: number, connSignal: AbortSignal): Promise<AsyncIterable<Item[]>> {
    const Ctor = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketCtor }).WebSocket;
    if (!Ctor)
      return Promise.reject(
        new ComputerError("EUNSUPPORTED", "no WebSocket implementation: pass options.WebSocket"),
      );
    const wsUrl = new URL(`${base}/ws`);
    wsUrl.protocol = wsUrl.protocol === "https:" ? "wss:" : "ws:";
    wsUrl.searchParams.set("after", String(after));
    wsUrl.searchParams.set("cursors", "1");
    // Browsers cannot set headers on a WebSocket: the token goes in the query (or the cookie does it).
    if (options.token) wsUrl.searchParams.set("token", options.token);
    return new Promise((resolve, reject) => {
      const ws = new Ctor(wsUrl.href);
      socket = ws;
      const queue = batchQueue<Item>();
      let opened = false;
      const onAbort = () => ws.close(1000, "closed by page");
      connSignal.addEventListener("abort", onAbort, { once: true });
      ws.onopen = () => {
        opened = true;
        resolve(queue);
      };
      ws.onmessage = (msg: MessageEvent) => {
        const text = typeof msg.data === "string" ? msg.data : String(msg.data);
        if (text === "[DONE]") {
          queue.push(DONE);
          queue.end();
          ws.close(1000);
          return;
        }
        let value: {
          cursor?: number;
          command?: unknown;
          error?: { code: string; message: string };
        };
        try {
          value = JSON.parse(text);
        } catch {
          report({ source: "stream", code: "EJSON", message: "malformed JSON message", raw: text });
          return;
        }
        if (value && typeof value === "object" && value.error) {
          report({ source: "transport", code: value.error.code, message: value.error.message });
          return;
        }
        if (value && typeof value === "object" && "command" in value)
          queue.push({
            kind: "command",
            command: value.command,
            position: positionOf(value.cursor),
          });
        else queue.push({ kind: "command", command: value, position: undefined });
      };
      ws.onclose = (ev: CloseEvent) => {
        connSignal.removeEventListener("abort", onAbort);
        if (socket === ws) socket = undefined;
        if (ev.code === 4410) {
          const e = new ComputerError("ELOG_TRUNCATED", ev.reason || "cursor no longer held", {
            status: 410,
          });
          if (opened) queue.fail(e);
          else reject(e);
          return;
        }
        if (opened) {
          queue.end(); // cut without [DONE] (or after it): the loop decides
          return;
        }
        // Learn why the upgrade failed (401? 403? 410?) from the poll route's status.
        doFetch(`${base}/poll?after=${after}`, {
          headers,
          signal: connSignal,
          credentials: "same-origin",
        })
          .then(async (res) => {
            reject(
              res.ok
                ? new ComputerError("ENETWORK", "WebSocket failed to open")
                : await httpError(res),
            );
          })
          .catch(reject);
      };
      ws.onerror = () => {
        // onclose follows and decides.
      };
    });
  }

  const stream = resumable<Item>({
    after: cursor,
    connect: transport === "sse" ? sse : transport === "poll" ? poll : websocket,
    seqOf: (item) => (item.kind === "done" ? undefined : item.position),
    isEnd: (item) => item.kind === "done",
    // Compaction merges updates away: positions may skip.
    gapFree: false,
    // A page keeps trying for as long as it is open; only a refused token is final.
    retry: {
      maxRetries: Number.POSITIVE_INFINITY,
      initialDelayMs: options.minRetryMs ?? 100,
      maxDelayMs: options.maxRetryMs ?? 5000,
    },
    retryable: (e) => e.status !== 401 && e.status !== 403,
    // The relay lost our place (or restarted): start over from its current state.
    onTruncated: () => {
      runtime.reset();
      cursor = 0;
      return 0;
    },
    signal,
    onState: (s, error) => {
      if (s === "open") return setState("open");
      if (error) report(transportError(error));
      setState("reconnecting");
    },
  });

  async function run() {
    const reader = stream.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return setState("done");
        if (value.kind === "command")
          runtime.dispatch(
            value.command,
            value.position === undefined ? undefined : { position: value.position },
          );
        if (value.kind !== "done" && value.position !== undefined && value.position > cursor)
          cursor = value.position;
      }
    } catch (err) {
      const e = err as ComputerError;
      if (signal.aborted || e.code === "EABORTED") return setState("closed");
      if (e.status === 401 || e.status === 403) {
        const detail = { ...transportError(e), status: e.status };
        report(detail);
        return setState("unauthorized", detail);
      }
      report(transportError(e));
      setState("closed");
    }
  }

  run()
    .catch((err) => report({ source: "transport", code: "EINTERNAL", message: String(err) }))
    .finally(() => resolveClosed(state));

  return {
    send(event) {
      const next = sendChain.then(async () => {
        const ws = socket;
        if (ws && ws.readyState === 1) {
          ws.send(JSON.stringify(event));
          return;
        }
        const res = await doFetch(`${base}/events`, {
          method: "POST",
          headers: { ...headers, "content-type": "application/json" },
          body: JSON.stringify(event),
          credentials: "same-origin",
        });
        if (!res.ok) {
          const e = await errorFromResponse(res);
          report({
            source: "transport",
            code: e.code,
            message: `UI event not delivered: ${e.message}`,
            status: e.status,
          });
        }
      });
      sendChain = next.catch(() => {});
      return next;
    },
    get cursor() {
      return cursor;
    },
    get state() {
      return state;
    },
    closed,
    close() {
      inner.abort();
    },
  };
}
