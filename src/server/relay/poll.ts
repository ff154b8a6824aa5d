// The relay's (long-)polling transport (`GET /v1/ui/:channel/poll?after=N&wait=MS`),
// for pages behind proxies that break streaming. One JSON answer per request:
// `{"commands":[…],"positions":[…],"cursor":n,"done":bool}`. `positions`
// carries each command's seq, so a page mints the same widget ids (`w<seq>`)
// over polling as over SSE and WebSocket; `cursor` is where the page stands
// afterwards. With `wait`, an empty answer is held until a command arrives.

import type { IncomingMessage, ServerResponse } from "node:http";
import { sendJson } from "../http/errors.js";
import type { RelayEntry, UiChannel } from "./channel.js";
import { parseChannelAfter, parseWait } from "./params.js";

export interface PollOptions {
  maxWaitMs: number;
}

/** The channel's entries after `after`, or none when it can no longer serve them (closed meanwhile). */
function replayOrNothing(ch: UiChannel, after: number): RelayEntry[] {
  try {
    return ch.replay(after);
  } catch {
    return [];
  }
}

/** Answers one poll; throws ELOG_TRUNCATED (410) for an `after` the channel cannot serve. */
export async function servePoll(
  ch: UiChannel,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  options: PollOptions,
): Promise<void> {
  const after = parseChannelAfter(url.searchParams.get("after"), "after");
  const wait = parseWait(url.searchParams.get("wait"), options.maxWaitMs);
  ch.polled();
  let entries = ch.replay(after);
  if (entries.length === 0 && !ch.closed && wait > 0) {
    entries = await new Promise<RelayEntry[]>((resolve) => {
      let sub: { unsubscribe: () => void } | undefined;
      const finish = () => {
        clearTimeout(timer);
        sub?.unsubscribe();
        req.off("close", finish);
        // Read from the retained log, not the live callback: one path for both.
        resolve(ch.closed ? [] : replayOrNothing(ch, after));
      };
      const timer = setTimeout(finish, wait);
      req.on("close", finish);
      // Wake on the first command (or the end); a microtask lets a burst land together.
      sub = ch.subscribe(ch.lastSeq, () => queueMicrotask(finish));
    });
  }
  if (res.destroyed) return;
  if (ch.closed && ch.endMode === "cut") {
    res.destroy(); // shutting down: the page retries, it is not "done"
    return;
  }
  sendJson(res, 200, {
    commands: entries.map((e) => e.command),
    positions: entries.map((e) => e.seq),
    // Everything retained after `after` was sent, so the page now stands at the
    // channel's last seq (later commands may have been merged away by compaction).
    cursor: Math.max(after, ch.lastSeq),
    done: ch.closed,
  });
}
