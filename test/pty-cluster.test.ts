// Terminals in cluster mode: a pty shell runs on node A; a client of node B
// types into it, resizes it (the resize travels over the control channel to
// A, where the pty is), reads the new `stty size` and the screen at the new
// size, all through B. Two in-process nodes on one real redis-server.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNode, type TestNode } from "./support/cluster.js";
import { type RedisServer, redisAvailable, startRedis } from "./support/redis-server.js";

const hasRedis = redisAvailable();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!hasRedis)("cluster: pty executions across nodes", () => {
  let redis: RedisServer;
  let a: TestNode;
  let b: TestNode;

  beforeAll(async () => {
    redis = await startRedis();
    const prefix = `ptyc${process.pid}:`;
    a = await startNode(redis.url, prefix, "a");
    b = await startNode(redis.url, prefix, "b");
  });
  afterAll(async () => {
    await b?.close().catch(() => {});
    await a?.close().catch(() => {});
    await redis?.close();
  });

  it("resizes a pty running on A from B; stty size and the screen follow", async () => {
    const started = await a.client.exec(
      { argv: ["bash", "--norc", "--noprofile", "-i"] },
      {
        pty: { cols: 80, rows: 24 },
        env: { PS1: "$ " },
      },
    );
    const onB = await b.client.get(started.id);
    let text = "";
    const ac = new AbortController();
    void (async () => {
      const dec = new TextDecoder();
      try {
        const reader = onB.events({ heartbeats: false, signal: ac.signal }).getReader();
        for (;;) {
          const { value: ev, done } = await reader.read();
          if (done) break;
          if (ev.name === "stdout") {
            text +=
              typeof ev.value === "string" ? ev.value : dec.decode(ev.value, { stream: true });
          }
        }
      } catch {
        // aborted
      }
    })();
    const until = async (re: RegExp) => {
      const end = Date.now() + 10_000;
      while (!re.test(text)) {
        if (Date.now() > end)
          throw new Error(`timed out waiting for ${re}: ${JSON.stringify(text)}`);
        await sleep(20);
      }
    };
    await onB.write("stty size\r");
    await until(/24 80/);
    await onB.resize({ cols: 111, rows: 37 });
    await onB.write("stty size\r");
    await until(/37 111/);
    const screen = await onB.screen();
    expect([screen.cols, screen.rows]).toEqual([111, 37]);
    // The owner validates: a bad size from B is the owner's EINVAL, not ENOENT.
    await expect(onB.resize({ cols: 0, rows: 5 })).rejects.toMatchObject({ code: "EINVAL" });
    await onB.kill("SIGKILL");
    ac.abort();
  });

  it("refuses to resize a non-pty execution on A from B (EINVAL)", async () => {
    const plain = await a.client.exec("sleep 30");
    const onB = await b.client.get(plain.id);
    await expect(onB.resize({ cols: 10, rows: 10 })).rejects.toMatchObject({ code: "EINVAL" });
    await onB.kill("SIGKILL");
  });
});
