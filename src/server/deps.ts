// What route modules receive from the server: the computer, limits, metrics and
// the log sink. One object, so the exec API, files API, WebSocket, A@UI relay and
// dashboard are all wired the same way and a test can build it with a fake
// ComputerApi.

import type { ComputerApi } from "../runtime/types.js";
import type { Auth } from "./auth.js";
import type { ServerMetrics } from "./metrics.js";

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
}

export const DEFAULT_LIMITS: ServerLimits = {
  maxJsonBytes: 1024 * 1024,
  maxFileBytes: 1024 * 1024 * 1024,
  maxStdinBytes: 64 * 1024 * 1024,
  maxSubscribers: 10_000,
  wsHighWaterBytes: 1024 * 1024,
};

export type LogFn = (entry: Record<string, unknown>) => void;

export interface ServerDeps {
  computer: ComputerApi;
  /** Absolute workspace root (files API). */
  workspace: string;
  auth: Auth;
  metrics: ServerMetrics;
  limits: ServerLimits;
  log: LogFn;
  /** Deliver heartbeats on live streams. */
  heartbeats: boolean;
  /** Subscriptions currently open (for the maxSubscribers limit). */
  subscriptions: { count: number };
  /** True once shutdown began: new work is refused with 503 EUNAVAILABLE. */
  isClosing(): boolean;
}
