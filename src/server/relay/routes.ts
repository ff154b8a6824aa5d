// The relay's HTTP routes (`/v1/ui/…`, docs/ui.md has the table): agents
// publish commands and read UI events here; pages follow a channel over one
// of three transports (sse.ts, ws.ts, poll.ts). Every route resolves its
// channel through the relay it was given, so each server has its own.

import { parseAfter } from "../../wire/position.js";
import { readJsonBody } from "../http/body.js";
import { sendJson } from "../http/errors.js";
import type { Router } from "../http/router.js";
import type { Published } from "./channel.js";
import { parseChannelAfter, parseWait } from "./params.js";
import { servePoll } from "./poll.js";
import { type RelayLimits, UiRelay } from "./registry.js";
import { serveSse } from "./sse.js";
import { RelayWebSockets } from "./ws.js";

export interface UiRoutesDeps {
  /** The server's relay (shared with the dashboard); a new one when absent. */
  relay?: UiRelay;
  /** Limits for the new relay (ignored when `relay` is given). */
  limits?: RelayLimits;
}

/** Mounts the relay routes; returns the relay so the server (and dashboard) can publish in-process. */
export function registerUiRoutes(router: Router, deps: UiRoutesDeps = {}): UiRelay {
  const relay = deps.relay ?? new UiRelay(deps.limits);
  const { limits } = relay;
  const sockets = new RelayWebSockets(limits);

  router.get("/v1/ui", async (_req, res) => {
    await relay.ready;
    sendJson(res, 200, { channels: relay.list() });
  });

  router.post("/v1/ui/:channel/commands", async (req, res, params) => {
    await relay.ready;
    const ch = relay.channel(params.channel!);
    const body = await readJsonBody(req);
    // One command, or {commands:[...]} for a batch.
    const batch = (body as { commands?: unknown }).commands;
    if (Array.isArray(batch)) {
      const results = ch.publishAll(batch).map(toPublishAnswer);
      sendJson(res, 200, { results, cursor: ch.lastSeq });
      return;
    }
    sendJson(res, 200, toPublishAnswer(ch.publish(body)));
  });

  router.delete("/v1/ui/:channel", async (_req, res, params) => {
    await relay.ready;
    relay.deleteChannel(params.channel!);
    res.statusCode = 204;
    res.end();
  });

  router.get("/v1/ui/:channel/stream", async (req, res, params, ctx) => {
    await relay.ready;
    return serveSse(relay.channel(params.channel!), req, res, ctx.url, limits);
  });

  router.get("/v1/ui/:channel/poll", async (req, res, params, ctx) => {
    await relay.ready;
    return servePoll(relay.channel(params.channel!), req, res, ctx.url, limits);
  });

  router.upgrade("/v1/ui/:channel/ws", async (req, socket, head, params, ctx) => {
    await relay.ready;
    const ch = relay.channel(params.channel!);
    const after = parseChannelAfter(ctx.url.searchParams.get("after"), "after");
    const envelope = ctx.url.searchParams.get("cursors") === "1";
    ch.replay(after); // fail the upgrade with 410 before switching protocols
    sockets.accept(ch, req, socket, head, after, envelope);
  });

  router.post("/v1/ui/:channel/events", async (req, res, params) => {
    await relay.ready;
    const ch = relay.channel(params.channel!);
    const ev = ch.postEvent(await readJsonBody(req));
    sendJson(res, 200, { seq: ev.seq });
  });

  // The agent's read of UI events: a long poll, resumable by seq.
  router.get("/v1/ui/:channel/events", async (req, res, params, ctx) => {
    await relay.ready;
    const ch = relay.channel(params.channel!);
    const after = parseAfter(ctx.url.searchParams.get("after"));
    if (after === "tail") {
      sendJson(res, 200, { events: [], cursor: ch.lastEventSeq, done: ch.closed });
      return;
    }
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

  return relay;
}

/** A publish as the API answers it: the seq is called `cursor` on the wire. */
function toPublishAnswer(p: Published): { cursor: number; widgetId?: string } {
  return p.widgetId === undefined ? { cursor: p.seq } : { cursor: p.seq, widgetId: p.widgetId };
}
