// The memory log's disk retention: events the ring evicts are read back from
// segment files byte-exact and gap-free, the per-execution and total disk
// budgets hold (ELOG_TRUNCATED only past them), and no file outlives the log.
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { LoggedEvent } from "../wire/types.js";
import { MemoryEventLog } from "./memory-log.js";
import { SPILL_BACKLOG_BYTES } from "./spill.js";

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

  it("never lets the ring reuse bytes a queued disk write still reads: appends back to back read back exact", async () => {
    const spillDir = tempDir();
    // A small ring (4 pooled segments) and large events: every append evicts,
    // and the pool hands evicted segments to the next appends at once.
    const log = new MemoryEventLog({ logMaxBytes: 1024 * 1024, spillDir });
    await log.create(rec("f"));
    const size = 200_000;
    const appends: Promise<void>[] = [];
    for (let s = 1; s <= 300; s++) {
      appends.push(
        log.append("f", [{ id: "f", seq: s, name: "stdout", value: bytesFor(s, size) }]),
      );
    }
    // Read before anything awaited the writes: the read waits for them.
    const evs = await readAll(log, "f", 0);
    await Promise.all(appends);
    expect(evs.length).toBe(300);
    check(evs, size);
    await log.close();
  });

  it("holds appends while the disk is behind by more than the backlog bound", async () => {
    const spillDir = tempDir();
    const log = new MemoryEventLog({ logMaxBytes: 1024 * 1024, spillDir });
    await log.create(rec("g"));
    const size = 4 * 1024 * 1024;
    let worst = 0;
    for (let s = 1; s <= 48; s++) {
      await log.append("g", [{ id: "g", seq: s, name: "stdout", value: bytesFor(s, size) }]);
      worst = Math.max(worst, log.spillBacklogBytes("g"));
    }
    expect(worst).toBeLessThanOrEqual(SPILL_BACKLOG_BYTES);
    const r = (await log.get("g"))!;
    check(await readAll(log, "g", r.earliestSeq - 1), size);
    await log.close();
  });

  it("a disk that refuses a queued write ends spilling: the ring goes on, the evicted part is truncated, nothing hangs", async () => {
    // A child whose file-size limit (RLIMIT_FSIZE) the spill outgrows: its
    // writes come back short, then fail, as on a full disk.
    const spillDir = tempDir();
    const memoryLog = path.resolve(__dirname, "../../dist/store/memory-log.js");
    const script = `
      const { MemoryEventLog } = await import(${JSON.stringify(memoryLog)});
      const log = new MemoryEventLog({ logMaxBytes: 256 * 1024, spillDir: ${JSON.stringify(spillDir)} });
      await log.create({ id: "h", command: "x", cwd: "", encoding: "b64", node: "local", startedAt: 0 });
      for (let s = 1; s <= 200; s++) {
        await log.append("h", [{ id: "h", seq: s, name: "stdout", value: new Uint8Array(64 * 1024).fill(s) }]);
      }
      await log.append("h", [{ id: "h", seq: 201, name: "exit", value: 0, reason: "exited" }]);
      // A read from the start waits for the queued writes, so the refusal is known after it.
      const err = await log.read("h", 0).catch((e) => e);
      const rec = await log.get("h");
      let n = 0, after = rec.earliestSeq - 1, ok = true;
      for (;;) {
        const evs = await log.read("h", after, { limit: 50 });
        if (evs.length === 0) break;
        for (const e of evs) {
          if (e.seq !== after + 1) ok = false;
          if (e.name === "stdout" && e.value.some((b) => b !== (e.seq & 255))) ok = false;
          after = e.seq; n++;
        }
      }
      console.log(JSON.stringify({ earliest: rec.earliestSeq, state: rec.state, code: err.code, n, last: after, ok, spilled: log.spilledBytes }));
      await log.close();
    `;
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        "prlimit",
        ["--fsize=1000000", process.execPath, "--input-type=module", "-e", script],
        { timeout: 30_000 },
        (err, stdout, stderr) =>
          err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
      ),
    );
    const got = JSON.parse(out.trim());
    expect(got.state).toBe("exited");
    expect(got.code).toBe("ELOG_TRUNCATED");
    expect(got.spilled).toBe(0);
    expect(got.earliest).toBeGreaterThan(150); // only what the ring holds is left
    expect(got).toMatchObject({ last: 201, ok: true });
    expect(got.n).toBe(201 - got.earliest + 1);
  });
});
