// The A@UI relay (`/v1/ui/…`): agents publish render/update/destroy commands to
// a named channel, any number of pages subscribe over SSE, WebSocket or
// (long-)polling, and UI events flow back into a per-channel log that agents
// read and resume by seq.
//
// Shape decisions (docs/ui.md has the prose):
// - Every command gets a channel cursor (1, 2, 3, …). It is the SSE `id:`, the
//   poll cursor and the WebSocket position, so all three transports resume the
//   same way: "give me what comes after cursor N".
// - Retained state is compacted so a page opened later replays the channel's
//   current state, not its history: updates to a widget are folded into one
//   update at the newest cursor (shallow merge is associative, so the state a
//   page reaches is identical), and a destroy removes the widget's render and
//   update, leaving only the small destroy itself (a "tombstone", which a page
//   that never saw the widget treats as a no-op, exactly as WIRE.md §3 says).
//   Widgets are matched by the id a relay page mints: `w<render cursor>`
//   (runtime's `relayWidgetId`), which the publish response returns at once.
// - Bounded: when the retained log is full, tombstones and commands for ids the
//   relay did not mint are dropped oldest first and the channel's `floor` rises;
//   a resume from below the floor is answered 410 `ELOG_TRUNCATED` and the page
//   starts over from a snapshot (after=0). If only live widgets remain, a new
//   render is refused with `ELIMIT`, never silently lost.
// - A slow subscriber never blocks publishers: past a buffer bound its
//   connection is cut and it resumes from its cursor.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { type WebSocket, WebSocketServer } from "ws";
import type { Command, UiEvent } from "../aui/types.js";
import { validateCommand, validateUiEvent } from "../aui/validate.js";
import { ComputerError } from "../wire/errors.js";
import { readJsonBody } from "./http/body.js";
import { sendJson } from "./http/errors.js";
import type { RouteContext, Router } from "./http/router.js";

export interface RelayLimits {
  /** Retained commands per channel (default 10,000). */
  maxRetained?: number;
  /** Retained command bytes per channel (default 32 MiB). */
  maxRetainedBytes?: number;
  /** Exact recent commands kept for resumes (default 1,000 / 4 MiB). */
  maxRecent?: number;
  maxRecentBytes?: number;
  /** UI events kept per channel (default 10,000; oldest dropped). */
  maxEvents?: number;
  /** Channels (default 1,000). */
  maxChannels?: number;
  /** Bytes buffered for one subscriber before it is cut (default 8 MiB). */
  maxSubscriberBuffer?: number;
  /** Longest long-poll wait (default 30 s). */
  maxWaitMs?: number;
  /** SSE heartbeat interval (default 15 s). */
  heartbeatMs?: number;
}

/** One retained or live command with its cursor. */
export interface RelayEntry {
  cursor: number;
  command: Command;
}

/** A UI event as logged, with its seq in the channel's event log. */
export type LoggedUiEvent = UiEvent & { seq: number };

/** "done": the channel ended ([DONE]); "cut": the server is going away (no [DONE], pages reconnect). */
type Subscriber = (entry: RelayEntry | "done" | "cut") => void;

const CHANNEL_RE = /^[A-Za-z0-9._~-]{1,128}$/;

export class UiChannel {
  readonly name: string;
  /** Last cursor handed out. */
  head = 0;
  /** Resumes with 0 < after < floor cannot be served exactly (something was dropped). */
  floor = 0;
  closed = false;
  /** How the channel ended (set with `closed`). */
  endMode: "done" | "cut" = "done";
  /**
   * The exact recent commands (uncompacted), so a page that reconnects after a
   * short drop gets precisely the commands it missed, in order.
   */
  private readonly recent: RelayEntry[] = [];
  private recentBytes = 0;
  private readonly retained = new Map<
    number,
    { command: Command; bytes: number; droppable: boolean }
  >();
  private retainedBytes = 0;
  /** relay-minted widget id -> cursors of its render and merged update */
  private readonly widgets = new Map<string, { render: number; update?: number }>();
  private readonly subscribers = new Set<Subscriber>();
  private readonly events: LoggedUiEvent[] = [];
  private eventsHead = 0;
  private readonly eventWaiters = new Set<() => void>();
  private readonly eventListeners = new Set<(ev: LoggedUiEvent) => void>();

  constructor(
    name: string,
    private readonly limits: Required<RelayLimits>,
  ) {
    this.name = name;
  }

