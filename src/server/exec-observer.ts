// What the server does when an execution starts or ends, whoever started it
// (HTTP, WebSocket, the dashboard, another cluster node): one structured log
// line, the execution metrics, and the dashboard's live list. The runtime
// calls these hooks (its `observer` option); the server builds them before
// the computer exists, which is why the dashboard is attached afterwards.

import type { ExecRecord } from "../runtime/types.js";
import type { LoggerFn } from "./deps.js";
import type { ServerMetrics } from "./metrics.js";

/** Hooks the runtime calls per execution (structured logs, metrics). */
export interface ExecObserver {
  started?(rec: ExecRecord): void;
  finished?(rec: ExecRecord): void;
}

/** Who else wants to hear about executions (the dashboard, once registered). */
export interface ExecListener {
  started(rec: ExecRecord): void;
  finished(rec: ExecRecord): void;
}

/** The server's observer, and `attach` to add the listener that exists only later. */
export function createExecObserver(
  logger: LoggerFn,
  metrics: ServerMetrics,
): { observer: ExecObserver; attach(listener: ExecListener): void } {
  let listener: ExecListener | undefined;
  const observer: ExecObserver = {
    started(rec) {
      listener?.started(rec);
      metrics.executionsStarted.inc();
      metrics.executionsRunning.inc();
      logger({
        msg: "exec start",
        id: rec.id,
        command: rec.command,
        cwd: rec.cwd,
        pid: rec.pid,
        node: rec.node,
      });
    },
    finished(rec) {
      listener?.finished(rec);
      metrics.executionsRunning.dec();
      metrics.executionsFinished.inc({ reason: rec.state });
      logger({
        msg: "exec exit",
        id: rec.id,
        state: rec.state,
        exitCode: rec.exitCode,
        signal: rec.signal,
        ms: rec.endedAt !== undefined ? rec.endedAt - rec.startedAt : undefined,
      });
    },
  };
  return {
    observer,
    attach(l) {
      listener = l;
    },
  };
}
