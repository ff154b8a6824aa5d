// ComputerClient: the HTTP face of a Computer (docs/api.md). Isomorphic: only
// fetch, web streams, TextEncoder and the pure wire codecs, no `node:` imports,
// so it runs in Node, browsers, Deno, Bun and Workers.
//
// The core promise is lossless auto-resume. `handle.events()` reads the
// exec-wire stream; when the connection breaks (reset, proxy timeout, server
// restart with a durable log) it reconnects with backoff and asks for
// `after=<last seq it delivered>`. Every logged event therefore reaches the
// consumer exactly once, in order:
// - seq <= last delivered: a duplicate from the overlap, dropped;
// - seq  > last delivered + 1: a gap, which can only mean lost data: an error
//   (EGAP), never silent;
// - a 410 / ELOG_TRUNCATED (the server no longer has the next seq) is an error
//   carrying earliestSeq, so the caller can decide to continue from there.
// The stream is pull-based: the response body is read only when the consumer
// asks for more, so a slow consumer applies TCP backpressure all the way to the
// server, which in turn just falls behind in the log.

import type {
  ComputerApi,
  EventsOptions,
  ExecHandle,
  ExecOptions,
  ExecRecord,
  ExecResult,
  ExecSpec,
} from "../runtime/types.js";
import { decodeBase64, encodeBase64 } from "../wire/base64.js";
import { ComputerError, errorFromResponse } from "../wire/errors.js";
import { ExecWireDecoder } from "../wire/exec-wire/index.js";
import { parseAfter, resolveAfter } from "../wire/position.js";
import type { Chunk, ExecEvent } from "../wire/types.js";
import { UiClient } from "./ui.js";

export interface ResumeOptions {
  /** Consecutive failed attempts (without any progress) before giving up. Default 10. */
  maxRetries?: number;
  /** First backoff delay; doubles per failure. Default 50 ms. */
  initialDelayMs?: number;
  /** Backoff cap. Default 2000 ms. */
  maxDelayMs?: number;
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

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortError());
      return;
    }
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(abortError());
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function abortError(): ComputerError {
  return new ComputerError("EABORTED", "aborted");
}

function encodePath(p: string): string {
  return p
    .split("/")
    .filter((s, i, all) => !(s === "" && (i === 0 || i === all.length - 1)))
    .map(encodeURIComponent)
    .join("/");
}

/** Error codes that mean "try again later", for event streams and result(). */
function retryable(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  // ELAGGING: the server cut us for reading too slowly; the log still has the
  // events (or the resume gets 410 ELOG_TRUNCATED, which is surfaced).
  return (
    code === "ENETWORK" ||
    code === "ECLOSED" ||
    code === "EINTERNAL" ||
    code === "ELAGGING" ||
    code === "EUNAVAILABLE"
  );
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
    this.resume = {
      maxRetries: options.resume?.maxRetries ?? 10,
      initialDelayMs: options.resume?.initialDelayMs ?? 50,
      maxDelayMs: options.resume?.maxDelayMs ?? 2000,
    };
    this.files = this.makeFiles();
    this.ui = new UiClient({ url: this.url, token: this.token, fetch: this.fetchImpl });
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
      if (init.signal?.aborted) throw abortError();
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
    const body: Record<string, unknown> = {};
    if (typeof spec === "string") body.command = spec;
    else if ("argv" in spec) body.argv = spec.argv;
    else body.command = spec.command;
    if (options.id !== undefined) body.id = options.id;
    if (options.cwd !== undefined) body.cwd = options.cwd;
    if (options.env !== undefined) body.env = options.env;
    if (options.timeoutMs !== undefined) body.timeoutMs = options.timeoutMs;
    if (options.encoding !== undefined) body.encoding = options.encoding;
    if (options.stdin !== undefined) {
      body.stdin =
        options.stdin === "pipe"
          ? { pipe: true }
          : typeof options.stdin === "string"
            ? options.stdin
            : { b64: encodeBase64(options.stdin) };
    }
    const { id } = await this.json<{ id: string }>("POST", "/v1/execs", body);
    return new RemoteExecHandle(this, id);
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

  /** Nothing to release: streams are closed by their consumers or AbortSignals. */
  async close(): Promise<void> {}

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
      list: async (dir = "") =>
        (await this.json<{ entries: FileEntry[] }>("GET", `${fp(dir)}?list`)).entries,
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

/** An execution on a server: the same ExecHandle the in-process Computer returns. */
export class RemoteExecHandle<V extends Chunk = Chunk> implements ExecHandle<V> {
  constructor(
    private readonly client: ComputerClient,
    readonly id: string,
  ) {}

  private get path(): string {
    return `/v1/execs/${encodeURIComponent(this.id)}`;
  }

  events(options: EventsOptions = {}): ReadableStream<ExecEvent<V>> {
    return resumingEventStream<V>(this.client, this.id, this.path, options);
  }

  async subscribe(options: EventsOptions = {}): Promise<ReadableStream<ExecEvent<V>>> {
    resolveAfter(this.id, parseAfter(options.after), await this.info());
    return this.events(options);
  }

  async result(options: { signal?: AbortSignal } = {}): Promise<ExecResult<V>> {
    // GET /result waits for the exit; it is idempotent, so a broken connection is just retried.
    const r = await withRetry(this.client, options.signal, async () => {
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
    });
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
}

async function withRetry<T>(
  client: ComputerClient,
  signal: AbortSignal | undefined,
  fn: () => Promise<T>,
): Promise<T> {
  let failures = 0;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (signal?.aborted) throw abortError();
      if (!retryable(err) || failures >= client.resume.maxRetries) throw err;
      await sleep(backoff(client, failures++), signal);
    }
  }
}

