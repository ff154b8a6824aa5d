// ComputerClient: the HTTP face of a Computer (docs/api.md). Isomorphic: only
// fetch, web streams, TextEncoder and the pure wire codecs, no `node:` imports,
// so it runs in Node, browsers, Deno, Bun and Workers.
//
// The core promise is lossless auto-resume. `handle.events()` reads the
// exec-wire stream through the project's one resume loop (src/wire/resume.ts):
// when the connection breaks (reset, proxy timeout, server restart with a
// durable log) it reconnects with backoff and asks for `after=<last seq it
// delivered>`. Every logged event therefore reaches the consumer exactly once,
// in order: duplicates from the overlap are dropped, a gap is EGAP (never
// silent), and a 410 / ELOG_TRUNCATED is an error carrying earliestSeq unless
// the caller passes a truncation policy. The stream is pull-based: the
// response body is read only when the consumer asks for more, so a slow
// consumer applies TCP backpressure all the way to the server, which in turn
// just falls behind in the log.
//
// Transports: "http" (default) streams each execution over its own HTTP
// response; "websocket" multiplexes every execution on one socket to /v1/ws
// (ws-transport.ts), in binary records when the server offers them. Both are
// connections of the same resume loop; docs/api.md says which to choose when.

import type {
  ComputerApi,
  EventsOptions,
  ExecHandle,
  ExecOptions,
  ExecRecord,
  ExecResult,
  ExecSpec,
  ScreenSnapshot,
} from "../runtime/types.js";
import { decodeBase64 } from "../wire/base64.js";
import { ComputerError, errorFromResponse } from "../wire/errors.js";
import { ExecWireDecoder, type ExecWireError } from "../wire/exec-wire/index.js";
import { parseAfter, resolveAfter } from "../wire/position.js";
import {
  DEFAULT_RESUME,
  type ResumeOptions,
  resumable,
  retrying,
  type TruncationPolicy,
} from "../wire/resume.js";
import type { Chunk, ExecEvent } from "../wire/types.js";
import { execBody, newExecId } from "./exec-body.js";
import { UiClient } from "./ui.js";
import type { WebSocketFactory } from "./ws-socket.js";
import { type OpenedSubscription, WsTransport } from "./ws-transport.js";

export type { ResumeOptions, TruncationPolicy };

/** events() options of a remote handle: the ExecHandle ones, plus what to do when the log was truncated. */
export interface RemoteEventsOptions extends EventsOptions {
  /**
   * Called on ELOG_TRUNCATED (the server no longer has the next seq) with the
   * error (`earliestSeq`) and the last seq delivered; returns the seq to
   * continue after, e.g. `earliestSeq - 1` to go on knowingly. Without it the
   * stream fails with the error.
   */
  onTruncated?: TruncationPolicy;
}

export interface ComputerClientOptions {
  /** Base URL of the server, e.g. "http://127.0.0.1:8787". */
  url: string;
  /** Bearer token (printed by `agent-computer serve`). */
  token?: string;
  /** fetch implementation (default: globalThis.fetch). */
  fetch?: typeof fetch;
  /** Auto-resume tuning for event streams and result(). */
  resume?: ResumeOptions;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /**
   * How event streams travel: "http" (default: one response per stream) or
   * "websocket" (every execution this client follows multiplexed on one
   * socket; docs/api.md, "Choosing a transport"). Requests that are not
   * streams (list, kill, files, result) use HTTP either way.
   */
  transport?: "http" | "websocket";
  /**
   * The websocket transport's socket (default: the global WebSocket, else
   * the `ws` package in Node). See WebSocketFactory.
   */
  webSocket?: WebSocketFactory;
  /** Ask the server for binary WebSocket records (default true; false: text frames). */
  binary?: boolean;
}

export interface FileEntry {
  name: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
  mtimeMs: number;
}

export interface FilesApi {
  /** The whole file. */
  read(path: string, options?: { signal?: AbortSignal }): Promise<Uint8Array>;
  /** The file as UTF-8 text. */
  readText(path: string, options?: { signal?: AbortSignal }): Promise<string>;
  /** The file as a byte stream (large files). */
  readStream(path: string, options?: { signal?: AbortSignal }): Promise<ReadableStream<Uint8Array>>;
  /** Creates or replaces a file (parents created). Streams are sent as they are read. */
  write(
    path: string,
    data: string | Uint8Array | ReadableStream<Uint8Array> | Blob,
    options?: { signal?: AbortSignal },
  ): Promise<{ path: string; size: number }>;
  /** Entries of a directory ("" or "/" is the workspace root). */
  list(dir?: string): Promise<FileEntry[]>;
  /** Deletes a file, an empty directory, or with `recursive` any directory. */
  remove(path: string, options?: { recursive?: boolean }): Promise<void>;
}

