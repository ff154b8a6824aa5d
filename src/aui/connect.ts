// connectAAtUI: feeds a widget runtime from a relay channel over SSE, WebSocket
// or HTTP (long-)polling, and sends the runtime's UI events back, reconnecting
// and resuming until aborted.
//
// Shape decisions:
// - One cursor per connection, advanced only after a command was dispatched
//   (or when the server says where its replay ended). Every reconnect asks for
//   "after cursor" (SSE `Last-Event-ID`, WebSocket `?after=`, poll `?after=`),
//   so a command is neither repeated nor skipped across reconnects.
// - Each command's stream position goes to `runtime.dispatch` so a runtime
//   built with `relayWidgetId` mints `w<position>`, the id the relay already
//   told the agent.
// - 410 (`ELOG_TRUNCATED`: the relay no longer has what came after our cursor,
//   or it restarted) is not an error for the person looking at the page: the
//   runtime is reset and the channel replayed from its current state.
// - 401/403 are final (retrying cannot fix a token) and reported with a reason
//   the page can show. A browser WebSocket cannot see an upgrade's HTTP status,
//   so after a failed open we ask the poll route once to learn it.
// - Web standards only (fetch, WebSocket, AbortSignal); Node passes `WebSocket`
//   from `ws` when it has no global one.

import { consumeAAtUIStream } from "./consume.js";
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

class HttpStatusError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