function backoff(client: ComputerClient, failures: number): number {
  const base = Math.min(client.resume.maxDelayMs, client.resume.initialDelayMs * 2 ** failures);
  return base / 2 + Math.random() * (base / 2); // jitter: many clients do not reconnect in lockstep
}

/**
 * The auto-resuming event stream. State: `last` is the seq of the last logged
 * event delivered to the consumer; every (re)connection asks for `after=last`.
 */
function resumingEventStream<V extends Chunk>(
  client: ComputerClient,
  id: string,
  path: string,
  options: EventsOptions,
): ReadableStream<ExecEvent<V>> {
  const heartbeats = options.heartbeats !== false;
  const ac = new AbortController();
  const outer = options.signal;
  const onOuterAbort = () => ac.abort();
  if (outer) {
    if (outer.aborted) ac.abort();
    else outer.addEventListener("abort", onOuterAbort, { once: true });
  }
  let last: number | undefined = options.after === "tail" ? undefined : (options.after ?? 0);
  let body: ReadableStreamDefaultReader<Uint8Array> | undefined;
  let decoder: ExecWireDecoder | undefined;
  let failures = 0;
  let finished = false;

  const cleanup = () => {
    finished = true;
    outer?.removeEventListener("abort", onOuterAbort);
    body?.cancel().catch(() => {});
    body = undefined;
  };

  const connect = async (): Promise<void> => {
    if (last === undefined) {
      // "tail": pin the position first, so a resume after a drop continues
      // exactly where the tail began instead of skipping what happened between.
      const rec = (await (
        await client.request("GET", path, { signal: ac.signal })
      ).json()) as ExecRecord;
      last = rec.lastSeq;
    }
    const res = await client.request(
      "GET",
      `${path}/events?after=${last}${heartbeats ? "" : "&heartbeats=0"}`,
      {
        headers: { accept: NDJSON },
        signal: ac.signal,
      },
    );
    if (!res.body) throw new ComputerError("ENETWORK", "event stream response has no body");
    body = res.body.getReader();
    decoder = new ExecWireDecoder();
  };

  /** Delivers decoded events; returns true when the exit was delivered. */
  const deliver = (
    events: ExecEvent[],
    controller: ReadableStreamDefaultController<ExecEvent<V>>,
  ): boolean => {
    for (const ev of events) {
      if (ev.id !== id) continue;
      if (ev.name === "heartbeat") {
        if (heartbeats) controller.enqueue(ev as ExecEvent<V>);
        continue;
      }
      const expected = (last ?? 0) + 1;
      if (ev.seq < expected) continue; // overlap after a resume
      if (ev.seq > expected) {
        throw new ComputerError(
          "EGAP",
          `event stream gap: expected seq ${expected}, got ${ev.seq}`,
        );
      }
      last = ev.seq;
      failures = 0; // progress resets the backoff
      controller.enqueue(ev as ExecEvent<V>);
      if (ev.name === "exit") return true;
    }
    return false;
  };

  return new ReadableStream<ExecEvent<V>>(
    {
      pull: async (controller) => {
        for (;;) {
          if (finished) return;
          try {
            if (ac.signal.aborted) throw abortError();
            if (!body) await connect();
            const { value, done } = await body!.read();
            if (done) {
              const tailEvents = decoder!.end();
              if (deliver(tailEvents, controller)) {
                cleanup();
                controller.close();
                return;
              }
              body = undefined;
              // Ended without exit: a cut connection, or nothing more will come
              // (tail of a finished execution). The record tells which.
              const rec = (await (
                await client.request("GET", path, { signal: ac.signal })
              ).json()) as ExecRecord;
              if (rec.state !== "running" && rec.lastSeq <= (last ?? 0)) {
                cleanup();
                controller.close();
                return;
              }
              throw new ComputerError("ENETWORK", "event stream ended before the exit event");
            }
            const events = decoder!.push(value);
            if (deliver(events, controller)) {
              cleanup();
              controller.close();
              return;
            }
            if (events.length > 0) return; // delivered something: wait for the next pull
          } catch (err) {
            body?.cancel().catch(() => {});
            body = undefined;
            if (ac.signal.aborted) {
              cleanup();
              controller.error(abortError());
              return;
            }
            const e = normalizeStreamError(err);
            if (!retryable(e) || failures >= client.resume.maxRetries) {
              cleanup();
              controller.error(e);
              return;
            }
            try {
              await sleep(backoff(client, failures++), ac.signal);
            } catch {
              cleanup();
              controller.error(abortError());
              return;
            }
          }
        }
      },
      cancel: () => {
        cleanup();
        ac.abort();
      },
    },
    { highWaterMark: 16 },
  );
}

/** Body read failures (TypeError: terminated, ECONNRESET, ...) are network errors; coded errors pass. */
function normalizeStreamError(err: unknown): unknown {
  if (err instanceof ComputerError) return err;
  const code = (err as { code?: unknown })?.code;
  if (
    typeof code === "string" &&
    /^E[A-Z_]+$/.test(code) &&
    code !== "ECONNRESET" &&
    code !== "EPIPE"
  ) {
    // a coded error from the decoder (error frame, malformed line): not retryable unless ECLOSED
    return err;
  }
  return new ComputerError("ENETWORK", `event stream broke: ${describe(err)}`, { cause: err });
}
