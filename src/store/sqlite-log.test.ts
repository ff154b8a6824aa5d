// Runs the shared EventLog contract against the SQLite log, and checks what
// only a file-backed log can promise: history survives a restart, and
// executions that were running when the process died come back as "lost".
// Also that a file written by the earlier storage (WAL, WITHOUT ROWID events
// table) still opens and works, since the schema is only created if missing.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { SqliteEventLog } from "./sqlite-log.js";
import { runEventLogContract } from "./test-support/event-log-contract.js";

const dir = mkdtempSync(path.join(tmpdir(), "ac-sqlite-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

runEventLogContract("sqlite", (o) => new SqliteEventLog(path.join(dir, `c${n++}.db`), o));

describe("SqliteEventLog across a restart", () => {
  it("replays finished executions and closes running ones as lost", async () => {
    const file = path.join(dir, "restart.db");
    const enc = new TextEncoder();
    const a = new SqliteEventLog(file);
    const base = {
      command: "x",
      cwd: "",
      encoding: "b64" as const,
      node: "local",
      startedAt: Date.now(),
    };
    await a.create({ id: "done", ...base });
    await a.append("done", [
      { id: "done", seq: 1, name: "stdout", value: enc.encode("kept") },
      { id: "done", seq: 2, name: "stderr", value: "text" },
      { id: "done", seq: 3, name: "exit", value: 2, reason: "exited" },
    ]);
    await a.create({ id: "run", ...base, pid: 4242 });
    await a.append("run", [{ id: "run", seq: 1, name: "stdout", value: enc.encode("partial") }]);
    // No close(): simulate the process dying (the file is all that is left).
    const b = new SqliteEventLog(file);
    expect((await b.list()).map((r) => [r.id, r.state])).toEqual([
      ["done", "exited"],
      ["run", "lost"],
    ]);
    const done = await b.read("done", 0);
    expect(done.map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(new TextDecoder().decode(done[0]!.value as Uint8Array)).toBe("kept");
    expect(done[1]!.value).toBe("text");
    expect(done[2]).toMatchObject({ name: "exit", value: 2, reason: "exited" });
    const run = await b.read("run", 0);
    expect(run.map((e) => e.name)).toEqual(["stdout", "exit"]);
    expect(run[1]).toMatchObject({ seq: 2, value: -1, reason: "lost" });
    expect((await b.get("run"))?.state).toBe("lost");
    await b.close();
    await a.close();
  });
});

describe("SqliteEventLog on a file from the earlier storage (WAL, WITHOUT ROWID)", () => {
  it("recovers it and keeps working", async () => {
    const file = path.join(dir, "old-format.db");
    const old = new Database(file);
    old.pragma("page_size = 65536");
    old.pragma("journal_mode = WAL");
    old.exec(`
      CREATE TABLE execs (id TEXT PRIMARY KEY, ord INTEGER NOT NULL, bytes INTEGER NOT NULL, record TEXT NOT NULL);
      CREATE TABLE events (id TEXT NOT NULL, seq INTEGER NOT NULL, name TEXT NOT NULL, data BLOB,
        text INTEGER NOT NULL DEFAULT 0, code INTEGER, signal TEXT, reason TEXT,
        PRIMARY KEY (id, seq)) WITHOUT ROWID;
    `);
    const record = {
      id: "old",
      command: "x",
      cwd: "",
      encoding: "b64",
      node: "local",
      startedAt: Date.now(),
      state: "running",
      lastSeq: 1,
      earliestSeq: 1,
    };
    old.prepare("INSERT INTO execs VALUES ('old', 1, 70, ?)").run(JSON.stringify(record));
    old
      .prepare("INSERT INTO events (id, seq, name, data, text) VALUES ('old', 1, 'stdout', ?, 0)")
      .run(Buffer.from("before"));
    old.close();

    const log = new SqliteEventLog(file, { logMaxBytes: 64 * 1024 });
    expect((await log.get("old"))?.state).toBe("lost");
    const evs = await log.read("old", 0);
    expect(evs.map((e) => e.name)).toEqual(["stdout", "exit"]);
    expect(new TextDecoder().decode(evs[0]!.value as Uint8Array)).toBe("before");
    // New executions, with trimming, work on the old table too.
    await log.create({
      id: "new",
      command: "y",
      cwd: "",
      encoding: "b64",
      node: "local",
      startedAt: 0,
    });
    const chunk = new Uint8Array(16 * 1024).fill(7);
    for (let seq = 1; seq <= 20; seq++) {
      await log.append("new", [{ id: "new", seq, name: "stdout", value: chunk }]);
    }
    const rec = (await log.get("new"))!;
    expect(rec.earliestSeq).toBeGreaterThan(1);
    const kept = await log.read("new", rec.earliestSeq - 1, { limit: 100 });
    expect(kept.map((e) => e.seq)).toEqual(
      Array.from({ length: 20 - rec.earliestSeq + 1 }, (_, i) => rec.earliestSeq + i),
    );
    await log.close();
    // And read back from the file (no hot tail) after a reopen.
    const again = new SqliteEventLog(file, { logMaxBytes: 64 * 1024 });
    const fromFile = await again.read("new", rec.earliestSeq - 1, { limit: 100 });
    expect(fromFile.map((e) => e.seq)).toEqual([...kept.map((e) => e.seq), 21]);
    expect(fromFile[0]!.value).toEqual(chunk);
    await again.close();
  });
});
