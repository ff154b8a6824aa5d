// One execution's events as an HTTP response, exec-wire (NDJSON) or SSE.
//
// Both formats come from one code path (openSubscription + pumpEvents), so
// they cannot disagree: the difference is only the per-event encoder and how
// the end is announced (exec-wire: the exit frame then EOF; SSE: the exit
// event, then `event: end` / `data: [DONE]`). Failures before the first byte
// are JSON errors with a status (404, 410 with earliestSeq, ...) because the
// subscription is open before any header is sent; failures after it are an
// in-band error frame (exec-wire) or `event: error` (SSE), then the end.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { ExecHandle } from "../../runtime/types.js";
import { ComputerError } from "../../wire/errors.js";
import { encodeErrorFrame, errorFrameToJson } from "../../wire/exec-wire/index.js";
import type { After } from "../../wire/position.js";
import { formatSseEvent } from "../../wire/sse.js";
import type { ServerDeps } from "../deps.js";
import { errorFrame } from "../http/errors.js";
import type { StreamFormat } from "./encode-cache.js";
import { pumpEvents } from "./pump.js";
import { responseSink } from "./sinks.js";
import { openSubscription } from "./subscribe.js";

/** Content negotiation for event streams; `?format=` overrides Accept (for curl and EventSource). */
export function negotiateFormat(req: IncomingMessage, url: URL): StreamFormat {
  const q = url.searchParams.get("format");
  if (q === "sse") return "sse";
  if (q === "ndjson" || q === "jsonl") return "ndjson";
  if (q !== null) throw new ComputerError("EINVAL", 'format must be "ndjson" or "sse"');
  const accept = String(req.headers.accept ?? "").toLowerCase();
  if (
    accept === "" ||
    accept.includes("application/x-ndjson") ||
    accept.includes("application/jsonl")
  ) {
    return "ndjson";
  }
  if (accept.includes("text/event-stream")) return "sse";
  if (accept.includes("*/*") || accept.includes("application/*")) return "ndjson";
  throw new ComputerError(
    "ENOTACCEPTABLE",
    "event streams are application/x-ndjson or text/event-stream",
  );
}

export interface HttpStreamOptions {
  after: After;
  format: StreamFormat;
  /** The client wants heartbeats (`?heartbeats=0` turns them off). */
  heartbeats: boolean;
  /** Headers added to the stream's answer (e.g. `location` for POST ?stream=1). */
  headers?: Record<string, string>;
}

/** Streams `handle`'s events into `res` until the exit event, the end of the stream, or the client left. */
export async function streamEvents(
  deps: ServerDeps,
  req: IncomingMessage,
  res: ServerResponse,
  handle: ExecHandle,
  options: HttpStreamOptions,
): Promise<void> {
  const { format } = options;
  const ac = new AbortController();
  const sub = await openSubscription(deps, handle, {
    after: options.after,
    heartbeats: options.heartbeats,
    signal: ac.signal,
    transport: format,
  });
  res.statusCode = 200;
  res.setHeader(
    "content-type",
    format === "sse" ? "text/event-stream; charset=utf-8" : "application/x-ndjson",
  );
  res.setHeader("cache-control", "no-store");
  res.setHeader("x-accel-buffering", "no"); // proxies: do not buffer a live stream
  res.setHeader("x-exec-id", handle.id);
  for (const [k, v] of Object.entries(options.headers ?? {})) res.setHeader(k, v);
  res.flushHeaders();
  // Latency over batching at the TCP layer: our own batching already merges frames.
  req.socket.setNoDelay(true);
  const sink = responseSink(res);
  const onClose = () => ac.abort();
  res.once("close", onClose);
  const encoder = deps.encoders.open(format, handle.id);
  try {
    if (format === "sse") res.write("retry: 1000\n\n");
    const end = await pumpEvents(sub.stream, sink, {
      encode: encoder.encode,
      onBytes: (n) => deps.metrics.bytesStreamed.inc({ transport: format }, n),
    });
    if (end.kind === "closed" || sink.closed) return;
    if (end.kind === "exit" || end.kind === "eof") {
      // eof without exit: nothing more will come (a "tail" of a finished
      // execution, or it was disposed). SSE still says end so an EventSource
      // does not reconnect forever; exec-wire clients check the record.
      if (format === "sse") res.write("event: end\ndata: [DONE]\n\n");
    } else {
      const frame = errorFrame(handle.id, end.error);
      deps.metrics.errors.inc({ code: frame.code });
      if (format === "sse") {
        res.write(formatSseEvent({ event: "error", data: errorFrameToJson(frame) }));
      } else {
        res.write(encodeErrorFrame(frame));
      }
    }
    res.end();
  } finally {
    encoder.close();
    res.off("close", onClose);
    sink.dispose();
    sub.release();
  }
}