  /** Validates, retains and fans out one command. Throws EINVAL / ELIMIT / ECLOSED. */
  publish(input: unknown): { cursor: number; widgetId?: string } {
    if (this.closed)
      throw new ComputerError("ECLOSED", `channel "${this.name}" is closed`, { status: 410 });
    const checked = validateCommand(input);
    if (!checked.ok) throw new ComputerError("EINVAL", `invalid command: ${checked.reason}`);
    const command = checked.command;
    const bytes = JSON.stringify(command).length;
    if (command.type === "render" && !this.makeRoom(bytes)) {
      throw new ComputerError("ELIMIT", `channel "${this.name}" retains too many widgets`);
    }
    const cursor = ++this.head;
    let widgetId: string | undefined;
    let retainedCommand: Command = command;
    let droppable = false;
    if (command.type === "render") {
      widgetId = `w${cursor}`;
      this.widgets.set(widgetId, { render: cursor });
    } else {
      const w = this.widgets.get(command.widgetId);
      if (!w) {
        droppable = true; // an id minted elsewhere: keep for resumes, drop first when full
      } else if (command.type === "update") {
        if (w.update !== undefined) {
          const prev = this.retained.get(w.update)!;
          const merged = {
            ...(prev.command as { params: Record<string, unknown> }).params,
            ...command.params,
          };
          retainedCommand = {
            type: "update",
            widgetId: command.widgetId,
            params: merged,
          } as Command;
          this.drop(w.update);
        }
        w.update = cursor;
      } else {
        this.drop(w.render);
        if (w.update !== undefined) this.drop(w.update);
        this.widgets.delete(command.widgetId);
        droppable = true;
      }
    }
    this.retain(cursor, retainedCommand, droppable);
    this.makeRoom(0);
    const entry = { cursor, command };
    this.recent.push(entry);
    this.recentBytes += bytes;
    // Trim in batches (down to the bound once it is exceeded by a quarter):
    // dropping one entry per publish from the front of a 1,000-entry array
    // was the relay's hottest line.
    const maxRecent = this.limits.maxRecent;
    if (
      this.recent.length > maxRecent + (maxRecent >> 2) ||
      this.recentBytes > this.limits.maxRecentBytes
    ) {
      let drop = Math.max(0, this.recent.length - maxRecent);
      for (let i = 0; i < drop; i++)
        this.recentBytes -= JSON.stringify(this.recent[i]!.command).length;
      while (this.recent.length - drop > 1 && this.recentBytes > this.limits.maxRecentBytes) {
        this.recentBytes -= JSON.stringify(this.recent[drop]!.command).length;
        drop++;
      }
      if (drop > 0) this.recent.splice(0, drop);
    }
    for (const s of this.subscribers) s(entry);
    return widgetId === undefined ? { cursor } : { cursor, widgetId };
  }

  private retain(cursor: number, command: Command, droppable: boolean) {
    const bytes = JSON.stringify(command).length;
    this.retained.set(cursor, { command, bytes, droppable });
    this.retainedBytes += bytes;
  }

  private drop(cursor: number) {
    const r = this.retained.get(cursor);
    if (!r) return;
    this.retained.delete(cursor);
    this.retainedBytes -= r.bytes;
  }

  /** Drops droppable entries oldest first until `extra` more bytes and one more entry fit. */
  private makeRoom(extra: number): boolean {
    const fits = () =>
      this.retained.size + (extra > 0 ? 1 : 0) <= this.limits.maxRetained &&
      this.retainedBytes + extra <= this.limits.maxRetainedBytes;
    if (fits()) return true;
    for (const [cursor, r] of this.retained) {
      if (!r.droppable) continue;
      this.drop(cursor);
      this.floor = Math.max(this.floor, cursor);
      if (fits()) return true;
    }
    return fits();
  }

