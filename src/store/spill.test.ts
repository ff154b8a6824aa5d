// The memory log's disk retention: events the ring evicts are read back from
// segment files byte-exact and gap-free, the per-execution and total disk
// budgets hold (ELOG_TRUNCATED only past them), and no file outlives the log.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { LoggedEvent } from "../wire/types.js";
import { MemoryEventLog } from "./memory-log.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(path.join(tmpdir(), "ac-spill-test-"));
  dirs.push(d);
  return d;
}

function rec(id: string) {
  return { id, command: "x", cwd: "", encoding: "b64" as const, node: "local", startedAt: 0 };
}

/** Deterministic bytes for seq s, so every event is checkable. */
function bytesFor(s: number, n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = (s * 31 + i) & 0xff;
  return b;
}

async function fill(log: MemoryEventLog, id: string, n: number, size: number, exit = true) {
  await log.create(rec(id));
  for (let s = 1; s <= n; s += 16) {
    const batch: LoggedEvent[] = [];
    for (let k = s; k < s + 16 && k <= n; k++) {
      batch.push(
        k % 5 === 0
          ? { id, seq: k, name: "stderr", value: `text ${k} é` }
          : { id, seq: k, name: "stdout", value: bytesFor(k, size) },
      );
    }
    await log.append(id, batch);
  }
  if (exit) await log.append(id, [{ id, seq: n + 1, name: "exit", value: 3, reason: "exited" }]);
}

async function readAll(log: MemoryEventLog, id: string, after: number): Promise<LoggedEvent[]> {
  const all: LoggedEvent[] = [];
  for (;;) {
    const evs = await log.read(id, after, { limit: 100 });
    if (evs.length === 0) return all;
    for (const e of evs) {
      expect(e.seq).toBe(after + 1);
      after = e.seq;
      all.push(e);
    }
  }
}

function check(evs: LoggedEvent[], size: number) {
  for (const e of evs) {
    if (e.name === "exit") expect([e.value, e.reason]).toEqual([3, "exited"]);
    else if (e.name === "stderr") expect(e.value).toBe(`text ${e.seq} é`);
    else
      expect(Buffer.from(e.value as Uint8Array).equals(Buffer.from(bytesFor(e.seq, size)))).toBe(
        true,
      );
  }
}

describe("memory log spill to disk", () => {
  it("reads events evicted from the ring back from disk, byte-exact and gap-free", async () => {
    const spillDir = tempDir();
    const log = new MemoryEventLog({
      logMaxBytes: 64 * 1024,
      spillDir,
      spillSegmentBytes: 100_000,
    });
    await fill(log, "a", 2000, 1000);
    const r = (await log.get("a"))!;
    expect(r.earliestSeq).toBe(1);
    expect(log.retainedBytes("a")).toBeLessThanOrEqual(64 * 1024);
    expect(log.spilledBytes).toBeGreaterThan(1_500_000);
    const evs = await readAll(log, "a", 0);
    expect(evs.length).toBe(2001);
    check(evs, 1000);
    // Starting anywhere inside a segment works too.
    const mid = await readAll(log, "a", 1234);
    expect(mid[0]!.seq).toBe(1235);
    check(mid, 1000);
    await log.close();
    expect(readdirSync(spillDir)).toEqual([]);
  });

  it("keeps the per-execution disk budget, dropping whole segments oldest first", async () => {
    const spillDir = tempDir();
    const log = new MemoryEventLog({
      logMaxBytes: 32 * 1024,
      spillDir,
      spillMaxBytes: 400_000,
      spillSegmentBytes: 50_000,
    });
    await fill(log, "b", 3000, 1000);
    expect(log.spilledBytes).toBeLessThanOrEqual(400_000);
    const r = (await log.get("b"))!;
    expect(r.earliestSeq).toBeGreaterThan(1);
    const err = await log.read("b", 0).catch((e) => e);
    expect(err.code).toBe("ELOG_TRUNCATED");
    expect(err.earliestSeq).toBe(r.earliestSeq);
    const evs = await readAll(log, "b", r.earliestSeq - 1);
    expect(evs.length).toBe(3001 - r.earliestSeq + 1);
    check(evs, 1000);
    // What is retained is about the ring plus the disk budget, not much less.
    expect((evs.length * 1000) / 1e3).toBeGreaterThan(300);
    await log.close();
  });

  it("keeps the total disk budget across executions", async () => {
    const spillDir = tempDir();
    const log = new MemoryEventLog({
      logMaxBytes: 16 * 1024,
      spillDir,
      spillMaxBytes: 1_000_000,
      spillTotalBytes: 600_000,
      spillSegmentBytes: 50_000,
    });
    await fill(log, "c", 500, 1000, false);
    await fill(log, "d", 500, 1000, false);
    expect(log.spilledBytes).toBeLessThanOrEqual(600_000);
    for (const id of ["c", "d"]) {
      const r = (await log.get(id))!;
      check(await readAll(log, id, r.earliestSeq - 1), 1000);
    }
    await log.dispose("c");
    await log.dispose("d");
    expect(log.spilledBytes).toBe(0);
    await log.close();
  });

  it("removes spill directories a killed process left behind", async () => {
    const spillDir = tempDir();
    // A pid that cannot be running (above the kernel's pid_max).
    const stale = path.join(spillDir, "agent-computer-spill-99999999-abc");
    mkdirSync(stale);
    const log = new MemoryEventLog({ logMaxBytes: 4096, spillDir });
    await fill(log, "e", 100, 1000);
    expect(existsSync(stale)).toBe(false);
    await log.close();
  });
});