async function statusError(res: Response): Promise<HttpStatusError> {
  let code = `HTTP_${res.status}`;
  let message = `HTTP ${res.status}`;
  try {
    const body = (await res.json()) as { error?: { code?: string; message?: string } };
    if (body?.error?.code) code = body.error.code;
    if (body?.error?.message) message = body.error.message;
  } catch {
    // not JSON: keep the status
  }
  return new HttpStatusError(res.status, code, message);
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
  const minRetry = options.minRetryMs ?? 100;
  const maxRetry = options.maxRetryMs ?? 5000;
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

  const setState = (s: ConnectionState, detail?: TransportError) => {
    if (state === s) return;
    state = s;
    options.onState?.(s, detail);
  };
  const report = (e: TransportError) => options.onError?.(e);

  const apply = (command: unknown, position: number | undefined) => {
    runtime.dispatch(command, position === undefined ? undefined : { position });
    if (position !== undefined && position > cursor) cursor = position;
  };

  /** The relay lost our place (or restarted): start over from its current state. */
  const restart = () => {
    runtime.reset();
    cursor = 0;
  };

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        signal.removeEventListener("abort", done);
        resolve();
      }
      signal.addEventListener("abort", done, { once: true });
    });

  // ---- one attempt per transport; each returns "done" or throws ----

  async function sseOnce(onOpen: () => void): Promise<"done" | "end"> {
    const h: Record<string, string> = { ...headers, accept: "text/event-stream" };
    if (cursor > 0) h["last-event-id"] = String(cursor);
    const res = await doFetch(`${base}/stream`, {
      headers: h,
      signal,
      credentials: "same-origin",
      cache: "no-store",
    });
    if (!res.ok || !res.body) throw await statusError(res);
    onOpen();
    const result = await consumeAAtUIStream(res.body, {
      dispatch: (command: Command, meta) => {
        apply(command, meta.position === undefined ? undefined : Number(meta.position));
      },
      handleError: (error, context) => {
        report({ source: "stream", code: error.code, message: error.message, raw: context.raw });
      },
      onPosition: (id) => {
        const n = Number(id);
        if (Number.isSafeInteger(n) && n > cursor) cursor = n;
      },
    });
    return result.reason;
  }

  async function pollOnce(onOpen: () => void): Promise<"done" | "end"> {
    let opened = false;
    for (;;) {
      if (signal.aborted) return "end";
      const wait = opened ? (options.pollWaitMs ?? 25_000) : 0;
      const res = await doFetch(`${base}/poll?after=${cursor}&wait=${wait}`, {
        headers: { ...headers, accept: "application/json" },
        signal,
        credentials: "same-origin",
        cache: "no-store",
      });
      if (!res.ok) throw await statusError(res);
      const body = (await res.json()) as {
        commands?: unknown[];
        positions?: number[];
        cursor?: number;
        done?: boolean;
      };
      if (!opened) {
        opened = true;
        onOpen();
      }
      const commands = Array.isArray(body.commands) ? body.commands : [];
      for (let i = 0; i < commands.length; i++) apply(commands[i], body.positions?.[i]);
      if (typeof body.cursor === "number" && body.cursor > cursor) cursor = body.cursor;
      if (body.done) return "done";
    }
  }

  function wsOnce(onOpen: () => void): Promise<"done" | "end"> {
    const Ctor = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketCtor }).WebSocket;
    if (!Ctor)
      return Promise.reject(
        new HttpStatusError(
          0,
          "EUNSUPPORTED",
          "no WebSocket implementation: pass options.WebSocket",
        ),
      );
    const wsUrl = new URL(`${base}/ws`);
    wsUrl.protocol = wsUrl.protocol === "https:" ? "wss:" : "ws:";
    wsUrl.searchParams.set("after", String(cursor));
    wsUrl.searchParams.set("cursors", "1");
    // Browsers cannot set headers on a WebSocket: the token goes in the query (or the cookie does it).
    if (options.token) wsUrl.searchParams.set("token", options.token);
    return new Promise((resolve, reject) => {
      const ws = new Ctor(wsUrl.href);
      socket = ws;
      let opened = false;
      let finished = false;
      const onAbort = () => ws.close(1000, "closed by page");
      signal.addEventListener("abort", onAbort, { once: true });
      const finish = (fn: () => void) => {
        if (finished) return;
        finished = true;
        signal.removeEventListener("abort", onAbort);
        if (socket === ws) socket = undefined;
        fn();
      };
      ws.onopen = () => {
        opened = true;
        onOpen();
      };
      ws.onmessage = (msg: MessageEvent) => {
        const text = typeof msg.data === "string" ? msg.data : String(msg.data);
        if (text === "[DONE]") {
          finish(() => resolve("done"));
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
          apply(value.command, value.cursor);
        else apply(value, undefined);
      };
      ws.onclose = (ev: CloseEvent) => {
        if (ev.code === 4410) {
          finish(() => reject(new HttpStatusError(410, "ELOG_TRUNCATED", ev.reason)));
          return;
        }
        if (!opened) {
          // Learn why the upgrade failed (401? 403? 410?) from the poll route's status.
          finish(() =>
            doFetch(`${base}/poll?after=${cursor}`, { headers, signal, credentials: "same-origin" })
              .then(async (res) => {
                reject(
                  res.ok
                    ? new HttpStatusError(0, "ENETWORK", "WebSocket failed to open")
                    : await statusError(res),
                );
              })
              .catch(reject),
          );
          return;
        }
        finish(() => resolve("end"));
      };
      ws.onerror = () => {
        // onclose follows and decides.
      };
    });
  }

  async function run() {
    let delay = minRetry;
    while (!signal.aborted) {
      try {
        const onOpen = () => {
          delay = minRetry;
          setState("open");
        };
        const outcome =
          transport === "sse"
            ? await sseOnce(onOpen)
            : transport === "poll"
              ? await pollOnce(onOpen)
              : await wsOnce(onOpen);
        if (outcome === "done") {
          setState("done");
          return;
        }
      } catch (err) {
        if (signal.aborted) break;
        const e = err as Partial<HttpStatusError>;
        if (e.status === 410) {
          restart();
          continue;
        }
        if (e.status === 401 || e.status === 403) {
          const detail: TransportError = {
            source: "transport",
            code: e.code ?? "EUNAUTHORIZED",
            message: e.message ?? "unauthorized",
            status: e.status,
          };
          report(detail);
          setState("unauthorized", detail);
          return;
        }
        report({
          source: "transport",
          code: e.code ?? "ENETWORK",
          message: e.message ?? String(err),
          ...(e.status ? { status: e.status } : {}),
        });
      }
      if (signal.aborted) break;
      setState("reconnecting");
      await sleep(delay * (0.75 + Math.random() * 0.5));
      delay = Math.min(delay * 2, maxRetry);
    }
    setState("closed");
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
          const e = await statusError(res);
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
