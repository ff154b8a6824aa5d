// A Redis event log that runs out of memory (maxmemory with noeviction: every
// write is refused with "OOM command not allowed") must not leak through the
// API or wedge executions: the API answers with our error code and never
// the backend's raw text, the server keeps serving, and an execution whose
// output can no longer be written is finished with an honest reason instead
// of staying `running`. Real redis-server, real `agent-computer serve`.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureDistBuilt } from "./support/dist.js";
import { PROC_TOKEN, type ServeProc, startServe, until } from "./support/proc-serve.js";
import { type RedisServer, redisAvailable, startRedis } from "./support/redis-server.js";

const hasRedis = redisAvailable();
/** Redis' own words for the refusal, which must never reach a client. */
const LEAK = /OOM command|maxmemory|command not allowed/i;

describe.skipIf(!hasRedis)("Redis out of memory", () => {
  let redis: RedisServer;
  let serve: ServeProc;
  beforeAll(async () => {
    await ensureDistBuilt();
    redis = await startRedis({
      args: ["--maxmemory", "3mb", "--maxmemory-policy", "noeviction"],
    });
    serve = await startServe(["--log", redis.url, "--node-id", "n1"]);
  }, 300_000);
  afterAll(async () => {
    serve?.child.kill("SIGKILL");
    await serve?.exited;
    await redis?.close();
  });

  const call = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${serve.url}${p}`, {
      method,
      headers: { authorization: `Bearer ${PROC_TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, text, json: () => JSON.parse(text) };
  };

  it("maps the refusal to a code, keeps serving, and finishes the execution honestly", async () => {
    // Output far beyond Redis' memory: its appends are refused midway.
    const big = await call("POST", "/v1/execs", {
      command: "head -c 8000000 /dev/urandom | base64; sleep 30",
    });
    expect(big.status).toBe(201);
    const id = big.json().id as string;
    // Until Redis refuses writes, new executions may still start; then they
    // are refused with our code, never the raw reply.
    const refused = await until(async () => {
      const r = await call("POST", "/v1/execs", { command: "echo more" });
      return r.status === 201 ? undefined : r;
    }, 60_000);
    expect(refused.text).not.toMatch(LEAK);
    expect(refused.json().error.code).toBe("EUNAVAILABLE");
    expect(refused.status).toBe(503);
    // The big execution does not stay running: its output could not be kept.
    const rec = await until(async () => {
      const r = await call("GET", `/v1/execs/${id}`);
      expect(r.text).not.toMatch(LEAK);
      const body = r.json();
      return body.state === "running" ? undefined : body;
    }, 60_000);
    expect(rec.state).toBe("killed");
    // Its log ends gap-free with the reason: a notice naming the code, then the exit.
    const events = await call("GET", `/v1/execs/${id}/events?after=0`);
    expect(events.text).not.toMatch(LEAK);
    const frames = events.text
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    for (const [i, f] of frames.entries()) expect(f.seq).toBe(i + 1);
    expect(frames.at(-1)).toMatchObject({ name: "exit", reason: "killed" });
    const notice = Buffer.from(frames.at(-2).value, "base64").toString();
    expect(frames.at(-2).name).toBe("stderr");
    expect(notice).toMatch(/event log refused this execution's output \(EUNAVAILABLE\)/);
    // The server keeps serving.
    expect((await call("GET", "/healthz")).status).toBeLessThan(600);
    expect((await call("GET", "/v1/execs")).text).not.toMatch(LEAK);
    expect(serve.child.exitCode).toBeNull();
  }, 180_000);
});