const NDJSON = "application/x-ndjson";

/**
 * Refuses, before any request, what the server would refuse and what `fetch`
 * would silently rewrite (it normalises `a/../b` into `b` and `../x` out of
 * /v1/files/ altogether): NUL, backslashes, absolute paths and `.`/`..`
 * segments are EINVAL. "" and "/" name the workspace root.
 */
function checkFilesPath(p: string): void {
  if (typeof p !== "string") throw new ComputerError("EINVAL", "a files path must be a string");
  if (p === "" || p === "/") return;
  if (p.includes("\0")) throw new ComputerError("EINVAL", "path contains NUL");
  if (p.includes("\\")) throw new ComputerError("EINVAL", "path contains a backslash");
  if (p.startsWith("/")) {
    throw new ComputerError("EINVAL", `absolute paths are not allowed: ${JSON.stringify(p)}`);
  }
  const trimmed = p.endsWith("/") ? p.slice(0, -1) : p;
  for (const seg of trimmed.split("/")) {
    if (seg === "" || seg === "." || seg === "..") {
      throw new ComputerError(
        "EINVAL",
        `path segment ${JSON.stringify(seg)} is not allowed in ${JSON.stringify(p)}`,
      );
    }
  }
}

function encodePath(p: string): string {
  checkFilesPath(p);
  return p
    .split("/")
    .filter((s, i, all) => !(s === "" && (i === 0 || i === all.length - 1)))
    .map(encodeURIComponent)
    .join("/");
}

export class ComputerClient implements ComputerApi {
  readonly url: string;
  readonly files: FilesApi;
  /** A@UI relay: render/update/destroy widgets on pages, read their UI events (src/client/ui.ts). */
  readonly ui: UiClient;
  private readonly token: string | undefined;
  private readonly fetchImpl: typeof fetch;
  private readonly extraHeaders: Record<string, string>;
  /** @internal */
  readonly resume: Required<ResumeOptions>;
  /** @internal The websocket transport, when chosen. */
  readonly ws: WsTransport | undefined;

  constructor(options: ComputerClientOptions) {
    if (!options || typeof options.url !== "string") {
      throw new ComputerError("EINVAL", "ComputerClient needs { url }");
    }
    this.url = options.url.replace(/\/+$/, "");
    this.token = options.token;
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new ComputerError("EINVAL", "no fetch implementation");
    this.fetchImpl = (input, init) => f(input, init); // unbound fetch breaks in browsers
    this.extraHeaders = options.headers ?? {};
    this.resume = { ...DEFAULT_RESUME, ...options.resume };
    this.files = this.makeFiles();
    if (options.transport !== undefined && options.transport !== "http") {
      if (options.transport !== "websocket") {
        throw new ComputerError("EINVAL", 'transport must be "http" or "websocket"');
      }
    }
    this.ws =
      options.transport === "websocket"
        ? new WsTransport({
            url: this.url,
            headers: this.token
              ? { ...this.extraHeaders, authorization: `Bearer ${this.token}` }
              : { ...this.extraHeaders },
            webSocket: options.webSocket,
            binary: options.binary,
          })
        : undefined;
    this.ui = new UiClient({
      url: this.url,
      token: this.token,
      fetch: this.fetchImpl,
      resume: this.resume,
    });
  }

  /** @internal One request; non-2xx answers become ComputerErrors with the server's code. */
  async request(
    method: string,
    path: string,
    init: {
      json?: unknown;
      body?: BodyInit;
      headers?: Record<string, string>;
      signal?: AbortSignal;
    } = {},
  ): Promise<Response> {
    const headers: Record<string, string> = { ...this.extraHeaders, ...init.headers };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    let body = init.body;
    if (init.json !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(init.json);
    }
    const requestInit: RequestInit & { duplex?: "half" } = { method, headers, signal: init.signal };
    if (body !== undefined) requestInit.body = body;
    if (body instanceof ReadableStream) requestInit.duplex = "half";
    let res: Response;
    try {
      res = await this.fetchImpl(this.url + path, requestInit);
    } catch (err) {
      if (init.signal?.aborted) throw new ComputerError("EABORTED", "aborted");
      throw new ComputerError("ENETWORK", `cannot reach ${this.url}: ${describe(err)}`, {
        cause: err,
      });
    }
    if (!res.ok) throw await errorFromResponse(res);
    return res;
  }