  /**
   * What a page at `after` needs. after=0 (a new page): the compacted current
   * state. A resume inside the recent window: exactly the commands it missed.
   * An older resume: the compacted entries past it (same resulting state).
   * Throws ELOG_TRUNCATED when after is below the floor or ahead of the head.
   */
  replay(after: number): RelayEntry[] {
    if (after > this.head) {
      // A cursor from the future: the channel was recreated (server restart, memory relay).
      throw new ComputerError(
        "ELOG_TRUNCATED",
        `cursor ${after} is ahead of channel "${this.name}" (head ${this.head}); it was restarted: start over with after=0`,
        { earliestSeq: 0 },
      );
    }
    if (after > 0 && after < this.floor) {
      throw new ComputerError(
        "ELOG_TRUNCATED",
        `cursor ${after} is older than what channel "${this.name}" retains; start over with after=0`,
        { earliestSeq: this.floor },
      );
    }
    const firstRecent = this.recent[0]?.cursor ?? this.head + 1;
    if (after > 0 && after >= firstRecent - 1) {
      let i = this.recent.length;
      while (i > 0 && this.recent[i - 1]!.cursor > after) i--;
      return this.recent.slice(i);
    }
    const out: RelayEntry[] = [];
    for (const [cursor, r] of this.retained)
      if (cursor > after) out.push({ cursor, command: r.command });
    return out;
  }

  /** Replay then follow, atomically (nothing published in between is lost). */
  subscribe(after: number, fn: Subscriber): { replay: RelayEntry[]; unsubscribe: () => void } {
    const replay = this.replay(after);
    this.subscribers.add(fn);
    return { replay, unsubscribe: () => this.subscribers.delete(fn) };
  }

  get subscriberCount(): number {
    return this.subscribers.size;
  }

  /**
   * Ends every subscription and refuses further commands: with [DONE] (the
   * channel is over), or, for a server shutdown, by cutting the connections
   * so pages keep reconnecting and pick up whatever the next server has.
   */
  close(mode: "done" | "cut" = "done"): void {
    if (this.closed) return;
    this.closed = true;
    this.endMode = mode;
    for (const s of this.subscribers) s(mode);
    this.subscribers.clear();
    for (const w of this.eventWaiters) w();
  }

  // ---- UI events (UI -> agent) ----

  postEvent(input: unknown): LoggedUiEvent {
    const ev = checkUiEvent(input);
    const logged = { ...ev, seq: ++this.eventsHead } as LoggedUiEvent;
    this.events.push(logged);
    if (this.events.length > this.limits.maxEvents)
      this.events.splice(0, this.events.length - this.limits.maxEvents);
    for (const l of this.eventListeners) {
      try {
        l(logged);
      } catch (err) {
        console.error(
          JSON.stringify({
            msg: "ui event listener failed",
            channel: this.name,
            error: String(err),
          }),
        );
      }
    }
    for (const w of this.eventWaiters) w();
    this.eventWaiters.clear();
    return logged;
  }

  get eventCursor(): number {
    return this.eventsHead;
  }

  /** Events with seq > after. Throws ELOG_TRUNCATED when some were dropped. */
  readEvents(after: number, limit = 1000): LoggedUiEvent[] {
    if (after > this.eventsHead) {
      throw new ComputerError(
        "ELOG_TRUNCATED",
        `event cursor ${after} is ahead of channel "${this.name}" (${this.eventsHead}); it was restarted`,
        { earliestSeq: 0 },
      );
    }
    const first = this.events[0]?.seq ?? this.eventsHead + 1;
    if (after + 1 < first) {
      throw new ComputerError("ELOG_TRUNCATED", `UI events after ${after} were dropped`, {
        earliestSeq: first,
      });
    }
    const start = this.events.length - (this.eventsHead - after);
    return this.events.slice(Math.max(0, start), Math.max(0, start) + limit);
  }

  /** Resolves when an event with seq > after exists, the channel closes, the wait ends or the signal aborts. */
  waitForEvents(after: number, ms: number, signal?: AbortSignal): Promise<void> {
    if (this.eventsHead > after || this.closed || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.eventWaiters.delete(done);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.eventWaiters.add(done);
      signal?.addEventListener("abort", done, { once: true });
    });
  }

  /** In-process listener (the dashboard driver). Returns an unsubscribe function. */
  onEvent(fn: (ev: LoggedUiEvent) => void): () => void {
    this.eventListeners.add(fn);
    return () => this.eventListeners.delete(fn);
  }
}

/** UI events are untrusted page input: the protocol's validator, plus no unknown fields. */
export function checkUiEvent(input: unknown): UiEvent {
  const r = validateUiEvent(input);
  if (!r.ok) throw new ComputerError("EINVAL", `invalid UI event: ${r.reason}`);
  for (const k of Object.keys(r.event)) {
    if (k !== "type" && k !== "widgetId" && k !== "payload" && k !== "timestamp") {
      throw new ComputerError("EINVAL", `invalid UI event: unknown field "${k}"`);
    }
  }
  const ev: UiEvent = {
    type: r.event.type,
    widgetId: r.event.widgetId,
    timestamp: r.event.timestamp,
  };
  if (r.event.payload !== undefined) ev.payload = r.event.payload;
  return ev;
}

