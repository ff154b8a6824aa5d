// The relay's Server-Sent Events transport (`GET /v1/ui/:channel/stream`):
// one event per command with the command's seq as `id:`, so an EventSource
// resumes by itself through `Last-Event-ID`; `data: [DONE]` when the channel
// ends; a comment heartbeat so proxies keep the connection open. Framing is
// the project's SSE codec (wire/sse.ts).
//
// A slow page never holds up publishers: once more than
// `maxSubscriberBuffer` bytes wait in its response it is cut, and it resumes
// from its Last-Event-ID.

import type { IncomingMessage, ServerResponse } from "node:http";
import { formatSseComment, formatSseEvent, formatSseIdOnly } from "../../wire/sse.js";
import type { RelayEntry, UiChannel } from "./channel.js";
import { parseChannelAfter } from "./params.js";

const DONE = formatSseEvent({ data: "[DONE]" });
const HEARTBEAT = formatSseComment("hb");

function commandEvent(e: RelayEntry): string {
  return formatSseEvent({ id: e.seq, data: JSON.stringify(e.command) });
}

export interface SseOptions {
  maxSubscriberBuffer: number;
  heartbeatMs: number;
}

/** Serves one page's command stream until the channel ends, the page leaves or it falls too far behind. */
export function serveSse(
  ch: UiChannel,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  options: SseOptions,
): void {
  const lastId = req.headers["last-event-id"];
  const after = parseChannelAfter(
    typeof lastId === "string" && lastId !== "" ? lastId.trim() : url.searchParams.get("after"),
    "Last-Event-ID",
  );
  let ended = false;
  // Declared before anything can end the stream: the replay itself may
  // overflow the buffer bound, before the heartbeat would otherwise exist.
  let hb: ReturnType<typeof setInterval> | undefined;
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
    if (res.writableLength > options.maxSubscriberBuffer) {
      // Too slow: cut it; the page resumes from its Last-Event-ID.
      ended = true;
      clearInterval(hb);
      sub.unsubscribe();
      res.destroy();
    }
  };
  const sub = ch.subscribe(after, (e) => {
    if (e === "done") {
      write(DONE);
      end();
    } else if (e === "cut") {
      end();
      res.destroy();
    } else write(commandEvent(e));
  });
  res.statusCode = 200;
  res.setHeader("content-type", "text/event-stream; charset=utf-8");
  res.setHeader("cache-control", "no-store");
  res.setHeader("x-accel-buffering", "no");
  res.flushHeaders();
  const queue = sub.replay.map(commandEvent);
  // Compaction can leave the last replayed seq below the channel's last seq:
  // move the page's Last-Event-ID to it, so a reconnect does not replay the
  // merged tail again.
  const lastSent = sub.replay.length > 0 ? sub.replay[sub.replay.length - 1]!.seq : after;
  if (ch.lastSeq > lastSent) queue.push(formatSseIdOnly(ch.lastSeq));
  write(queue.join(""));
  if (ch.closed) {
    write(DONE);
    end();
  }
  if (!ended) {
    hb = setInterval(() => write(HEARTBEAT), options.heartbeatMs);
    hb.unref?.();
  }
  req.on("close", end);
}