  private async json<T>(method: string, path: string, json?: unknown): Promise<T> {
    const res = await this.request(method, path, json === undefined ? {} : { json });
    if (res.status === 204) return undefined as T;
    return (await res.json()) as T;
  }

  async exec(spec: ExecSpec, options: ExecOptions = {}): Promise<RemoteExecHandle> {
    const body = execBody(spec, options);
    if (this.ws) {
      // The `exec` message starts the command and subscribes this socket from
      // seq 0 at once (the command is held for that reader, as over HTTP).
      const id = options.id ?? newExecId();
      const opened = await this.ws.exec(id, body);
      return new RemoteExecHandle(this, id, opened);
    }
    // Start and subscribe in one request (the stream-on-create route): the
    // server reads the log from seq 1 for this stream from the moment the
    // command starts, and its backpressure holds the command while the stream
    // is unread, so nothing can be dropped before the first events() call
    // takes the stream over (see RemoteExecHandle.events).
    const abort = new AbortController();
    const res = await this.request("POST", "/v1/execs?stream=1", {
      json: body,
      headers: { accept: NDJSON },
      signal: abort.signal,
    });
    if ((res.headers.get("content-type") ?? "").startsWith("application/json")) {
      // A server without the stream-on-create route answered 201 {id}.
      const { id } = (await res.json()) as { id: string };
      return new RemoteExecHandle(this, id);
    }
    const id = res.headers.get("x-exec-id") ?? idOfLocation(res.headers.get("location"));
    if (!id || !res.body) {
      abort.abort();
      throw new ComputerError("ENETWORK", "the server answered exec without an execution id");
    }
    return new RemoteExecHandle(this, id, openedResponse(res, res.body, abort, id));
  }

  async get(id: string): Promise<RemoteExecHandle> {
    await this.json<ExecRecord>("GET", `/v1/execs/${encodeURIComponent(id)}`);
    return new RemoteExecHandle(this, id);
  }

  /** Same as get(): a handle whose events() resumes from wherever you ask. */
  attach(id: string): Promise<RemoteExecHandle> {
    return this.get(id);
  }

  async list(): Promise<ExecRecord[]> {
    return (await this.json<{ execs: ExecRecord[] }>("GET", "/v1/execs")).execs;
  }

  async kill(id: string, signal?: string): Promise<void> {
    await this.json("POST", `/v1/execs/${encodeURIComponent(id)}/kill`, signal ? { signal } : {});
  }

  async dispose(id: string): Promise<void> {
    await this.json("DELETE", `/v1/execs/${encodeURIComponent(id)}`);
  }

  /** Closes the websocket transport's sockets (HTTP streams are closed by their consumers or AbortSignals). */
  async close(): Promise<void> {
    this.ws?.close();
  }

  /** GET /healthz. */
  async health(): Promise<{ ok: boolean }> {
    return this.json("GET", "/healthz");
  }

  private makeFiles(): FilesApi {
    const fp = (p: string) => `/v1/files/${encodePath(p)}`;
    return {
      read: async (p, o) =>
        new Uint8Array(await (await this.request("GET", fp(p), o)).arrayBuffer()),
      readText: async (p, o) => (await this.request("GET", fp(p), o)).text(),
      readStream: async (p, o) => {
        const res = await this.request("GET", fp(p), o);
        return res.body ?? new ReadableStream({ start: (c) => c.close() });
      },
      write: async (p, data, o) => {
        const body: BodyInit =
          typeof data === "string" ? new TextEncoder().encode(data) : (data as BodyInit);
        const res = await this.request("PUT", fp(p), {
          body,
          headers: { "content-type": "application/octet-stream" },
          signal: o?.signal,
        });
        return (await res.json()) as { path: string; size: number };
      },
      list: async (dir = "") => {
        // The server pages listings; follow `next` until the directory is read.
        const all: FileEntry[] = [];
        let after: string | undefined;
        do {
          const q = after === undefined ? "" : `&after=${encodeURIComponent(after)}`;
          const page = await this.json<{ entries: FileEntry[]; next?: string }>(
            "GET",
            `${fp(dir)}?list&limit=10000${q}`,
          );
          all.push(...page.entries);
          after = page.next;
        } while (after !== undefined);
        return all;
      },
      remove: async (p, o) => {
        await this.request("DELETE", `${fp(p)}${o?.recursive ? "?recursive=1" : ""}`);
      },
    };
  }
}