export class UiRelay {
  readonly limits: Required<RelayLimits>;
  private readonly channels = new Map<string, UiChannel>();

  constructor(limits: RelayLimits = {}) {
    this.limits = {
      maxRetained: limits.maxRetained ?? 10_000,
      maxRetainedBytes: limits.maxRetainedBytes ?? 32 * 1024 * 1024,
      maxEvents: limits.maxEvents ?? 10_000,
      maxRecent: limits.maxRecent ?? 1000,
      maxRecentBytes: limits.maxRecentBytes ?? 4 * 1024 * 1024,
      maxChannels: limits.maxChannels ?? 1000,
      maxSubscriberBuffer: limits.maxSubscriberBuffer ?? 8 * 1024 * 1024,
      maxWaitMs: limits.maxWaitMs ?? 30_000,
      heartbeatMs: limits.heartbeatMs ?? 15_000,
    };
  }

  /** The channel by name, created on first use. */
  channel(name: string): UiChannel {
    if (!CHANNEL_RE.test(name))
      throw new ComputerError(
        "EINVAL",
        "channel names are 1-128 characters of A-Z a-z 0-9 . _ ~ -",
      );
    let ch = this.channels.get(name);
    if (!ch || ch.closed) {
      if (!ch && this.channels.size >= this.limits.maxChannels)
        throw new ComputerError("ELIMIT", "too many UI channels");
      ch = new UiChannel(name, this.limits);
      this.channels.set(name, ch);
    }
    return ch;
  }

  publish(channel: string, command: unknown): { cursor: number; widgetId?: string } {
    return this.channel(channel).publish(command);
  }

  /** Closes a channel (subscribers get [DONE]) and forgets it. */
  deleteChannel(name: string): void {
    const ch = this.channels.get(name);
    if (!ch) return;
    ch.close();
    this.channels.delete(name);
  }

  list(): { name: string; cursor: number; subscribers: number; events: number }[] {
    return [...this.channels.values()].map((c) => ({
      name: c.name,
      cursor: c.head,
      subscribers: c.subscriberCount,
      events: c.eventCursor,
    }));
  }

  /** Server shutdown: cut every page's connection (no [DONE]: the page should come back). */
  close(): void {
    for (const ch of this.channels.values()) ch.close("cut");
    this.channels.clear();
  }
}

export interface UiRoutesDeps {
  /** Share a relay (e.g. with the dashboard); created when absent. */
  relay?: UiRelay;
  limits?: RelayLimits;
}

const relays = new WeakMap<Router, UiRelay>();

/** The relay mounted on `router`, if registerUiRoutes ran. */
export function relayOf(router: Router): UiRelay | undefined {
  return relays.get(router);
}

function parseCursor(value: string | null | undefined, name: string): number {
  if (value === null || value === undefined || value === "") return 0;
  if (!/^\d{1,15}$/.test(value))
    throw new ComputerError("EINVAL", `${name} must be a non-negative integer`);
  return Number(value);
}

function parseWait(value: string | null, max: number): number {
  if (value === null || value === "") return 0;
  if (!/^\d{1,9}$/.test(value))
    throw new ComputerError("EINVAL", "wait must be milliseconds (integer)");
  return Math.min(Number(value), max);
}

