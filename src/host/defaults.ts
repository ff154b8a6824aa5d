// The defaults a node runs with when nothing is configured, as named constants
// in one place: `agent-computer serve`, startNode() and the docs all read them
// from here. This module imports nothing heavy, so the CLI's client commands
// (exec, attach, ps, …) can read DEFAULT_URL without loading the server.
//
// Defaults owned by a lower layer (the event log's ring size, the server's
// request limits, the runtime's kill grace) stay beside the code that applies
// them; the tables in docs/operations.md list them all.

/** Interface `serve` binds: loopback only, so nothing is exposed by accident. */
export const DEFAULT_HOST = "127.0.0.1";

/** Port `serve` listens on. */
export const DEFAULT_PORT = 8787;

/** Where client commands look for a server when neither --url nor AGENT_COMPUTER_URL is set. */
export const DEFAULT_URL = `http://${DEFAULT_HOST}:${DEFAULT_PORT}`;

/** The workspace folder, relative to the current directory (created when missing). */
export const DEFAULT_WORKSPACE = "./workspace";

/** The event log: in memory, nothing to set up; `sqlite:PATH` or `redis://…` to keep it. */
export const DEFAULT_EVENT_LOG = "memory";

/** Environment variables a node and the CLI read, by purpose. */
export const ENV = {
  url: "AGENT_COMPUTER_URL",
  token: "AGENT_COMPUTER_TOKEN",
  eventLog: "AGENT_COMPUTER_LOG",
  nodeId: "AGENT_COMPUTER_NODE_ID",
} as const;
