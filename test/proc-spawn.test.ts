// Spawn failures never leave a record behind: a command the kernel cannot
// start (a NUL byte, an argument or environment past the system limits:
// E2BIG) is refused with a clear 4xx and a code before anything is recorded;
// an exception after the record exists finishes it; timeoutMs is bounded.
// Real server (in-process node on the memory log), real processes.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningNode, startNode } from "../src/host/start-node.js";
import { Computer } from "../src/runtime/computer.js";
import { MAX_TIMEOUT_MS } from "../src/runtime/spawn-limits.js";
import { MemoryEventLog } from "../src/store/memory-log.js";
import type { ExecRecord } from "../src/store/types.js";

const TOKEN = "proc-spawn-test-token";
interface Reply {
  error: { code: string; message: string };
  execs: ExecRecord[];
  id: string;
  [field: string]: unknown;
}
const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(path.join(tmpdir(), "ac-proc-spawn-"));
  dirs.push(d);
  return d;
};

describe("spawn failures never leave a record behind", () => {
  let node: RunningNode;
  const call = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${node.url}${p}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Reply };
  };
  const records = async () => (await call("GET", "/v1/execs")).body.execs;

  beforeAll(async () => {
    node = await startNode({ workspace: tmp(), port: 0, token: TOKEN, logger: false });
  });
  afterAll(async () => {
    await node?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("a NUL byte in the command, argv or env is 400 EINVAL and records nothing", async () => {
    for (const body of [
      { command: "echo a\u0000b" },
      { argv: ["echo", "a\u0000b"] },
      { command: "true", env: { A: "x\u0000y" } },
    ]) {
      const r = await call("POST", "/v1/execs", body);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("EINVAL");
    }
    expect(await records()).toEqual([]);
  });

  it("a command or env value past the system limit is 413 ETOOLARGE, 200 times, with no record left", async () => {
    const long = `echo ${"x".repeat(200_000)}`;
    for (const body of [
      { command: long },
      { argv: ["echo", "y".repeat(200_000)] },
      { command: "true", env: { BIG: "z".repeat(200_000) } },
    ]) {
      const r = await call("POST", "/v1/execs", body);
      expect(r.status).toBe(413);
      expect(r.body.error.code).toBe("ETOOLARGE");
      expect(r.body.error.message).toMatch(/limit|bytes/);
    }
    const results = await Promise.all(
      Array.from({ length: 200 }, () => call("POST", "/v1/execs", { command: long })),
    );
    expect(new Set(results.map((r) => r.status))).toEqual(new Set([413]));
    expect(await records()).toEqual([]);
    // The node still runs commands.
    const ok = await call("POST", "/v1/execs", { command: "true" });
    expect(ok.status).toBe(201);
  });

  it("many variables that are each fine but too much together are ETOOLARGE", async () => {
    const computer = new Computer({ workspace: tmp(), heartbeatMs: 0 });
    try {
      const env: Record<string, string> = {};
      for (let i = 0; i < 30; i++) env[`V${i}`] = "v".repeat(100_000);
      await expect(computer.exec("true", { env })).rejects.toMatchObject({ code: "ETOOLARGE" });
      expect(await computer.list()).toEqual([]);
    } finally {
      await computer.close();
    }
  });

  it("timeoutMs beyond the documented maximum is 400 EINVAL; the maximum itself is accepted", async () => {
    const over = await call("POST", "/v1/execs", { command: "sleep 5", timeoutMs: 2 ** 31 });
    expect(over.status).toBe(400);
    expect(over.body.error.code).toBe("EINVAL");
    const max = await call("POST", "/v1/execs", {
      command: "sleep 0.3",
      timeoutMs: MAX_TIMEOUT_MS,
    });
    expect(max.status).toBe(201);
    const res = await call("GET", `/v1/execs/${max.body.id}/result`);
    expect(res.body).toMatchObject({ status: "exited", exitCode: 0 });
  });

  it("an exception after the record was created finishes it (the command is killed, not left running)", async () => {
    class FailingUpdate extends MemoryEventLog {
      override async update(id: string, patch: Partial<Omit<ExecRecord, "id">>): Promise<void> {
        if (patch.pid !== undefined) throw new Error("log refused the update");
        return super.update(id, patch);
      }
    }
    const computer = new Computer({
      workspace: tmp(),
      heartbeatMs: 0,
      eventLog: new FailingUpdate(),
    });
    try {
      await expect(computer.exec("sleep 1000", { id: "doomed" })).rejects.toThrow(/refused/);
      for (let i = 0; i < 100 && (await computer.info("doomed")).state === "running"; i++) {
        await new Promise((r) => setTimeout(r, 50));
      }
      expect((await computer.info("doomed")).state).toBe("killed");
      expect(computer.running()).toEqual([]);
    } finally {
      await computer.close();
    }
  });
});
