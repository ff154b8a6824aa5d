// The one prologue of every event stream the server opens, HTTP (exec-wire,
// SSE) and WebSocket alike: read the start position with the one parser
// (parseAfter), take a subscriber slot, and open the stream with
// `handle.subscribe()`, which rejects with ENOENT, EINVAL (beyond the last
// seq) or ELOG_TRUNCATED (with earliestSeq) before any event. Only once this
// resolved does a transport commit to a stream (HTTP headers, WebSocket
// frames), so a bad start is a status or one error frame, never a stream
// that breaks at once, and every transport refuses it with the same code and
// message.

import type { IncomingMessage } from "node:http";
import type { ExecHandle } from "../../runtime/types.js";
import { ComputerError } from "../../wire/errors.js";
import { type After, parseAfter } from "../../wire/position.js";
import type { ExecEvent } from "../../wire/types.js";
import type { ServerDeps } from "../deps.js";

/** The metrics label of a stream's transport. */
export type Transport = "ndjson" | "sse" | "ws";

/**
 * The start of an HTTP event stream: `Last-Event-ID` (wins: it is what an
 * EventSource sends on reconnect, the client's latest truth), else `?after=`
 * (absent: 0, everything).
 */
export function afterOfRequest(req: IncomingMessage, url: URL): After {
  const lastEventId = req.headers["last-event-id"];
  if (typeof lastEventId === "string" && lastEventId.trim() !== "") {
    return parseAfter(lastEventId.trim(), "Last-Event-ID");
  }
  return parseAfter(url.searchParams.get("after"));
}

export interface SubscribeOptions {
  after: After;
  /** The subscriber wants heartbeats (delivered only when the server has them on). */
  heartbeats: boolean;
  /** Aborts the stream (the peer went away, or unsubscribed). */
  signal: AbortSignal;
  transport: Transport;
}

/** An open event stream holding one subscriber slot. */
export interface Subscription {
  stream: ReadableStream<ExecEvent>;
  /** Gives the slot back (subscriber count and gauge); idempotent. */
  release(): void;
}

/**
 * Opens `handle`'s events after `options.after`. Throws ELIMIT when the
 * server holds `maxSubscribers` streams, and whatever `handle.subscribe()`
 * rejects with; nothing has been sent to the peer in either case.
 */
export async function openSubscription(
  deps: ServerDeps,
  handle: ExecHandle,
  options: SubscribeOptions,
): Promise<Subscription> {
  const max = deps.limits.maxSubscribers;
  if (deps.subscriptions.count >= max) {
    throw new ComputerError("ELIMIT", `too many subscribers (max ${max})`);
  }
  const stream = await handle.subscribe({
    after: options.after,
    heartbeats: options.heartbeats && deps.heartbeats,
    signal: options.signal,
  });
  deps.subscriptions.count++;
  deps.metrics.subscribers.inc({ transport: options.transport });
  let held = true;
  return {
    stream,
    release() {
      if (!held) return;
      held = false;
      deps.subscriptions.count--;
      deps.metrics.subscribers.dec({ transport: options.transport });
    },
  };
}
