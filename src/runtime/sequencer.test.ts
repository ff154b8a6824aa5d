// The sequencer over a log whose appends complete when the test says so:
// every event gets the next seq of one gap-free sequence, events numbered
// while an append is in flight go in the next append together, the meter is
// told each event's size, the sequencer blocks above maxUnflushedBytes and
// unblocks once the log took half the backlog, and a refused append is
// reported once, drops what was queued, and numbering goes on after the last
// event the log accepted (so the exit can still finish the execution).
import { describe, expect, it } from "vitest";
import { EVENT_OVERHEAD_BYTES } from "../store/common.js";
import type { EventLog } from "../store/types.js";
import { ComputerError } from "../wire/errors.js";
import type { LoggedEvent } from "../wire/types.js";
import { Sequencer } from "./sequencer.js";

/** An append-only fake log: each append waits until `complete()` or `fail()`. */
function manualLog() {
  const batches: LoggedEvent[][] = [];
  const waiting: { resolve(): void; reject(e: unknown): void }[] = [];
  const log = {
    append(_id: string, events: LoggedEvent[]) {
      batches.push(events);
      return new Promise<void>((resolve, reject) => waiting.push({ resolve, reject }));
    },
  } as unknown as EventLog;
  const tick = () => new Promise((r) => setImmediate(r));
  return {
    log,
    batches,
    async complete() {
      waiting.shift()!.resolve();
      await tick();
    },
    async fail(err: unknown) {
      waiting.shift()!.reject(err);
      await tick();
    },
  };
}

function setup(maxUnflushedBytes = 1 << 20) {
  const m = manualLog();
  const sizes: [number, number][] = [];
  const events = { blocked: 0, failed: [] as unknown[] };
  const seq = new Sequencer(
    "e",
    m.log,
    maxUnflushedBytes,
    { produced: (s, n) => sizes.push([s, n]) },
    { blockedChanged: () => events.blocked++, appendFailed: (err) => events.failed.push(err) },
  );
  return { m, seq, sizes, events };
}

describe("Sequencer", () => {
  it("numbers output and exit in one gap-free sequence and batches what arrives during an append", async () => {
    const { m, seq } = setup();
    seq.output("stdout", "a");
    seq.output("stderr", "b");
    seq.output("stdout", "c");
    seq.exit(143, "killed", "SIGTERM");
    expect(seq.lastSeq).toBe(4);
    expect(m.batches).toHaveLength(1);
    expect(m.batches[0]!.map((e) => e.seq)).toEqual([1]);
    await m.complete();
    expect(m.batches).toHaveLength(2);
    expect(m.batches[1]).toEqual([
      { id: "e", seq: 2, name: "stderr", value: "b" },
      { id: "e", seq: 3, name: "stdout", value: "c" },
      { id: "e", seq: 4, name: "exit", value: 143, reason: "killed", signal: "SIGTERM" },
    ]);
    await m.complete();
    await seq.drained();
  });

  it("leaves the signal off an exit without one", async () => {
    const { m, seq } = setup();
    seq.exit(0, "exited", null);
    expect(m.batches[0]![0]).toEqual({ id: "e", seq: 1, name: "exit", value: 0, reason: "exited" });
    await m.complete();
  });

  it("tells the meter each event's seq and log size", async () => {
    const { m, seq, sizes } = setup();
    seq.output("stdout", new Uint8Array(10));
    seq.exit(0, "exited", null);
    expect(sizes).toEqual([
      [1, EVENT_OVERHEAD_BYTES + 10],
      [2, EVENT_OVERHEAD_BYTES],
    ]);
    await m.complete();
    await m.complete();
  });

  it("drained() resolves once every numbered event was handed to the log", async () => {
    const { m, seq } = setup();
    seq.output("stdout", "a");
    seq.output("stdout", "b");
    let drained = false;
    const d = seq.drained().then(() => {
      drained = true;
    });
    await m.complete();
    expect(drained).toBe(false);
    await m.complete();
    await d;
    expect(drained).toBe(true);
  });

  it("blocks above maxUnflushedBytes and unblocks once the log took it back to half", async () => {
    const { m, seq, events } = setup(250);
    const chunk = "x".repeat(100 - EVENT_OVERHEAD_BYTES); // 100 bytes per event in the log
    seq.output("stdout", chunk); // 100 in flight
    seq.output("stdout", chunk); // 200
    expect(seq.blocked).toBe(false);
    seq.output("stdout", chunk); // 300 > 250
    expect(seq.blocked).toBe(true);
    expect(events.blocked).toBe(1);
    await m.complete(); // 200 left: above half (125)
    expect(seq.blocked).toBe(true);
    await m.complete(); // 0 left
    expect(seq.blocked).toBe(false);
    expect(events.blocked).toBe(2);
  });

  it("reports a refused append once, drops the queue, unblocks, discards later output, and sends the notice and exit in fresh appends", async () => {
    const { m, seq, events } = setup(150);
    seq.output("stdout", "x".repeat(100 - EVENT_OVERHEAD_BYTES));
    seq.output("stdout", "x".repeat(100 - EVENT_OVERHEAD_BYTES));
    expect(seq.blocked).toBe(true);
    const refused = new Error("log down");
    await m.fail(refused);
    expect(events.failed).toEqual([refused]);
    expect(seq.blocked).toBe(false);
    expect(events.blocked).toBe(2);
    expect(m.batches).toHaveLength(1);
    await seq.drained();
    // Output after a refusal is discarded (the process is being killed); a
    // kept notice and the exit continue the log (which holds nothing).
    seq.output("stdout", "y");
    expect(m.batches).toHaveLength(1);
    seq.output("stderr", "notice", true);
    seq.exit(137, "killed", "SIGKILL");
    expect(m.batches[1]!.map((e) => [e.seq, e.name])).toEqual([[1, "stderr"]]);
    await m.complete();
    expect(m.batches[2]!.map((e) => [e.seq, e.name])).toEqual([[2, "exit"]]);
    await m.complete();
  });

  it("after a refused append, the exit continues the log after its last accepted event", async () => {
    const m = manualLog();
    const rewound: number[] = [];
    const seq = new Sequencer(
      "e",
      m.log,
      1 << 20,
      { produced: () => {}, rewind: (s) => rewound.push(s) },
      { blockedChanged: () => {}, appendFailed: () => {} },
    );
    seq.output("stdout", "a");
    await m.complete(); // seq 1 accepted
    seq.output("stdout", "b");
    seq.output("stdout", "c"); // queued behind seq 2
    await m.fail(new Error("OOM"));
    await seq.drained();
    expect(rewound).toEqual([1]);
    expect(seq.lastSeq).toBe(1);
    seq.exit(137, "killed", "SIGKILL");
    expect(m.batches.at(-1)!.map((e) => [e.seq, e.name])).toEqual([[2, "exit"]]);
    // A temporary refusal (EUNAVAILABLE) of the exit is retried, not dropped.
    const batches = m.batches.length;
    await m.fail(new ComputerError("EUNAVAILABLE", "full"));
    await new Promise((r) => setTimeout(r, 150));
    expect(m.batches).toHaveLength(batches + 1);
    expect(m.batches.at(-1)!.map((e) => [e.seq, e.name])).toEqual([[2, "exit"]]);
    await m.complete();
    await seq.drained();
  });
});
