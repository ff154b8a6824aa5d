// The agent-computer HTTP server, composed: one ComputerApi behind a router
// (auth, errors, request log: http/), the exec API, files API and WebSocket
// (routes/), the A@UI relay and the dashboard, plus what they share (limits,
// metrics, frame encoders). Every piece of state is created here, per server,
// so two servers in one process share nothing. It never touches
// child_process: give it the in-process Computer (or a fake in tests) and it
// serves whatever that computer does.
//
// Lifecycle: listen() binds (loopback by default) and resolves the base URL;
// close() is the graceful shutdown used on SIGINT/SIGTERM: stop accepting,
// close the computer (running commands end with reason "killed" and their exit
// events still reach live subscribers), give open streams a short grace to
// deliver them, then cut what remains.

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { ComputerApi } from "../runtime/types.js";
import type { EventLog } from "../store/types.js";
import { ComputerError } from "../wire/errors.js";
import { registerDashboard } from "./dashboard.js";
import { DEFAULT_LIMITS, type LoggerFn, type ServerDeps, type ServerLimits } from "./deps.js";
import { createExecObserver, type ExecObserver } from "./exec-observer.js";
import { Auth, generateToken } from "./http/auth.js";
import { defaultMaxConnections, limitConnections } from "./http/connections.js";
import { Router } from "./http/router.js";
import { createMetrics, type ServerMetrics } from "./metrics.js";
import { RelayStore } from "./relay/persist.js";
import { UiRelay } from "./relay/registry.js";
import { registerUiRoutes } from "./relay/routes.js";
import { registerExecRoutes } from "./routes/exec.js";
import { registerFilesRoutes } from "./routes/files.js";
import { type McpRouteOptions, registerMcpRoutes } from "./routes/mcp.js";
import { registerMetaRoutes } from "./routes/meta.js";
import { registerPtyRoutes } from "./routes/pty.js";
import { registerWebSocket } from "./routes/ws.js";
import { FrameEncoders } from "./streaming/encode-cache.js";

export type { ExecObserver, LoggerFn };

export const DEFAULT_PORT = 8787;
export const DEFAULT_HOST = "127.0.0.1";
/** Node 20's default is 16 KiB; see the comment at createServer below. */
const DEFAULT_SOCKET_HIGH_WATER_MARK = 512 * 1024;
const DEFAULT_SHUTDOWN_GRACE_MS = 2000;
const KEEP_ALIVE_TIMEOUT_MS = 5_000;

export interface ComputerServerOptions {
  /** The computer to serve, or a factory that receives the server's observer (logs, metrics). */
  computer: ComputerApi | ((observer: ExecObserver) => ComputerApi);
  /** Workspace root for the files API (must exist). */
  workspace: string;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 8787; 0 picks a free port. */
  port?: number;
  /** Bearer token; generated when undefined; `null` turns token auth off (not recommended). */
  token?: string | null;
  /** Extra Host names accepted besides loopback ("*" for any). */
  allowedHosts?: string[];
  /** Foreign origins allowed (CORS and WebSocket). */
  corsOrigins?: string[];
  limits?: Partial<ServerLimits>;
  /** Streamable HTTP MCP at /mcp: session bound, idle close, tool options. */
  mcp?: McpRouteOptions;
  /** Heartbeats on live streams (default true). */
  heartbeats?: boolean;
  /** Structured logger (one JSON object per entry); default one line on stdout; false silences. */
  logger?: LoggerFn | false;
  /** Socket/response stream high-water mark in bytes (default 512 KiB). */
  socketHighWaterMark?: number;
  /** How long close() lets open streams finish after the computer closed (default 2000 ms). */
  shutdownGraceMs?: number;
  /** Called on files and directories the files API creates (the sandbox's adopt). */
  adopt?: (abs: string) => Promise<void>;
}

export interface ComputerServer {
  /** Binds and resolves the base URL (e.g. "http://127.0.0.1:8787"). */
  listen(): Promise<string>;
  /** Graceful shutdown; idempotent. */
  close(): Promise<void>;
  /** Base URL without token (after listen). */
  readonly url: string;
  /** The URL to open in a browser: base URL + `/?token=...`. */
  readonly loginUrl: string;
  readonly token: string | null;
  readonly router: Router;
  readonly computer: ComputerApi;
  readonly metrics: ServerMetrics;
  readonly httpServer: Server;
}

/**
 * Exec API calls need the event log: while its backend (Redis) is down they
 * are refused at once with a retryable 503 EUNAVAILABLE instead of waiting
 * for a reconnect (a dropped connection gets a short grace to come back).
 */
const UNAVAILABLE_WAIT_MS = 1000;
/** Longest wait at shutdown for the A@UI relay's journal (docs/ui.md, "Persistence"). */
const RELAY_FLUSH_MS = 5000;

async function requireEventLog(computer: ComputerApi): Promise<void> {
  if (!computer.health) return;
  const h = await computer.health(UNAVAILABLE_WAIT_MS);
  if (!h.ok) throw new ComputerError("EUNAVAILABLE", `the event log is unavailable: ${h.reason}`);
}

function isWildcard(host: string): boolean {
  return host === "0.0.0.0" || host === "::" || host === "";
}

