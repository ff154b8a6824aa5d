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