/** Mounts the relay routes; returns the relay so the server (and dashboard) can publish in-process. */
export function registerUiRoutes(router: Router, deps: UiRoutesDeps = {}): UiRelay {
  const relay = deps.relay ?? relays.get(router) ?? new UiRelay(deps.limits);
  relays.set(router, relay);
  const { limits } = relay;
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024 });

  router.get("/v1/ui", (_req, res) => sendJson(res, 200, { channels: relay.list() }));

  router.post("/v1/ui/:channel/commands", async (req, res, params) => {
    const ch = relay.channel(params.channel!);
    const body = await readJsonBody(req);
    // One command, or {commands:[...]} for a batch (validated all before any is applied).
    if (Array.isArray((body as { commands?: unknown }).commands)) {
      const list = (body as { commands: unknown[] }).commands;
      for (const [i, c] of list.entries()) {
        const r = validateCommand(c);
        if (!r.ok) throw new ComputerError("EINVAL", `invalid command at index ${i}: ${r.reason}`);
      }
      const results = list.map((c) => ch.publish(c));
      sendJson(res, 200, { results, cursor: ch.head });
      return;
    }
    sendJson(res, 200, ch.publish(body));
  });

  router.delete("/v1/ui/:channel", (_req, res, params) => {
    relay.deleteChannel(params.channel!);
    res.statusCode = 204;
    res.end();
  });

  router.get("/v1/ui/:channel/stream", (req, res, params, ctx) =>
    sseStream(relay.channel(params.channel!), req, res, ctx, limits),
  );

  router.get("/v1/ui/:channel/poll", async (req, res, params, ctx) => {
    const ch = relay.channel(params.channel!);
    const after = parseCursor(ctx.url.searchParams.get("after"), "after");
    const wait = parseWait(ctx.url.searchParams.get("wait"), limits.maxWaitMs);
    let entries = ch.replay(after);
    if (entries.length === 0 && !ch.closed && wait > 0) {
      entries = await new Promise<RelayEntry[]>((resolve) => {
        let sub: { unsubscribe: () => void } | undefined;
        const finish = () => {
          clearTimeout(timer);
          sub?.unsubscribe();
          req.off("close", finish);
          // Read from the retained log, not the live callback: one path for both.
          resolve(ch.closed ? [] : safeReplay(ch, after));
        };
        const timer = setTimeout(finish, wait);
        req.on("close", finish);
        // Wake on the first command (or [DONE]); a microtask lets a burst land together.
        sub = ch.subscribe(ch.head, () => queueMicrotask(finish));
      });
    }
    if (res.destroyed) return;
    if (ch.closed && ch.endMode === "cut") {
      res.destroy(); // shutting down: the page retries, it is not "done"
      return;
    }
    sendJson(res, 200, {
      commands: entries.map((e) => e.command),
      // Extension to WIRE.md §3: each command's cursor, so a page mints the same
      // widget ids (w<cursor>) over polling as over SSE and WebSocket.
      positions: entries.map((e) => e.cursor),
      // Everything retained after `after` was sent, so the page now stands at the head
      // (later commands may have been merged away by compaction).
      cursor: Math.max(after, ch.head),
      done: ch.closed,
    });
  });

  router.post("/v1/ui/:channel/events", async (req, res, params) => {
    const ch = relay.channel(params.channel!);
    const ev = ch.postEvent(await readJsonBody(req));
    sendJson(res, 200, { seq: ev.seq });
  });

  router.get("/v1/ui/:channel/events", async (req, res, params, ctx) => {
    const ch = relay.channel(params.channel!);
    if (ctx.url.searchParams.get("after") === "tail") {
      sendJson(res, 200, { events: [], cursor: ch.eventCursor, done: ch.closed });
      return;
    }
    const after = parseCursor(ctx.url.searchParams.get("after"), "after");
    const wait = parseWait(ctx.url.searchParams.get("wait"), limits.maxWaitMs);
    ch.readEvents(after, 0); // truncation check before waiting
    const ac = new AbortController();
    const onClose = () => ac.abort();
    req.on("close", onClose);
    await ch.waitForEvents(after, wait, ac.signal);
    req.off("close", onClose);
    if (res.destroyed) return;
    const events = ch.readEvents(after);
    sendJson(res, 200, {
      events,
      cursor: events.length > 0 ? events[events.length - 1]!.seq : after,
      done: ch.closed,
    });
  });

  router.upgrade("/v1/ui/:channel/ws", (req, socket, head, params, ctx) => {
    const ch = relay.channel(params.channel!);
    const after = parseCursor(ctx.url.searchParams.get("after"), "after");
    const envelope = ctx.url.searchParams.get("cursors") === "1";
    ch.replay(after); // fail the upgrade with 410 before switching protocols
    wss.handleUpgrade(req, socket as Duplex, head, (ws) =>
      wsSession(ch, ws, after, envelope, limits),
    );
  });

  return relay;
}

function safeReplay(ch: UiChannel, after: number): RelayEntry[] {
  try {
    return ch.replay(after);
  } catch {
    return [];
  }
}

