// What route modules receive from the server: the computer, limits, metrics,
// and the frame encoders. One object built by app.ts, so the exec
// API, files API and WebSocket are all wired the same way, a test can build it
// with a fake ComputerApi, and nothing a route uses is module-level state
// shared with another server in the same process.

import type { ComputerApi } from "../runtime/types.js";
import type { ServerMetrics } from "./metrics.js";
import type { FrameEncoders } from "./streaming/encode-cache.js";

export interface ServerLimits {
  /** Max JSON request body (bytes). Default 1 MiB. */
  maxJsonBytes: number;
  /** Max file upload via PUT /v1/files (bytes). Default 1 GiB. */
  maxFileBytes: number;
  /** Max bytes per POST /v1/execs/:id/stdin request. Default 64 MiB. */
  maxStdinBytes: number;
  /** Max open event-stream subscriptions (HTTP + WebSocket). Default 10000. */
  maxSubscribers: number;
  /** WebSocket: pause a subscription while the socket buffers more than this. Default 1 MiB. */
  wsHighWaterBytes: number;
  /** Open connections; 0 (default) is half the soft open-files limit (http/connections.ts). */
  maxConnections: number;
  /** Time a connection has to send its request headers (ms). Default 10 s. */
  headersTimeoutMs: number;
  /** `GET /v1/execs/:id/result` answers assembled at once (each buffers up to the result size). Default 4. */
  maxConcurrentResults: number;
}

export const DEFAULT_LIMITS: ServerLimits = {
  maxJsonBytes: 1024 * 1024,
  maxFileBytes: 1024 * 1024 * 1024,
  maxStdinBytes: 64 * 1024 * 1024,
  maxSubscribers: 10_000,
  wsHighWaterBytes: 1024 * 1024,
  maxConnections: 0,
  headersTimeoutMs: 10_000,
  maxConcurrentResults: 4,
};

/** A structured logger: one JSON object per call (the default writes one line to stdout). */
export type LoggerFn = (entry: Record<string, unknown>) => void;

export interface ServerDeps {
  computer: ComputerApi;
  /** Absolute workspace root (files API). */
  workspace: string;
  metrics: ServerMetrics;
  limits: ServerLimits;
  /** This server's frame encoders (their cache is shared by its streams only). */
  encoders: FrameEncoders;
  /** Deliver heartbeats on live streams. */
  heartbeats: boolean;
  /** Subscriptions currently open (for the maxSubscribers limit). */
  subscriptions: { count: number };
  /**
   * Gives a path the files API created to the uid confined commands run as
   * (the sandbox's adopt), so that commands can write what was uploaded.
   */
  adopt?: (abs: string) => Promise<void>;
  /** True once shutdown began: new work is refused with 503 EUNAVAILABLE. */
  isClosing(): boolean;
}
