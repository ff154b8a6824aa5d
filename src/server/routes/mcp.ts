// Streamable HTTP MCP at /mcp: the agent tools (agents/) for hosts that speak
// MCP over HTTP instead of starting `agent-computer mcp` as a child process.
// The routes sit in the router like every other API route, so the same token,
// Host and Origin checks run before a byte reaches the MCP SDK (its own DNS
// rebinding check stays off: ours is stricter and shared).
//
// Sessions: an initialize POST without Mcp-Session-Id opens one — an MCP
// Server, a StreamableHTTPServerTransport and an AgentTools (its own bash
// shell and read positions) over this server's Computer. Later requests name
// it in Mcp-Session-Id. A session ends on DELETE, when it was idle (no open
// request or stream) for `idleMs`, or when the server closes. Their number is
// bounded: at the bound, the least recently used idle session is closed to
// make room, and when every session is busy a new one is refused (429).
//
// Resumability: each session's EventStore is kept in the server's EventLog
// (agents/mcp-event-store.ts), so a client that loses its connection mid-call
// reconnects with Last-Event-ID and gets every message after it.

import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { localFiles } from "../../agents/files.js";
import { createMcpServer } from "../../agents/mcp.js";
import { LogEventStore } from "../../agents/mcp-event-store.js";
import { AgentTools, type AgentToolsOptions } from "../../agents/tools.js";
import { MemoryEventLog } from "../../store/memory-log.js";
import type { EventLog } from "../../store/types.js";
import { ComputerError } from "../../wire/errors.js";
import type { ServerDeps } from "../deps.js";
import type { Router } from "../http/router.js";

export interface McpRouteOptions {
  /** Open MCP sessions at once (default 64). */
  maxSessions?: number;
  /** A session with no open request or stream for this long is closed (default 30 min). */
  idleMs?: number;
  /** Options of each session's tool set (bash timeout, progress tick). */
  tools?: Omit<AgentToolsOptions, "computer" | "files" | "workspaceRoot">;
}

export interface McpRoutes {
  /** Open sessions (for tests and metrics). */
  readonly sessionCount: number;
  /** Closes every session. */
  close(): Promise<void>;
}

const DEFAULT_MAX_SESSIONS = 64;
const DEFAULT_IDLE_MS = 30 * 60 * 1000;

interface Session {
  id: string;
  transport: StreamableHTTPServerTransport;
  tools: AgentTools;
  store: LogEventStore;
  /** Requests and streams of this session still open. */
  open: number;
  lastUsed: number;
  closed?: Promise<void>;
}

/** The event log MCP streams are kept in: the Computer's own when it has one. */
function eventLogOf(deps: ServerDeps): Promise<EventLog> {
  const c = deps.computer as { eventLog?: () => Promise<EventLog> };
  return typeof c.eventLog === "function" ? c.eventLog() : Promise.resolve(new MemoryEventLog());
}

export function registerMcpRoutes(
  router: Router,
  deps: ServerDeps,
  options: McpRouteOptions = {},
): McpRoutes {
  const maxSessions = options.maxSessions ?? DEFAULT_MAX_SESSIONS;
  const idleMs = options.idleMs ?? DEFAULT_IDLE_MS;
  const sessions = new Map<string, Session>();
  let eventLogP: Promise<EventLog> | undefined;
  const nodeId = (deps.computer as { nodeId?: unknown }).nodeId;

  const closeSession = (s: Session): Promise<void> => {
    s.closed ??= (async () => {
      sessions.delete(s.id);
      await s.transport.close().catch(() => {});
      await s.tools.close().catch(() => {});
      await s.store.close().catch(() => {});
    })();
    return s.closed;
  };

  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const s of sessions.values()) {
        if (s.open === 0 && now - s.lastUsed >= idleMs) void closeSession(s);
      }
    },
    Math.max(50, Math.min(idleMs / 4, 60_000)),
  );
  sweep.unref();

  /** Room for one more session: evict the least recently used idle one, or refuse. */
  const makeRoom = () => {
    if (sessions.size < maxSessions) return;
    let lru: Session | undefined;
    for (const s of sessions.values()) {
      if (s.open === 0 && (!lru || s.lastUsed < lru.lastUsed)) lru = s;
    }
    if (!lru) {
      throw new ComputerError(
        "ELIMIT",
        `too many MCP sessions (${maxSessions}, all busy); end one with DELETE /mcp`,
      );
    }
    void closeSession(lru);
  };

  const openSession = async (): Promise<Session> => {
    makeRoom();
    eventLogP ??= eventLogOf(deps);
    const eventLog = await eventLogP;
    const id = randomUUID();
    const store = new LogEventStore(eventLog, id, {
      ...(typeof nodeId === "string" ? { nodeId } : {}),
    });
    let session: Session | undefined;
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => id,
      // Registered before the initialize answer goes out: the client's next request may follow at once.
      onsessioninitialized: () => {
        if (session && !session.closed) sessions.set(id, session);
      },
      eventStore: store,
      maxRequestBodySize: deps.limits.maxJsonBytes,
    });
    const tools = new AgentTools({
      computer: deps.computer,
      files: localFiles(deps.workspace),
      workspaceRoot: deps.workspace,
      ...options.tools,
    });
    const s: Session = { id, transport, tools, store, open: 0, lastUsed: Date.now() };
    session = s;
    transport.onclose = () => void closeSession(s);
    await createMcpServer(tools).connect(transport);
    return s;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (deps.isClosing()) throw new ComputerError("EUNAVAILABLE", "the server is shutting down");
    const header = req.headers["mcp-session-id"];
    const sessionId = Array.isArray(header) ? header[0] : header;
    let s: Session | undefined;
    let fresh = false;
    if (sessionId !== undefined) {
      s = sessions.get(sessionId);
      if (!s) {
        // The MCP way to say "start over": 404 with a JSON-RPC error body.
        req.resume();
        res.statusCode = 404;
        res.setHeader("content-type", "application/json");
        res.end(
          JSON.stringify({
            jsonrpc: "2.0",
            error: { code: -32001, message: "Session not found" },
            id: null,
          }),
        );
        return;
      }
    } else if (req.method === "POST") {
      s = await openSession();
      fresh = true;
    } else {
      throw new ComputerError("EINVAL", "Mcp-Session-Id header is required");
    }
    s.open++;
    s.lastUsed = Date.now();
    const session = s;
    res.once("close", () => {
      session.open--;
      session.lastUsed = Date.now();
    });
    await session.transport.handleRequest(req, res);
    // Not an initialize request (the transport answered 400): nothing to keep.
    if (fresh && session.transport.sessionId === undefined) await closeSession(session);
  };

  router.post("/mcp", handle);
  router.get("/mcp", handle);
  router.delete("/mcp", handle);

  return {
    get sessionCount() {
      return sessions.size;
    },
    async close() {
      clearInterval(sweep);
      await Promise.all([...sessions.values()].map(closeSession));
    },
  };
}
