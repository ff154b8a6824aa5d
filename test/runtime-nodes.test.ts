// Executions seen from a computer that does not run them (a second node on a
// shared log): events/result/info read the log; kill/write/end/dispose go
// through RemoteControl, or fail ENOENT without one. Also abort signals and
// the path confinement helper shared with the files API.
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Computer, MemoryEventLog, type RemoteControl, resolveInWorkspace } from "../src/index.js";
import {
  codeOf,
  collect,
  collectUntilError,
  logged,
  sleep,
  tempDir,
  textOf,
} from "./runtime-support.js";

let ws: ReturnType<typeof tempDir>;
beforeEach(() => {
  ws = tempDir();
});
afterEach(() => ws.cleanup());

describe("a second node on a shared log", () => {
  it("reads another node's execution from the log and controls it through RemoteControl", async () => {
    const eventLog = new MemoryEventLog();
    const a = new Computer({ workspace: ws.dir, eventLog, nodeId: "a" });
    const calls: string[] = [];
    const remote: RemoteControl = {
      kill: async (rec, signal) => {
        calls.push(`kill ${rec.id} ${signal}`);
        await a.kill(rec.id, signal);
      },
      write: async (rec, chunk) => {
        calls.push(`write ${rec.id}`);
        await a.write(rec.id, chunk);
      },
      end: async (rec) => {
        calls.push(`end ${rec.id}`);
        await a.end(rec.id);
      },
      dispose: async (rec) => {
        calls.push(`dispose ${rec.id}`);
        await a.dispose(rec.id);
      },
    };
    const b = new Computer({ workspace: ws.dir, eventLog, nodeId: "b", remote });
    const lonely = new Computer({ workspace: ws.dir, eventLog, nodeId: "c" });

    const run = await a.exec("cat; echo done", { id: "shared", stdin: "pipe", encoding: "utf8" });
    const viaB = await b.get("shared");
    expect((await viaB.info()).node).toBe("a");
    expect(await codeOf((await lonely.get("shared")).write("x"))).toBe("ENOENT");
    expect(await codeOf(lonely.kill("shared"))).toBe("ENOENT");
    const streamed = collect(viaB.events({ heartbeats: false }));
    await viaB.write("hello\n");
    await viaB.end();
    const evs = logged(await streamed);
    expect(textOf(evs)).toBe("hello\ndone\n");
    expect((await viaB.result()).stdout).toBe("hello\ndone\n");
    expect(calls).toEqual(["write shared", "end shared"]);
    await run.result();

    const sleeper = await a.exec("sleep 30", { id: "sleeper" });
    await b.kill("sleeper", "SIGKILL");
    expect((await sleeper.result()).status).toBe("killed");
    // Finished executions are disposed straight in the log, no remote call needed.
    await b.dispose("sleeper");
    expect(calls).toEqual(["write shared", "end shared", "kill sleeper SIGKILL"]);
    expect(await codeOf(a.get("sleeper"))).toBe("ENOENT");
    await lonely.close();
    await b.close();
    await a.close();
  });
});

describe("abort signals", () => {
  it("abort ends an events stream with EABORTED and releases the process", async () => {
    const c = new Computer({ workspace: ws.dir });
    const run = await c.exec("echo one; sleep 30");
    const ac = new AbortController();
    const p = collectUntilError(run.events({ signal: ac.signal }));
    await sleep(100);
    ac.abort();
    const { events, error } = await p;
    expect(error).toMatchObject({ code: "EABORTED" });
    expect(logged(events).map((e) => e.name)).toEqual(["stdout"]);
    const ac2 = new AbortController();
    const r = run.result({ signal: ac2.signal });
    ac2.abort();
    expect(await codeOf(r)).toBe("EABORTED");
    await c.close();
  });
});

describe("resolveInWorkspace", () => {
  it("confines paths lexically and through symlinks", async () => {
    mkdirSync(path.join(ws.dir, "a/b"), { recursive: true });
    writeFileSync(path.join(ws.dir, "a/f.txt"), "x");
    symlinkSync("/etc", path.join(ws.dir, "etc-link"));
    symlinkSync("a/b", path.join(ws.dir, "inner-link"));
    const root = await resolveInWorkspace(ws.dir, "");
    expect(await resolveInWorkspace(ws.dir, "a/b")).toBe(path.join(root, "a/b"));
    expect(await resolveInWorkspace(ws.dir, "/a/f.txt")).toBe(path.join(root, "a/f.txt"));
    expect(await resolveInWorkspace(ws.dir, "inner-link/new/file")).toBe(
      path.join(root, "a/b/new/file"),
    );
    expect(await resolveInWorkspace(ws.dir, "a/../a/b")).toBe(path.join(root, "a/b"));
    expect(await codeOf(resolveInWorkspace(ws.dir, "../x"))).toBe("EFORBIDDEN");
    expect(await codeOf(resolveInWorkspace(ws.dir, "a/../../x"))).toBe("EFORBIDDEN");
    expect(await codeOf(resolveInWorkspace(ws.dir, "etc-link"))).toBe("EFORBIDDEN");
    expect(await codeOf(resolveInWorkspace(ws.dir, "etc-link/passwd"))).toBe("EFORBIDDEN");
    expect(await codeOf(resolveInWorkspace(ws.dir, "etc-link/missing/deep"))).toBe("EFORBIDDEN");
    expect(await codeOf(resolveInWorkspace(ws.dir, "a\0b"))).toBe("EINVAL");
  });
});
