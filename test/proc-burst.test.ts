// A burst of executions does not block the event loop: the runtime spawns
// through its spawn queue, a slice per turn of the loop, so other work runs
// between the spawns; every execution accepted runs; past `maxStarting`
// executions waiting to start, exec fails at once with ELIMIT (429) and
// leaves no record. Real processes; nothing here is timed (the stall figures
// come from `npm run bench:exec-burst`).

import { afterEach, describe, expect, it } from "vitest";
import { Computer, type ComputerOptions } from "../src/runtime/computer.js";
import type { ExecRecord } from "../src/store/types.js";
import { ComputerError, ERROR_STATUS } from "../src/wire/errors.js";
import { tempDir } from "./runtime-support.js";
import { startServer } from "./support/server-harness.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

function computerWith(options: Partial<ComputerOptions>, started?: (rec: ExecRecord) => void) {
  const ws = tempDir("ac-burst-");
  const computer = new Computer({
    workspace: ws.dir,
    heartbeatMs: 0,
    ...options,
    ...(started ? { observer: { started } } : {}),
  });
  cleanups.push(ws.cleanup, () => computer.close());
  return computer;
}

/** Counts turns of the event loop (one setImmediate per turn) until stopped. */
function turnCounter() {
  let turns = 0;
  let on = true;
  const tick = () => {
    if (!on) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  return {
    get turns() {
      return turns;
    },
    stop() {
      on = false;
    },
  };
}

describe("exec bursts", () => {
  it("spawns a burst one per turn of the event loop (spawnSliceMs 0), every execution running", async () => {
    const n = 30;
    const turnOfStart = new Map<string, number>();
    const counter = turnCounter();
    const computer = computerWith({ spawnSliceMs: 0 }, (rec) =>
      turnOfStart.set(rec.id, counter.turns),
    );
    const handles = await Promise.all(
      Array.from({ length: n }, () => computer.exec("echo $AGENT_COMPUTER_EXEC_ID")),
    );
    counter.stop();
    // Each spawn had a turn of its own: the loop served other work in between.
    expect(new Set(turnOfStart.values()).size).toBe(n);
    const results = await Promise.all(handles.map((h) => h.result()));
    for (const [i, res] of results.entries()) {
      expect(res.exitCode).toBe(0);
      expect(new TextDecoder().decode(res.stdout as Uint8Array)).toBe(`${handles[i]!.id}\n`);
    }
  });

  it("refuses executions past maxStarting with ELIMIT (429) and leaves no record of them", async () => {
    const computer = computerWith({ maxStarting: 3 });
    const settled = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) => computer.exec("true", { id: `b${i}` })),
    );
    const ok = settled.filter((s) => s.status === "fulfilled");
    const refused = settled.flatMap((s) => (s.status === "rejected" ? [s.reason] : []));
    expect(ok).toHaveLength(3);
    expect(refused).toHaveLength(7);
    for (const err of refused) {
      expect(err).toBeInstanceOf(ComputerError);
      expect((err as ComputerError).code).toBe("ELIMIT");
      expect((err as Error).message).toMatch(/maxStarting 3/);
    }
    expect(ERROR_STATUS.ELIMIT).toBe(429);
    const ids = (await computer.list()).map((r) => r.id).sort();
    expect(ids).toEqual(["b0", "b1", "b2"]);
    // Places are given back: once they started, more can start.
    const again = await computer.exec("true");
    expect((await again.result()).exitCode).toBe(0);
  });

  it("a burst through the HTTP API: every request gets its execution, /healthz and another stream are served meanwhile", async () => {
    const h = await startServer({ computer: { spawnSliceMs: 0 } });
    cleanups.push(() => h.close());
    const auth = { authorization: `Bearer ${h.token}`, "content-type": "application/json" };
    // An unrelated execution streaming while the burst runs.
    const ticker = await h.client.exec("for i in $(seq 1 40); do echo $i; sleep 0.02; done", {
      encoding: "utf8",
    });
    const streamed = h.client
      .get(ticker.id)
      .then((run) => run.result())
      .then((r) => r.stdout);
    let healthz = 0;
    let bursting = true;
    const probe = (async () => {
      while (bursting) {
        const r = await fetch(`${h.url}/healthz`);
        expect(r.status).toBe(200);
        await r.arrayBuffer();
        healthz++;
      }
    })();
    const n = 60;
    const replies = await Promise.all(
      Array.from({ length: n }, () =>
        fetch(`${h.url}/v1/execs`, {
          method: "POST",
          headers: auth,
          body: JSON.stringify({ command: "echo hi" }),
        }).then(async (r) => ({ status: r.status, body: (await r.json()) as { id: string } })),
      ),
    );
    bursting = false;
    await probe;
    expect(replies.map((r) => r.status)).toEqual(replies.map(() => 201));
    for (const { body } of replies) {
      const res = await (await h.client.get(body.id)).result();
      expect(res).toMatchObject({ exitCode: 0 });
    }
    expect(healthz).toBeGreaterThan(0);
    expect(
      String(await streamed)
        .split("\n")
        .filter(Boolean),
    ).toHaveLength(40);
  });
});
