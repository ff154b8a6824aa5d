// Public entry of `agent-computer/server`: the HTTP/WebSocket server, for
// embedding in your own Node process (what `agent-computer serve` runs).
// A separate entry so that `import "agent-computer"` (the in-process
// Computer) does not load the server's dependencies (ws, prom-client).

export {
  type ComputerServer,
  type ComputerServerOptions,
  createComputerServer,
  DEFAULT_HOST,
  DEFAULT_PORT,
} from "./app.js";
export { DEFAULT_LIMITS, type ServerLimits } from "./deps.js";