function sseStream(
  ch: UiChannel,
  req: IncomingMessage,
  res: ServerResponse,
  ctx: RouteContext,
  limits: Required<RelayLimits>,
): void {
  const lastId = req.headers["last-event-id"];
  const after = parseCursor(
    typeof lastId === "string" && lastId !== "" ? lastId.trim() : ctx.url.searchParams.get("after"),
    "Last-Event-ID",
  );
  const queue: string[] = [];
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    clearInterval(hb);
    sub.unsubscribe();
    res.end();
  };
  const write = (text: string) => {
    if (ended) return;
    res.write(text);
    if (res.writableLength > limits.maxSubscriberBuffer) {
      // Too slow: cut it; the page resumes from its Last-Event-ID.
      ended = true;
      clearInterval(hb);
      sub.unsubscribe();
      res.destroy();
    }
  };
  const frame = (e: RelayEntry) => `id: ${e.cursor}\ndata: ${JSON.stringify(e.command)}\n\n`;
  const sub = ch.subscribe(after, (e) => {
    if (e === "done") {
      write("data: [DONE]\n\n");
      end();
    } else if (e === "cut") {
      end();
      res.destroy();
    } else write(frame(e));
  });
  res.statusCode = 200;
  res.setHeader("content-type", "text/event-stream; charset=utf-8");
  res.setHeader("cache-control", "no-store");
  res.setHeader("x-accel-buffering", "no");
  res.flushHeaders();
  for (const e of sub.replay) queue.push(frame(e));
  // Compaction can leave the last replayed cursor below the head. An `id:` field
  // with no data moves the page's Last-Event-ID to the head without dispatching
  // anything (WHATWG), so a reconnect does not replay the merged tail again.
  const lastSent = sub.replay.length > 0 ? sub.replay[sub.replay.length - 1]!.cursor : after;
  if (ch.head > lastSent) queue.push(`id: ${ch.head}\n\n`);
  write(queue.join(""));
  if (ch.closed) {
    write("data: [DONE]\n\n");
    end();
  }
  const hb = setInterval(() => write(": hb\n\n"), limits.heartbeatMs);
  hb.unref?.();
  req.on("close", end);
}

function wsSession(
  ch: UiChannel,
  ws: WebSocket,
  after: number,
  envelope: boolean,
  limits: Required<RelayLimits>,
): void {
  let sub: { replay: RelayEntry[]; unsubscribe: () => void } | undefined;
  let corked = false;
  const send = (e: RelayEntry | "done" | "cut") => {
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
    // possible: cork the socket until the current tick's sends are queued.
    // `_socket` is ws's underlying net.Socket (not public API, so guarded).
    const raw = (ws as unknown as { _socket?: { cork?(): void; uncork?(): void } })._socket;
    if (raw?.cork && !corked) {
      corked = true;
      raw.cork();
      setImmediate(() => {
        corked = false;
        raw.uncork?.();
      });
    }
    ws.send(
      envelope
        ? JSON.stringify({ cursor: e.cursor, command: e.command })
        : JSON.stringify(e.command),
    );
    if (ws.bufferedAmount > limits.maxSubscriberBuffer) ws.terminate(); // too slow: it resumes by cursor
  };
  const start = (from: number) => {
    sub?.unsubscribe();
    try {
      sub = ch.subscribe(from, send);
    } catch (err) {
      const e = err as ComputerError;
      ws.close(4410, `${e.code}: ${e.message}`.slice(0, 120));
      return;
    }
    for (const e of sub.replay) send(e);
    if (ch.closed) send(ch.endMode);
  };
  // Server -> UI messages are commands only (WIRE.md §3), so a rejected UI event
  // is reported only to pages that asked for envelopes (`?cursors=1`).
  const reject = (code: string, message: string) => {
    if (envelope && ws.readyState === ws.OPEN)
      ws.send(JSON.stringify({ error: { code, message } }));
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
      reject("EINVAL", "malformed JSON");
      return;
    }
    const m = msg as { type?: unknown; after?: unknown };
    if (m && m.type === "aui:resume") {
      // Re-subscribe on the same socket from a cursor (e.g. after the page reset itself).
      start(typeof m.after === "number" && m.after >= 0 ? Math.floor(m.after) : 0);
      return;
    }
    try {
      ch.postEvent(msg);
    } catch (err) {
      const e = err as ComputerError;
      reject(e.code, e.message);
    }
  });
  ws.on("close", () => sub?.unsubscribe());
  ws.on("error", () => sub?.unsubscribe());
}
