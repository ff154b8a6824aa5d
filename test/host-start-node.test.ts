// startNode() (agent-computer/host) is what `agent-computer serve` runs, so an
// embedder gets the same node, cluster mode included: two nodes started in one
// process over a real Redis serve each other's executions, and close() stops
// both cleanly. Imported by package name against dist/, as a consumer would.
import { execFileSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureDistBuilt } from "./support/dist.js";
import { type RedisServer, redisAvailable, startRedis } from "./support/redis-server.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

function runModule(code: string): unknown {
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", code], {
    cwd: root,
    encoding: "utf8",
    timeout: 60_000,
  });
  return JSON.parse(out.trim().split("\n").pop()!);
}

describe("startNode (agent-computer/host)", () => {
  let redis: RedisServer | undefined;
  beforeAll(async () => {
    ensureDistBuilt();
    if (redisAvailable()) redis = await startRedis();
  }, 120_000);
  afterAll(async () => {
    await redis?.close();
  });

  it("runs a single node on embedded defaults: memory log, loopback, a token, an exec served", () => {
    const got = runModule(`
      import { mkdtempSync } from "node:fs";
      import { tmpdir } from "node:os";
      import path from "node:path";
      import { ComputerClient } from "agent-computer/client";
      import { DEFAULT_PORT, startNode } from "agent-computer/host";
      const workspace = mkdtempSync(path.join(tmpdir(), "ac-node-"));
      const node = await startNode({ workspace, port: 0, logger: false, env: {} });
      const client = new ComputerClient({ url: node.url, token: node.token });
      const r = await (await client.exec("printf one; exit 3")).result();
      await node.close();
      await node.close(); // idempotent
      console.log(JSON.stringify({
        loopback: node.url.startsWith("http://127.0.0.1:"),
        token: typeof node.token === "string" && node.token.length >= 16,
        clustered: node.clustered,
        code: r.exitCode,
        out: new TextDecoder().decode(r.stdout),
        defaultPort: DEFAULT_PORT,
      }));
    `);
    expect(got).toEqual({
      loopback: true,
      token: true,
      clustered: false,
      code: 3,
      out: "one",
      defaultPort: 8787,
    });
  });

  describe.skipIf(!redisAvailable())("cluster mode", () => {
    it("two embedded nodes on one Redis: a command run on one is attached and killed through the other", () => {
      const got = runModule(`
        import { mkdtempSync } from "node:fs";
        import { tmpdir } from "node:os";
        import path from "node:path";
        import { ComputerClient } from "agent-computer/client";
        import { startNode } from "agent-computer/host";
        const workspace = mkdtempSync(path.join(tmpdir(), "ac-node-"));
        const common = { workspace, port: 0, logger: false, token: "t".repeat(24),
          eventLog: ${JSON.stringify(redis!.url)} + "?prefix=embed", env: {} };
        const a = await startNode({ ...common, nodeId: "a" });
        const b = await startNode({ ...common, nodeId: "b" });
        const ca = new ComputerClient({ url: a.url, token: a.token });
        const cb = new ComputerClient({ url: b.url, token: b.token });
        const h = await ca.exec("echo started; sleep 30", { encoding: "utf8" });
        const onB = await cb.get(h.id);
        const reader = onB.events({ heartbeats: false }).getReader();
        const first = (await reader.read()).value;
        await cb.kill(h.id);
        let exit;
        for (;;) { const { value, done } = await reader.read(); if (done || value.name === "exit") { exit = value; break; } }
        const rec = await onB.info();
        await b.close();
        await a.close();
        console.log(JSON.stringify({ clustered: [a.clustered, b.clustered], nodes: [a.nodeId, b.nodeId],
          first: first.value, reason: exit?.reason, node: rec.node, state: rec.state }));
      `);
      expect(got).toEqual({
        clustered: [true, true],
        nodes: ["a", "b"],
        first: "started\n",
        reason: "killed",
        node: "a",
        state: "killed",
      });
    });
  });
});
