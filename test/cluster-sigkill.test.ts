// A node dies hard (SIGKILL) while it runs a command: the cluster must close
// that execution with an exit whose reason is "lost" within the documented
// bound (15 s with default timings: TTL 5 s + sweep every 2 s, see
// docs/operations.md), and a client streaming it from another node must see
// that exit rather than wait forever. Nodes are real `agent-computer serve`
// processes (dist/cli/main.js) sharing a real redis-server, with the default
// liveness timings, so this tests exactly what an operator runs.

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ComputerClient } from "../src/client/client.js";
import { collect } from "./support/cluster.js";
import { ensureDistBuilt } from "./support/dist.js";
import { listeningUrl } from "./support/proc-serve.js";
import { type RedisServer, redisAvailable, startRedis } from "./support/redis-server.js";

const hasRedis = redisAvailable();
const root = path.resolve(__dirname, "..");
const cli = path.join(root, "dist/cli/main.js");
const TOKEN = "sigkill-test-token-0123";
const BOUND_MS = 15_000;

interface NodeProc {
  id: string;
  url: string;
  child: ChildProcess;
  workspace: string;
  client: ComputerClient;
}

async function startNodeProcess(redisUrl: string, id: string): Promise<NodeProc> {
  const workspace = mkdtempSync(path.join(tmpdir(), `ac-sigkill-${id}-`));
  const child = spawn(
    process.execPath,
    [cli, "serve", "--port", "0", "--workspace", workspace, "--quiet"],
    {
      env: {
        ...process.env,
        AGENT_COMPUTER_LOG: `${redisUrl}?prefix=sk:`,
        AGENT_COMPUTER_NODE_ID: id,
        AGENT_COMPUTER_TOKEN: TOKEN,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let err = "";
  child.stderr!.on("data", (d) => {
    err += d;
  });
  const url = await listeningUrl(child, `node ${id}`, () => err);
  child.stdout!.resume();
  return { id, url, child, workspace, client: new ComputerClient({ url, token: TOKEN }) };
}

describe.skipIf(!hasRedis)("cluster: a node is SIGKILLed while running a command", () => {
  let redis: RedisServer;
  const procs: NodeProc[] = [];

  beforeAll(async () => {
    ensureDistBuilt();
    redis = await startRedis();
  }, 180_000);
  afterAll(async () => {
    for (const p of procs) {
      if (p.child.exitCode === null && p.child.signalCode === null) {
        const done = new Promise((r) => p.child.once("exit", r));
        p.child.kill("SIGTERM");
        await done;
      }
      rmSync(p.workspace, { recursive: true, force: true });
    }
    await redis?.close();
  });

  it("the execution ends as lost within the bound and a client streaming from B sees the exit", async () => {
    const a = await startNodeProcess(redis.url, "a");
    procs.push(a);
    const b = await startNodeProcess(redis.url, "b");
    procs.push(b);
    const run = await a.client.exec(
      "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.05; done",
    );
    const pid = (await run.info()).pid;
    let killedAt = 0;
    let seenBeforeKill = 0;
    try {
      let killing: Promise<void> | undefined;
      const fromB = collect((await b.client.get(run.id)).events({ after: 0 }), {
        onEvent: (ev) => {
          if (ev.name !== "exit" && !killing && ev.seq >= 5) {
            seenBeforeKill = ev.seq;
            killing = (async () => {
              killedAt = Date.now();
              const gone = new Promise((r) => a.child.once("exit", r));
              a.child.kill("SIGKILL");
              await gone;
            })();
          }
        },
      });
      const got = await fromB;
      const endedAt = Date.now();
      await killing;
      expect(seenBeforeKill).toBeGreaterThanOrEqual(5);
      expect(got.exit).toMatchObject({ name: "exit", reason: "lost" });
      // Gap-free through the loss: the lost exit follows the last stored event.
      expect(got.seqs).toEqual(Array.from({ length: got.seqs.length }, (_, i) => i + 1));
      // The documented bound (a correctness property: clients never wait forever).
      expect(endedAt - killedAt).toBeLessThanOrEqual(BOUND_MS);
      const rec = await (await b.client.get(run.id)).info();
      expect(rec).toMatchObject({ state: "lost", node: "a" });
      // The record lists as lost on every surviving node.
      expect((await b.client.list()).find((r) => r.id === run.id)?.state).toBe("lost");
    } finally {
      // The dead node's process group outlives it (it was detached); clean up.
      if (pid) {
        try {
          process.kill(-pid, "SIGKILL");
        } catch {
          /* already gone (SIGPIPE on its next write) */
        }
      }
    }
  });
});
