// Progress while a tool call waits. Clients time calls out (the MCP
// TypeScript SDK after 60 s) unless progress arrives and they were told to
// reset their timeout on it; so a waiting call reports on every burst of
// output (throttled: a command printing 10k lines must not send 10k
// notifications) and on a periodic tick when the command is silent.

import type { ToolCallContext } from "./types.js";

/** Tick of a silent wait (ms); well under the usual 60 s client timeout. */
export const DEFAULT_PROGRESS_INTERVAL_MS = 5000;
/** At most one output-driven report per this many ms. */
const OUTPUT_REPORT_MS = 200;

export interface ProgressReporter {
  /** Output arrived: `bytes` so far, `seq` reached. */
  output(bytes: number, seq: number): void;
  stop(): void;
}

export function startProgress(
  ctx: ToolCallContext,
  label: string,
  intervalMs: number,
): ProgressReporter {
  const report = ctx.onProgress;
  if (!report) return { output() {}, stop() {} };
  const started = Date.now();
  let lastReport = 0;
  let bytes = 0;
  let seq = 0;
  const send = (what: string) => {
    lastReport = Date.now();
    try {
      report(`${label}: ${what}`);
    } catch {
      // a failing reporter must not fail the call
    }
  };
  const tick = setInterval(() => {
    if (Date.now() - lastReport < intervalMs / 2) return;
    send(`running for ${Math.round((Date.now() - started) / 1000)} s, ${bytes} bytes, seq ${seq}`);
  }, intervalMs);
  tick.unref?.();
  return {
    output(b, s) {
      bytes = b;
      seq = s;
      if (Date.now() - lastReport >= OUTPUT_REPORT_MS) send(`${bytes} bytes, seq ${seq}`);
    },
    stop() {
      clearInterval(tick);
    },
  };
}