function describe(err: unknown): string {
  // undici hides the socket error in `cause` (sometimes an AggregateError of several).
  const cause = (
    err as { cause?: { code?: string; message?: string; errors?: { code?: string }[] } }
  )?.cause;
  if (cause?.code) return cause.code;
  if (cause?.errors?.[0]?.code) return cause.errors[0].code;
  if (cause?.message) return cause.message;
  return (err as Error)?.message ?? String(err);
}

/** The event stream exec() opened with the command (from seq 1), until events() takes it. */
type OpenedStream = OpenedSubscription;

/** exec()'s HTTP response as an opened stream. */
function openedResponse(
  response: Response,
  body: ReadableStream<Uint8Array>,
  abort: AbortController,
  id: string,
): OpenedStream {
  return {
    take: (heartbeats, signal) => {
      if (signal.aborted) abort.abort();
      else signal.addEventListener("abort", () => abort.abort(), { once: true });
      // Held while the stream waits to be read: undici cancels the body of a
      // Response that is garbage-collected, which ended the stream early.
      void response;
      return decodeEvents(body, id, heartbeats);
    },
    release: () => abort.abort(),
  };
}

/** An execution on a server: the same ExecHandle the in-process Computer returns. */

export class RemoteExecHandle<V extends Chunk = Chunk> implements ExecHandle<V> {
  constructor(
    private readonly client: ComputerClient,
    readonly id: string,
    private opened?: OpenedStream,
  ) {}

  /**
   * The stream opened by exec(), once: it starts at seq 1. Any other use of
   * the handle that waits (result(), dispose(), events() from elsewhere)
   * releases it instead, since an unread stream holds the command back.
   */
  private takeOpened(): OpenedStream | undefined {
    const o = this.opened;
    this.opened = undefined;
    return o;
  }

  private releaseOpened(): void {
    this.takeOpened()?.release();
  }

  private get path(): string {
    return `/v1/execs/${encodeURIComponent(this.id)}`;
  }

  /**
   * The auto-resuming event stream. `after: "tail"` first reads the record's
   * lastSeq (pinned, so a resume after a drop continues exactly where the tail
   * began instead of skipping what happened between).
   */
  events(options: RemoteEventsOptions = {}): ReadableStream<ExecEvent<V>> {
    const { client, id, path } = this;
    const heartbeats = options.heartbeats !== false;
    const lastSeq = async (signal: AbortSignal) =>
      ((await (await client.request("GET", path, { signal })).json()) as ExecRecord).lastSeq;
    let opened = (options.after ?? 0) === 0 ? this.takeOpened() : undefined;
    this.releaseOpened();
    return resumable<ExecEvent<V>>({
      after: options.after === "tail" ? lastSeq : (options.after ?? 0),
      connect: async (after, signal) => {
        const o = opened;
        opened = undefined;
        if (o && after === 0) {
          return o.take(heartbeats, signal) as AsyncIterable<ExecEvent<V>[]>;
        }
        o?.release();
        if (client.ws) {
          return (await client.ws.subscribe(id, after, heartbeats, signal)) as AsyncIterable<
            ExecEvent<V>[]
          >;
        }
        const res = await client.request(
          "GET",
          `${path}/events?after=${after}${heartbeats ? "" : "&heartbeats=0"}`,
          { headers: { accept: NDJSON }, signal },
        );
        if (!res.body) throw new ComputerError("ENETWORK", "event stream response has no body");
        return decodeEvents<V>(res.body, id, heartbeats);
      },
      seqOf: (ev) => (ev.name === "heartbeat" ? undefined : ev.seq),
      isEnd: (ev) => ev.name === "exit",
      // Ended without exit: a cut connection, or nothing more will come (tail
      // of a finished execution). The record tells which.
      ended: async (after, signal) => {
        const rec = (await (await client.request("GET", path, { signal })).json()) as ExecRecord;
        if (rec.state !== "running" && rec.lastSeq <= after) return true;
        throw new ComputerError("ENETWORK", "event stream ended before the exit event");
      },
      retry: client.resume,
      onTruncated: options.onTruncated,
      signal: options.signal,
      highWaterMark: 16,
    });
  }

