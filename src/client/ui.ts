// `computer.ui`: the agent's side of the A@UI relay. Publish render / update /
// destroy commands to a channel and read the UI events pages send back, as a
// resumable async iterable. Isomorphic (fetch only), like the rest of the SDK.
//
// Widget ids: a render's response carries `widgetId` = `w<cursor>`, the id a
// relay page (runtime built with `relayWidgetId`) mints for it, so an agent
// can update the widget at once, without waiting for a page to be open. The
// `aui:widget-ready` events in `events()` confirm it (and carry the id a page
// with its own minting chose, with the render's `position`).
//
// `events()` is the project's one resume loop (src/wire/resume.ts) over
// long-polling: the same cursor, dedupe, backoff and retry budget as the exec
// event streams, tuned by the same `resume` options.

import type { JsonObject, UiEvent } from "../aui/types.js";
import { ComputerError, errorFromResponse, hasCode } from "../wire/errors.js";
import { DEFAULT_RESUME, type ResumeOptions, resumable } from "../wire/resume.js";

export interface UiClientOptions {
  /** Server base URL, e.g. "http://127.0.0.1:8787". */
  url: string;
  token?: string | null;
  fetch?: typeof fetch;
  /** Default channel (default "default"). */
  channel?: string;
  /** Reconnect tuning for events() (default: 10 retries, 50 ms doubling to 2 s). */
  resume?: ResumeOptions;
}

export interface PublishResult {
  /** The command's cursor in the channel (SSE id / poll cursor). */
  cursor: number;
  /** For render: the id relay pages mint for this widget. */
  widgetId?: string;
}

export interface ChannelOption {
  channel?: string;
}

/** A UI event as the relay logged it: `seq` is its resume position. */
export type ReceivedUiEvent = UiEvent & { seq: number };

export interface UiEventsOptions extends ChannelOption {
  /** Start after this seq (default 0: every retained event); "tail": only new ones. */
  after?: number | "tail";
  signal?: AbortSignal;
  /** Long-poll wait per request (default 25,000 ms). */
  waitMs?: number;
}

export class UiClient {
  private readonly base: string;
  private readonly token: string | null | undefined;
  private readonly doFetch: typeof fetch;
  private readonly resume: Required<ResumeOptions>;
  readonly channelName: string;

  constructor(options: UiClientOptions) {
    this.base = options.url.replace(/\/+$/, "");
    this.token = options.token;
    this.doFetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.channelName = options.channel ?? "default";
    this.resume = { ...DEFAULT_RESUME, ...options.resume };
  }

  /** The same client bound to another channel. */
  channel(name: string): UiClient {
    return new UiClient({
      url: this.base,
      token: this.token,
      fetch: this.doFetch,
      channel: name,
      resume: this.resume,
    });
  }

  private path(channel: string | undefined, suffix: string): string {
    return `${this.base}/v1/ui/${encodeURIComponent(channel ?? this.channelName)}${suffix}`;
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return this.token ? { ...extra, authorization: `Bearer ${this.token}` } : extra;
  }

  private async request<T>(url: string, init: RequestInit): Promise<T> {
    let res: Response;
    try {
      res = await this.doFetch(url, init);
    } catch (err) {
      if ((err as Error)?.name === "AbortError")
        throw new ComputerError("EABORTED", "aborted", { cause: err });
      throw new ComputerError("ENETWORK", `cannot reach ${this.base}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    if (!res.ok) throw await errorFromResponse(res);
    const text = await res.text();
    return (text === "" ? undefined : JSON.parse(text)) as T;
  }

  /** Publishes any command object (validated by the relay: 400 EINVAL with the reason). */
  publish(command: unknown, options: ChannelOption = {}): Promise<PublishResult> {
    return this.request(this.path(options.channel, "/commands"), {
      method: "POST",
      headers: this.headers({ "content-type": "application/json" }),
      body: JSON.stringify(command),
    });
  }

  render(
    component: string,
    params: JsonObject = {},
    options: ChannelOption = {},
  ): Promise<PublishResult & { widgetId: string }> {
    return this.publish({ type: "render", component, params }, options) as Promise<
      PublishResult & { widgetId: string }
    >;
  }

  update(
    widgetId: string,
    params: JsonObject,
    options: ChannelOption = {},
  ): Promise<PublishResult> {
    return this.publish({ type: "update", widgetId, params }, options);
  }

  destroy(widgetId: string, options: ChannelOption = {}): Promise<PublishResult> {
    return this.publish({ type: "destroy", widgetId }, options);
  }

  /** Sends a UI event as a page would (tests, or an agent acting for a user). */
  async sendEvent(event: UiEvent, options: ChannelOption = {}): Promise<{ seq: number }> {
    return this.request(this.path(options.channel, "/events"), {
      method: "POST",
      headers: this.headers({ "content-type": "application/json" }),
      body: JSON.stringify(event),
    });
  }

  /** Closes the channel: pages get `[DONE]`, retained state is dropped. */
  async closeChannel(options: ChannelOption = {}): Promise<void> {
    await this.request(this.path(options.channel, ""), {
      method: "DELETE",
      headers: this.headers(),
    });
  }

  /**
   * UI events as an async iterable: replays from `after` then follows by
   * long-polling. Each event carries its `seq`; pass the last one as `after`
   * to resume. Failures that mean "try again" are retried with backoff, up to
   * the `resume` budget; a gap (events dropped from the bounded log) throws
   * `ELOG_TRUNCATED` with `earliestSeq`. Aborting `signal` ends the iteration.
   */
  async *events(options: UiEventsOptions = {}): AsyncGenerator<ReceivedUiEvent, void, undefined> {
    const url = this.path(options.channel, "/events");
    const headers = this.headers();
    const waitMs = options.waitMs ?? 25_000;
    const request = this.request.bind(this);
    const stream = resumable<ReceivedUiEvent>({
      after:
        options.after === "tail"
          ? async (signal) =>
              (await request<{ cursor: number }>(`${url}?after=tail`, { headers, signal })).cursor
          : (options.after ?? 0),
      // One connection long-polls until the channel is done (the only way it returns).
      connect: async function* (after, signal) {
        for (;;) {
          const body = await request<{ events: ReceivedUiEvent[]; done: boolean }>(
            `${url}?after=${after}&wait=${waitMs}`,
            { headers, signal },
          );
          if (body.events.length > 0) {
            after = body.events[body.events.length - 1]!.seq;
            yield body.events;
          } else if (body.done) return;
        }
      },
      seqOf: (ev) => ev.seq,
      ended: () => true,
      retry: this.resume,
      signal: options.signal,
    });
    const reader = stream.getReader();
    try {
      for (;;) {
        let r: ReadableStreamReadResult<ReceivedUiEvent>;
        try {
          r = await reader.read();
        } catch (err) {
          if (hasCode(err, "EABORTED")) return;
          throw err;
        }
        if (r.done) return;
        yield r.value;
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  /**
   * Waits for the `aui:widget-ready` report of the render at `cursor` (any
   * page) and returns the id that page minted.
   */
  async widgetReady(
    cursor: number,
    options: ChannelOption & { signal?: AbortSignal } = {},
  ): Promise<string> {
    for await (const ev of this.events({ channel: options.channel, signal: options.signal })) {
      const p = ev.payload as { position?: unknown } | undefined;
      if (
        ev.type === "aui:widget-ready" &&
        (p?.position === cursor || p?.position === String(cursor))
      )
        return ev.widgetId;
    }
    throw new ComputerError("EABORTED", "aborted before the widget was reported");
  }
}
