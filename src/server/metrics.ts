// Prometheus metrics (prom-client) for /metrics. A private Registry per server
// (not prom-client's global one) so several servers in one process (tests,
// embedding) never collide on metric names.

import { Counter, collectDefaultMetrics, Gauge, Registry } from "prom-client";

export interface ServerMetrics {
  registry: Registry;
  executionsStarted: Counter<string>;
  executionsFinished: Counter<"reason">;
  executionsRunning: Gauge<string>;
  bytesStreamed: Counter<"transport">;
  subscribers: Gauge<"transport">;
  errors: Counter<"code">;
}

export function createMetrics(): ServerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "agent_computer_" });
  return {
    registry,
    executionsStarted: new Counter({
      name: "agent_computer_executions_total",
      help: "Executions started since the server started",
      registers: [registry],
    }),
    executionsFinished: new Counter({
      name: "agent_computer_executions_finished_total",
      help: "Executions finished, by reason (exited, killed, timeout, lost)",
      labelNames: ["reason"],
      registers: [registry],
    }),
    executionsRunning: new Gauge({
      name: "agent_computer_executions_running",
      help: "Executions currently running on this node",
      registers: [registry],
    }),
    bytesStreamed: new Counter({
      name: "agent_computer_bytes_streamed_total",
      help: "Event-stream bytes written to clients, by transport (ndjson, sse, ws)",
      labelNames: ["transport"],
      registers: [registry],
    }),
    subscribers: new Gauge({
      name: "agent_computer_subscribers",
      help: "Open event-stream subscriptions, by transport (ndjson, sse, ws)",
      labelNames: ["transport"],
      registers: [registry],
    }),
    errors: new Counter({
      name: "agent_computer_errors_total",
      help: "Error responses and stream errors, by code",
      labelNames: ["code"],
      registers: [registry],
    }),
  };
}