  async subscribe(options: RemoteEventsOptions = {}): Promise<ReadableStream<ExecEvent<V>>> {
    resolveAfter(this.id, parseAfter(options.after), await this.info());
    return this.events(options);
  }

  async result(options: { signal?: AbortSignal } = {}): Promise<ExecResult<V>> {
    this.releaseOpened();
    // GET /result waits for the exit; it is idempotent, so a broken connection is just retried.
    const r = await retrying(
      async () => {
        const res = await this.client.request("GET", `${this.path}/result`, {
          signal: options.signal,
        });
        return (await res.json()) as {
          id: string;
          status: ExecResult["status"];
          exitCode: number | null;
          signal?: string;
          encoding: "b64" | "utf8";
          stdout: string;
          stderr: string;
          truncated: boolean;
        };
      },
      { retry: this.client.resume, signal: options.signal },
    );
    const out: ExecResult<V> = {
      id: r.id,
      status: r.status,
      exitCode: r.exitCode,
      stdout: (r.encoding === "b64" ? decodeBase64(r.stdout) : r.stdout) as V,
      stderr: (r.encoding === "b64" ? decodeBase64(r.stderr) : r.stderr) as V,
      truncated: r.truncated,
    };
    if (r.signal !== undefined) out.signal = r.signal;
    return out;
  }

  async info(): Promise<ExecRecord> {
    return (await this.client.request("GET", this.path)).json() as Promise<ExecRecord>;
  }

  async kill(signal?: string): Promise<void> {
    await this.client.request("POST", `${this.path}/kill`, { json: signal ? { signal } : {} });
  }

  async write(chunk: Uint8Array | string): Promise<void> {
    const body = typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk;
    await this.client.request("POST", `${this.path}/stdin`, {
      body: body as BodyInit,
      headers: { "content-type": "application/octet-stream" },
    });
  }

  async end(): Promise<void> {
    await this.client.request("POST", `${this.path}/stdin?end=1`, {
      body: new Uint8Array(0),
      headers: { "content-type": "application/octet-stream" },
    });
  }

  /** POST /v1/execs/:id/resize: the pty's new size (SIGWINCH reaches the program). */
  async resize(size: { cols: number; rows: number }): Promise<void> {
    await this.client.request("POST", `${this.path}/resize`, {
      json: { cols: size.cols, rows: size.rows },
    });
  }

  /** GET /v1/execs/:id/screen: the current screen; follow with events({ after: seq }). */
  async screen(): Promise<ScreenSnapshot> {
    return (
      await this.client.request("GET", `${this.path}/screen`)
    ).json() as Promise<ScreenSnapshot>;
  }
}

/**
 * One connection's events: the body decoded batch by batch, only as the loop
 * asks for more. Events of other executions (none over HTTP; defensive) and
 * unwanted heartbeats are left out; a broken body is a network failure (the
 * loop resumes), a decoder's coded error (an error frame, a malformed line)
 * keeps its code.
 */
async function* decodeEvents<V extends Chunk>(
  body: ReadableStream<Uint8Array>,
  id: string,
  heartbeats: boolean,
): AsyncGenerator<ExecEvent<V>[]> {
  const reader = body.getReader();
  const decoder = new ExecWireDecoder<V>();
  try {
    for (;;) {
      let r: ReadableStreamReadResult<Uint8Array>;
      try {
        r = await reader.read();
      } catch (err) {
        throw new ComputerError("ENETWORK", `event stream broke: ${describe(err)}`, {
          cause: err,
        });
      }
      let events: ExecEvent<V>[];
      try {
        events = r.done ? decoder.end() : decoder.push(r.value);
      } catch (err) {
        // The events that chunk completed before the failure come with it.
        const before = ((err as ExecWireError).events ?? []) as ExecEvent<V>[];
        const mine = before.filter((ev) => ev.id === id && (heartbeats || ev.name !== "heartbeat"));
        if (mine.length > 0) yield mine;
        throw err;
      }
      const keep = (ev: ExecEvent<V>) => ev.id === id && (heartbeats || ev.name !== "heartbeat");
      const mine = events.every(keep) ? events : events.filter(keep);
      if (mine.length > 0) yield mine;
      if (r.done) return;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

/** The execution id at the end of a `Location: /v1/execs/<id>` header. */
function idOfLocation(location: string | null): string | undefined {
  const m = location ? /\/v1\/execs\/([^/?#]+)$/.exec(location) : null;
  return m ? decodeURIComponent(m[1]!) : undefined;
}
