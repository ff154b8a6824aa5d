// No process outlives its server (without namespaces or cgroups: the sandbox
// is not involved here). Real `agent-computer serve` processes and real
// commands:
// - kill -9 of the server: its spawn helper kills every command it started
//   and their `setsid` daemons at once, without a restart;
// - kill -9 of a server that spawns inline (no helper), then a restart on the
//   same SQLite log: the restarted server kills what is left of the
//   executions it closes as lost (quiet commands, a TERM-ignoring one, and a
//   `setsid` daemon);
// - a double SIGTERM (forced exit) still ends a TERM-ignoring command and a
//   daemon at once;
// - an execution that ends takes its `setsid` daemons with it;
// - a recorded pid whose start time does not match is never signalled.

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Computer } from "../src/runtime/computer.js";
import { reapLost } from "../src/runtime/reaper.js";
import { MemoryEventLog } from "../src/store/memory-log.js";
import { ensureDistBuilt } from "./support/dist.js";
import {
  killAll,
  running,
  type ServeProc,
  startServe,
  until,
  waitGone,
} from "./support/proc-serve.js";
import { redisAvailable, startRedis } from "./support/redis-server.js";

const DAEMON =
  "setsid sh -c 'echo $$ > daemon.pid; exec sleep 1000' </dev/null >/dev/null 2>&1 & sleep 1000";

const dirs: string[] = [];
const strays: number[] = [];
function tmp(name: string): string {
  const d = mkdtempSync(path.join(tmpdir(), `ac-proc-${name}-`));
  dirs.push(d);
  return d;
}
async function daemonPid(dir: string): Promise<number> {
  return await until(() => {
    try {
      const n = Number(readFileSync(path.join(dir, "daemon.pid"), "utf8").trim());
      return n > 0 ? n : undefined;
    } catch {
      return undefined;
    }
  });
}

