// The server's execution hooks with real (in-memory) metrics: start and end
// each log one structured line, count the execution, keep the running gauge,
// count finishes by reason, and reach the listener attached later.
import { describe, expect, it } from "vitest";
import type { ExecRecord } from "../runtime/types.js";
import { createExecObserver } from "./exec-observer.js";
import { createMetrics } from "./metrics.js";

const rec: ExecRecord = {
  id: "e1",
  command: "sleep 1",
  cwd: "",
  encoding: "b64",
  node: "local",
  pid: 9,
  state: "running",
  startedAt: 1000,
  lastSeq: 0,
  earliestSeq: 1,
};

async function value(
  metrics: ReturnType<typeof createMetrics>,
  name: string,
  labels: Record<string, string> = {},
) {
  const m = (await metrics.registry.getMetricsAsJSON()).find((x) => x.name === name)!;
  const v = m.values.find((x) => Object.entries(labels).every(([k, l]) => x.labels[k] === l));
  return v?.value ?? 0;
}

describe("createExecObserver", () => {
  it("logs one line per start and end, with the duration at the end", () => {
    const lines: Record<string, unknown>[] = [];
    const { observer } = createExecObserver((e) => lines.push(e), createMetrics());
    observer.started!(rec);
    observer.finished!({ ...rec, state: "exited", exitCode: 0, endedAt: 1500 });
    expect(lines).toEqual([
      { msg: "exec start", id: "e1", command: "sleep 1", cwd: "", pid: 9, node: "local" },
      { msg: "exec exit", id: "e1", state: "exited", exitCode: 0, signal: undefined, ms: 500 },
    ]);
  });

  it("counts executions, keeps the running gauge and counts finishes by reason", async () => {
    const metrics = createMetrics();
    const { observer } = createExecObserver(() => {}, metrics);
    observer.started!(rec);
    observer.started!({ ...rec, id: "e2" });
    expect(await value(metrics, "agent_computer_executions_running")).toBe(2);
    observer.finished!({ ...rec, state: "killed", signal: "SIGKILL" });
    expect(await value(metrics, "agent_computer_executions_total")).toBe(2);
    expect(await value(metrics, "agent_computer_executions_running")).toBe(1);
    expect(
      await value(metrics, "agent_computer_executions_finished_total", { reason: "killed" }),
    ).toBe(1);
  });

  it("reaches the listener attached after the observer was built, from then on", () => {
    const seen: string[] = [];
    const { observer, attach } = createExecObserver(() => {}, createMetrics());
    observer.started!(rec);
    attach({
      started: (r) => seen.push(`start ${r.id}`),
      finished: (r) => seen.push(`end ${r.id}`),
    });
    observer.started!({ ...rec, id: "e2" });
    observer.finished!({ ...rec, id: "e2", state: "exited" });
    expect(seen).toEqual(["start e2", "end e2"]);
  });

  it("gives each server its own registry, so two never collide on metric names", () => {
    expect(() => [createMetrics(), createMetrics()]).not.toThrow();
  });
});
