// Runs the shared EventLog contract against the SQLite log, and checks what
// only a file-backed log can promise: history survives a restart, and
// executions that were running when the process died come back as "lost".
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
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