beforeAll(() => ensureDistBuilt(), 180_000);
afterAll(() => {
  killAll(strays);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/**
 * Starts `commands` and then the setsid daemon on `node`: their handles, in
 * that order, and every pid they run as (also recorded as strays to clean
 * up after the test).
 */
async function startStubborn(node: ServeProc, ws: string, commands: string[]) {
  const handles = [];
  for (const c of [...commands, DAEMON]) handles.push(await node.client.exec(c));
  const pids = await Promise.all(handles.map((h) => until(async () => (await h.info()).pid)));
  pids.push(await daemonPid(ws));
  strays.push(...pids);
  return { handles, pids };
}

describe("processes never outlive their server", () => {
  it("kill -9 of the server: its spawn helper kills every command and setsid daemon at once", async () => {
    const dir = tmp("helper");
    const ws = path.join(dir, "ws");
    const first = await startServe(["--workspace", ws]);
    const { pids } = await startStubborn(first, ws, ["sleep 1000", "trap '' TERM; sleep 1000"]);
    first.child.kill("SIGKILL");
    await first.exited;
    expect(await waitGone(pids, 10_000)).toEqual([]);
  }, 60_000);

  it("kill -9 of a server that spawns inline, then a restart on the same log, kills every group of the lost executions", async () => {
    const dir = tmp("crash");
    const log = `sqlite:${path.join(dir, "log.db")}`;
    const ws = path.join(dir, "ws");
    // Inline: nothing kills the commands when the server dies (the helper would).
    const first = await startServe(["--workspace", ws, "--log", log, "--spawner", "inline"]);
    const {
      handles: [quiet, deaf, daemon],
      pids,
    } = await startStubborn(first, ws, ["sleep 1000", "trap '' TERM; sleep 1000"]);
    first.child.kill("SIGKILL");
    await first.exited;
    // The defect: the groups survive the server (parent 1), and nothing ends quiet ones.
    await new Promise((r) => setTimeout(r, 300));
    expect(pids.filter(running)).toEqual(pids);

    const second = await startServe(["--workspace", ws, "--log", log]);
    try {
      expect(await waitGone(pids, 10_000)).toEqual([]);
      for (const h of [quiet, deaf, daemon]) {
        const rec = await until(async () => {
          const r = await second.client.get(h.id).then((x) => x.info());
          return r.lostNote ? r : undefined;
        });
        expect(rec.state).toBe("lost");
        expect(rec.lostNote).toMatch(/killed when the server restarted/);
        expect(rec.pidStart).toBeUndefined();
      }
    } finally {
      second.child.kill("SIGTERM");
      await second.exited;
    }
  }, 60_000);

  it.skipIf(!redisAvailable())(
    "cluster: kill -9 of a node that spawns inline, then a restart with the same node id, kills what it left running",
    async () => {
      const redis = await startRedis();
      const ws = tmp("redis");
      const env = { AGENT_COMPUTER_LOG: `${redis.url}?prefix=pr:`, AGENT_COMPUTER_NODE_ID: "n1" };
      try {
        const first = await startServe(["--workspace", ws, "--spawner", "inline"], env);
        const {
          handles: [deaf],
          pids,
        } = await startStubborn(first, ws, ["trap '' TERM; sleep 1000"]);
        first.child.kill("SIGKILL");
        await first.exited;
        await new Promise((r) => setTimeout(r, 300));
        expect(pids.filter(running)).toEqual(pids);
        // Restarting with the same id waits out the dead one's liveness key (≤ 5 s).
        const second = await startServe(["--workspace", ws], env);
        try {
          expect(await waitGone(pids, 15_000)).toEqual([]);
          const rec = await until(async () => {
            const r = await second.client.get(deaf.id).then((x) => x.info());
            return r.lostNote ? r : undefined;
          });
          expect(rec.state).toBe("lost");
          expect(rec.lostNote).toMatch(/killed when the server restarted/);
        } finally {
          second.child.kill("SIGTERM");
          await second.exited;
        }
      } finally {
        await redis.close();
      }
    },
    90_000,
  );

  it("a double SIGTERM (forced exit) ends a TERM-ignoring command and a setsid daemon", async () => {
    const dir = tmp("forced");
    const node = await startServe(["--workspace", dir, "--log", "memory"]);
    const { pids } = await startStubborn(node, dir, ["trap '' TERM; sleep 1000"]);
    node.child.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 200));
    node.child.kill("SIGTERM");
    await node.exited;
    expect(node.stderr()).toMatch(/forced exit/);
    expect(await waitGone(pids, 3000)).toEqual([]);
  }, 60_000);

  it("an execution that ends takes its setsid daemons with it", async () => {
    const dir = tmp("daemon");
    const computer = new Computer({ workspace: dir, heartbeatMs: 0 });
    try {
      const h = await computer.exec(
        "setsid sh -c 'echo $$ > daemon.pid; exec sleep 1000' </dev/null >/dev/null 2>&1 & sleep 0.3",
      );
      const pid = await daemonPid(dir);
      strays.push(pid);
      const res = await h.result();
      expect(res.exitCode).toBe(0);
      expect(running(pid)).toBe(false);
    } finally {
      await computer.close();
    }
  }, 30_000);

  it("never signals a pid whose start time differs from the recorded one (pid reuse)", async () => {
    const other = spawn("sleep", ["1000"], { detached: true, stdio: "ignore" });
    strays.push(other.pid!);
    const eventLog = new MemoryEventLog();
    try {
      await eventLog.create({
        id: "old",
        command: "sleep 1000",
        cwd: "",
        encoding: "b64",
        node: "local",
        startedAt: 1,
      });
      // The recorded pid now belongs to another process (started later).
      await eventLog.update("old", { pid: other.pid!, pidStart: "1@not-this-boot", state: "lost" });
      const outcome = await reapLost(eventLog, "local");
      expect(outcome.get("old")).toBe("gone");
      expect(running(other.pid!)).toBe(true);
      expect((await eventLog.get("old"))?.lostNote).toMatch(/no process of it was left/);
    } finally {
      other.kill("SIGKILL");
      await eventLog.close();
    }
  });
});
