// Runs the shared EventLog contract against the in-memory ring log, plus the
// memory-specific promise that the ring never holds more than its cap
// (with spilling off: spill.test.ts covers the disk behind the ring).
import { describe, expect, it } from "vitest";
import { MemoryEventLog } from "./memory-log.js";
import { runEventLogContract } from "./test-support/event-log-contract.js";

// The contract's cap test expects drops at logMaxBytes: spilling off here (spill.test.ts covers it).
runEventLogContract("memory", (o) => new MemoryEventLog({ ...o, spillMaxBytes: 0 }));

describe("MemoryEventLog", () => {
  it("keeps retained bytes within logMaxBytes and always keeps the last event", async () => {
    const log = new MemoryEventLog({ logMaxBytes: 10_000, spillMaxBytes: 0 });
    await log.create({
      id: "r",
      command: "x",
      cwd: "",
      encoding: "b64",
      node: "local",
      startedAt: 0,
    });
    for (let s = 1; s <= 5000; s++) {
      await log.append("r", [{ id: "r", seq: s, name: "stdout", value: new Uint8Array(37) }]);
      expect(log.retainedBytes("r")).toBeLessThanOrEqual(10_000);
    }
    await log.append("r", [{ id: "r", seq: 5001, name: "stdout", value: new Uint8Array(50_000) }]);
    const r = await log.get("r");
    expect(r?.earliestSeq).toBe(5001);
    expect((await log.read("r", 5000)).map((e) => e.seq)).toEqual([5001]);
    await log.close();
  });
});

describe("MemoryEventLog output retention", () => {
  const record = { command: "x", cwd: "", encoding: "b64" as const, node: "local", startedAt: 0 };

  it("copies appended bytes in: changing the caller's chunk afterwards does not change the log", async () => {
    const log = new MemoryEventLog({ spillMaxBytes: 0 });
    await log.create({ id: "r", ...record });
    const chunk = new Uint8Array([1, 2, 3]);
    await log.append("r", [{ id: "r", seq: 1, name: "stdout", value: chunk }]);
    chunk.fill(9);
    const [ev] = await log.read("r", 0);
    expect(ev?.name === "stdout" && [...(ev.value as Uint8Array)]).toEqual([1, 2, 3]);
    await log.close();
  });

  it("never changes bytes a reader holds when later output reuses the ring's segments", async () => {
    const log = new MemoryEventLog({ logMaxBytes: 1024 * 1024, spillMaxBytes: 0 });
    await log.create({ id: "r", ...record });
    const held: { seq: number; value: Uint8Array }[] = [];
    const fill = (seq: number) => new Uint8Array(60_000).fill(seq & 0xff);
    for (let seq = 1; seq <= 600; seq++) {
      await log.append("r", [{ id: "r", seq, name: "stdout", value: fill(seq) }]);
      if (seq % 50 === 1) {
        const [ev] = await log.read("r", seq - 1, { limit: 1 });
        held.push({ seq, value: ev!.value as Uint8Array });
      }
    }
    for (const h of held) expect(Buffer.from(h.value).equals(fill(h.seq))).toBe(true);
    // 36 MB went through a 1 MiB ring: its segments were reused, not reallocated.
    expect(log.segmentsAllocated).toBeLessThanOrEqual(8);
    await log.close();
  });
});