function stdoutLogger(entry: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ ts: new Date().toISOString(), ...entry })}\n`);
}

/** Shortest bearer token accepted (a generated one has 32 characters). */
export const MIN_TOKEN_LENGTH = 16;

export function createComputerServer(options: ComputerServerOptions): ComputerServer {
  const host = options.host ?? DEFAULT_HOST;
  const token = options.token === undefined ? generateToken() : options.token;
  // The one check for every entry point (CLI serve, startNode, embedders).
  if (typeof token === "string" && token.length < MIN_TOKEN_LENGTH) {
    throw new ComputerError(
      "EINVAL",
      `the token must be at least ${MIN_TOKEN_LENGTH} characters (got ${token.length}); ` +
        "leave it unset to have one generated",
    );
  }
  const logger: LoggerFn = options.logger === false ? () => {} : (options.logger ?? stdoutLogger);
  const limits: ServerLimits = { ...DEFAULT_LIMITS, ...options.limits };
  const metrics = createMetrics();
  const execs = createExecObserver(logger, metrics);
  const computer =
    typeof options.computer === "function" ? options.computer(execs.observer) : options.computer;
  const auth = new Auth({
    token,
    allowedHosts: options.allowedHosts ?? (isWildcard(host) ? [] : [host]),
    anyHost: isWildcard(host) && (options.allowedHosts?.length ?? 0) === 0,
    corsOrigins: options.corsOrigins ?? [],
  });
  let closing = false;
  const router = new Router({
    auth,
    onRequest: (entry) => logger(entry as unknown as Record<string, unknown>),
    onError: (code) => metrics.errors.inc({ code }),
    gate: (p) => (p.startsWith("/v1/execs") ? requireEventLog(computer) : undefined),
  });
  const deps: ServerDeps = {
    computer,
    workspace: options.workspace,
    metrics,
    limits,
    encoders: new FrameEncoders(),
    heartbeats: options.heartbeats ?? true,
    subscriptions: { count: 0 },
    isClosing: () => closing,
    ...(options.adopt ? { adopt: options.adopt } : {}),
  };

  registerMetaRoutes(router, deps);
  const mcp = registerMcpRoutes(router, deps, options.mcp);
  registerExecRoutes(router, deps);
  registerPtyRoutes(router, deps);
  registerFilesRoutes(router, deps);
  const ws = registerWebSocket(router, deps);
  // The relay journals its channels in the computer's event log (docs/ui.md, "Persistence").
  const { eventLog: eventLogOf, nodeId } = computer as {
    eventLog?: () => Promise<EventLog>;
    nodeId?: unknown;
  };
  const relay = registerUiRoutes(router, {
    relay: new UiRelay(
      {},
      eventLogOf
        ? new RelayStore(eventLogOf.call(computer), {
            ...(typeof nodeId === "string" ? { nodeId } : {}),
            logger,
          })
        : undefined,
    ),
  });
  const dashboard = registerDashboard(router, { computer, relay });
  execs.attach(dashboard);

  // Node 20's default stream high-water mark is 16 KiB: a single 64 KiB output
  // chunk (~87 KiB as exec-wire) would make every res.write() report "full"
  // and the pump would stop reading until the socket drained completely, a
  // stop-and-go per chunk. A larger mark lets a few frames queue in user space
  // while the kernel sends the previous ones; backpressure still holds.
  const httpServer = createServer(
    {
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      // Header timeouts are enforced by a periodic sweep; Node's default is 30 s.
      connectionsCheckingInterval: 1000,
      highWaterMark: options.socketHighWaterMark ?? DEFAULT_SOCKET_HIGH_WATER_MARK,
    },
    router.handle,
  );
  httpServer.on("upgrade", router.handleUpgrade);
  limitConnections(httpServer, {
    maxConnections: limits.maxConnections > 0 ? limits.maxConnections : defaultMaxConnections(),
    headersTimeoutMs: limits.headersTimeoutMs,
  });
  httpServer.on("clientError", (_err, socket) => {
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
    else socket.destroy();
  });

  let url = "";
  let closed: Promise<void> | undefined;
  return {
    get url() {
      return url;
    },
    get loginUrl() {
      return token === null ? `${url}/` : `${url}/?token=${encodeURIComponent(token)}`;
    },
    token,
    router,
    computer,
    metrics,
    httpServer,
    listen() {
      return new Promise((resolve, reject) => {
        const onError = (err: Error) => reject(err);
        httpServer.once("error", onError);
        httpServer.listen(options.port ?? DEFAULT_PORT, host, () => {
          httpServer.off("error", onError);
          const addr = httpServer.address() as AddressInfo;
          const shown = isWildcard(host) ? "127.0.0.1" : host;
          url = `http://${shown.includes(":") ? `[${shown}]` : shown}:${addr.port}`;
          // Two local servers on different ports must not overwrite each other's cookie.
          auth.cookieName = `agent_computer_token_${addr.port}`;
          resolve(url);
        });
      });
    },
    close() {
      if (closed) return closed;
      closing = true;
      dashboard.close();
      closed = (async () => {
        const stopped = new Promise<void>((resolve) => httpServer.close(() => resolve()));
        httpServer.closeIdleConnections();
        await mcp.close();
        // The relay's journal goes into the log before it closes (bounded: a log backend that is down must not hold the shutdown).
        await Promise.race([
          relay.flush().catch(() => {}),
          new Promise((r) => setTimeout(r, RELAY_FLUSH_MS).unref()),
        ]);
        try {
          await computer.close();
        } catch (err) {
          logger({ msg: "computer close failed", error: String(err) });
        }
        const graceEnd = Date.now() + (options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS);
        while (deps.subscriptions.count > 0 && Date.now() < graceEnd) {
          await new Promise((r) => setTimeout(r, 20));
        }
        ws.closeAll();
        relay.close();
        httpServer.closeAllConnections();
        for (const c of ws.wss.clients) c.terminate();
        await stopped;
      })();
      return closed;
    },
  };
}
