// The HTTP API through a real socket: auth (401), Host/Origin checks (403),
// strict bodies (malformed, wrong types, unknown fields, oversize: 4xx, never a
// 500 or a crash), the event stream in both formats, SSE exactly as
// docs/protocol.md §2 says, error mapping (404, 406, 409, 410), WebSocket
// multiplexing and /metrics.

import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { decodeExecEvents } from "../src/wire/exec-wire/index.js";
import { createSseParser, type SseEvent } from "../src/wire/sse.js";
import type { ExecEvent } from "../src/wire/types.js";
import { type Harness, startServer } from "./support/server-harness.js";

let h: Harness;
const auth = () => ({ authorization: `Bearer ${h.token}` });

beforeAll(async () => {
  h = await startServer({
    server: { limits: { maxJsonBytes: 4096 } },
    computer: { logMaxBytes: 4096, spill: { spillMaxBytes: 0 } },
  });
});
afterAll(async () => {
  await h?.close();
});

/** Raw request (fetch forbids setting Host/Origin freely). */
function raw(
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string | Buffer,
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  const u = new URL(h.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: u.hostname, port: u.port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () =>
        resolve({
          status: res.statusCode!,
          headers: res.headers,
          body: Buffer.concat(chunks).toString(),
        }),
      );
    });
    req.on("error", reject);
    req.end(body);
  });
}

async function postExec(body: unknown, query = ""): Promise<Response> {
  return fetch(`${h.url}/v1/execs${query}`, {
    method: "POST",
    headers: { ...auth(), "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

describe("auth", () => {
  it("/healthz is open, everything else needs the token", async () => {
    expect((await fetch(`${h.url}/healthz`)).status).toBe(200);
    const r = await fetch(`${h.url}/v1/execs`);
    expect(r.status).toBe(401);
    expect((await r.json()).error.code).toBe("EUNAUTHORIZED");
    const bad = await fetch(`${h.url}/v1/execs`, { headers: { authorization: "Bearer nope" } });
    expect(bad.status).toBe(401);
    expect((await fetch(`${h.url}/metrics`)).status).toBe(401);
    expect((await fetch(`${h.url}/v1/execs`, { headers: auth() })).status).toBe(200);
  });

  it("?token= once sets an HttpOnly SameSite=Strict cookie that works after", async () => {
    const r = await fetch(`${h.url}/v1/execs?token=${h.token}`);
    expect(r.status).toBe(200);
    const cookie = r.headers.get("set-cookie")!;
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    const r2 = await fetch(`${h.url}/v1/execs`, { headers: { cookie: cookie.split(";")[0]! } });
    expect(r2.status).toBe(200);
  });

  it("rejects a foreign Origin with 403, even with the token", async () => {
    const r = await raw("GET", "/v1/execs", { ...auth(), origin: "http://evil.example" });
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body).error.code).toBe("EFORBIDDEN");
    const same = await raw("GET", "/v1/execs", { ...auth(), origin: h.url });
    expect(same.status).toBe(200);
  });

  it("rejects a DNS-rebinding Host with 403", async () => {
    const port = new URL(h.url).port;
    const r = await raw("GET", "/v1/execs", { ...auth(), host: `evil.example:${port}` });
    expect(r.status).toBe(403);
    const ok = await raw("GET", "/v1/execs", { ...auth(), host: `localhost:${port}` });
    expect(ok.status).toBe(200);
  });

  it("refuses a WebSocket upgrade without token or from a foreign origin", async () => {
    const wsUrl = `${h.url.replace("http", "ws")}/v1/ws`;
    const status = (opts: WebSocket.ClientOptions) =>
      new Promise<number>((resolve) => {
        const ws = new WebSocket(wsUrl, opts);
        ws.on("unexpected-response", (_req, res) => resolve(res.statusCode!));
        ws.on("open", () => {
          ws.close();
          resolve(101);
        });
        ws.on("error", () => {});
      });
    expect(await status({})).toBe(401);
    expect(await status({ headers: auth(), origin: "http://evil.example" })).toBe(403);
    expect(await status({ headers: auth() })).toBe(101);
  });
});

describe("bodies and errors", () => {
  it("malformed JSON, wrong types, unknown fields: 400 EINVAL", async () => {
    for (const body of [
      "{not json",
      "[1,2]",
      "null",
      { command: 42 },
      { argv: [] },
      { argv: ["ls", 1] },
      { command: "true", argv: ["true"] },
      {},
      { command: "true", timeout: 5 },
      { command: "true", timeoutMs: -1 },
      { command: "true", encoding: "latin1" },
      { command: "true", env: { A: 1 } },
      { command: "true", stdin: { b64: "***" } },
      { command: "true", id: "../x" },
    ]) {
      const r = await postExec(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect((await r.json()).error.code).toBe("EINVAL");
    }
  });

  it("oversize body: 413 without buffering it", async () => {
    const r = await postExec({ command: "x".repeat(10_000) });
    expect(r.status).toBe(413);
    expect((await r.json()).error.code).toBe("ETOOLARGE");
  });

  it("wrong content type: 415", async () => {
    const r = await fetch(`${h.url}/v1/execs`, {
      method: "POST",
      headers: { ...auth(), "content-type": "text/plain" },
      body: JSON.stringify({ command: "true" }),
    });
    expect(r.status).toBe(415);
  });

  it("unknown execution: 404 ENOENT on every route", async () => {
    for (const [method, path] of [
      ["GET", "/v1/execs/nope"],
      ["GET", "/v1/execs/nope/events"],
      ["POST", "/v1/execs/nope/kill"],
      ["DELETE", "/v1/execs/nope"],
    ] as const) {
      const r = await fetch(`${h.url}${path}`, { method, headers: auth() });
      expect(r.status, path).toBe(404);
      expect((await r.json()).error.code).toBe("ENOENT");
    }
    const r = await fetch(`${h.url}/v1/nothing-here`, { headers: auth() });
    expect(r.status).toBe(404);
  });

  it("busy id: 409 EEXEC_BUSY", async () => {
    const a = await postExec({ id: "busy1", command: "sleep 5" });
    expect(a.status).toBe(201);
    const b = await postExec({ id: "busy1", command: "true" });
    expect(b.status).toBe(409);
    expect((await b.json()).error.code).toBe("EEXEC_BUSY");
    await h.client.kill("busy1", "SIGKILL");
  });

  it("406 for an unsupported Accept; 400 for a bad after", async () => {
    const { id } = await (await postExec({ command: "true" })).json();
    const r = await fetch(`${h.url}/v1/execs/${id}/events`, {
      headers: { ...auth(), accept: "text/html" },
    });
    expect(r.status).toBe(406);
    const r2 = await fetch(`${h.url}/v1/execs/${id}/events?after=-3`, { headers: auth() });
    expect(r2.status).toBe(400);
  });

  it("410 ELOG_TRUNCATED with earliestSeq when resuming before the ring", async () => {
    const { id } = await (
      await postExec({
        command: "for i in $(seq 1 200); do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxx; done",
      })
    ).json();
    await (await h.client.get(id)).result();
    const r = await fetch(`${h.url}/v1/execs/${id}/events?after=0`, { headers: auth() });
    expect(r.status).toBe(410);
    const body = await r.json();
    expect(body.error.code).toBe("ELOG_TRUNCATED");
    expect(body.error.earliestSeq).toBeGreaterThan(1);
    // The client surfaces it as an error, never silently.
    const handle = await h.client.get(id);
    const reader = handle.events({ after: 0 }).getReader();
    await expect(reader.read()).rejects.toMatchObject({ code: "ELOG_TRUNCATED" });
  });
});

describe("event streams", () => {
  it("POST ?stream=1 answers the exec-wire stream itself", async () => {
    const r = await postExec(
      { command: "printf 'a\\n'; printf 'b' >&2; exit 3", encoding: "utf8" },
      "?stream=1",
    );
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toBe("application/x-ndjson");
    const events: ExecEvent[] = [];
    for await (const ev of decodeExecEvents(r.body!) as unknown as AsyncIterable<ExecEvent>)
      events.push(ev);
    const out = events
      .filter((e) => e.name === "stdout")
      .map((e) => e.value)
      .join("");
    const err = events
      .filter((e) => e.name === "stderr")
      .map((e) => e.value)
      .join("");
    expect(out).toBe("a\n");
    expect(err).toBe("b");
    expect(events.at(-1)).toMatchObject({ name: "exit", value: 3 });
    expect(events.map((e) => e.seq)).toEqual(events.map((_e, i) => i + 1));
  });

  it("SSE: id = seq, event = name, data = the exec-wire frame, then end/[DONE]; resume via Last-Event-ID", async () => {
    const { id } = await (
      await postExec({
        command: "for i in 1 2 3 4; do echo $i; sleep 0.05; done",
        encoding: "utf8",
      })
    ).json();
    await (await h.client.get(id)).result();
    const read = async (headers: Record<string, string>) => {
      const r = await fetch(`${h.url}/v1/execs/${id}/events`, {
        headers: { ...auth(), accept: "text/event-stream", ...headers },
      });
      expect(r.headers.get("content-type")).toMatch(/^text\/event-stream/);
      const text = await r.text();
      const events: SseEvent[] = [];
      const p = createSseParser({ onEvent: (e) => events.push(e) });
      p.feed(text);
      p.end();
      return { text, events };
    };
    const all = await read({});
    const logged = all.events.filter((e) => e.type !== "end");
    expect(logged.length).toBeGreaterThanOrEqual(2);
    for (const e of logged) {
      const frame = JSON.parse(e.data);
      expect(e.lastEventId).toBe(String(frame.seq));
      expect(e.type).toBe(frame.name);
    }
    expect(all.events.at(-1)).toMatchObject({ type: "end", data: "[DONE]" });
    expect(all.text).toContain(
      `id: 1\nevent: stdout\ndata: {"id":"${id}","seq":1,"name":"stdout","enc":"utf8","value":`,
    );
    const resumed = await read({ "last-event-id": "2" });
    const seqs = resumed.events.filter((e) => e.type !== "end").map((e) => JSON.parse(e.data).seq);
    expect(seqs[0]).toBe(3);
  });

  it("heartbeats carry no id (never move Last-Event-ID)", async () => {
    const hb = await startServer({ computer: { heartbeatMs: 30 } });
    try {
      const handle = await hb.client.exec("sleep 0.3; echo done", { encoding: "utf8" });
      const r = await fetch(`${hb.url}/v1/execs/${handle.id}/events`, {
        headers: { authorization: `Bearer ${hb.token}`, accept: "text/event-stream" },
      });
      const text = await r.text();
      const blocks = text.split("\n\n").filter((b) => b.includes("event: heartbeat"));
      expect(blocks.length).toBeGreaterThan(0);
      for (const b of blocks) expect(b).not.toMatch(/^id:/m);
    } finally {
      await hb.close();
    }
  });

  it("WebSocket multiplexes executions with subscribe/resume/unsubscribe", async () => {
    const a = await h.client.exec("echo alpha", { encoding: "utf8" });
    const b = await h.client.exec("echo beta; echo beta2", { encoding: "utf8" });
    await a.result();
    await b.result();
    const ws = new WebSocket(`${h.url.replace("http", "ws")}/v1/ws`, { headers: auth() });
    await new Promise((r) => ws.once("open", r));
    const frames: Record<string, unknown>[] = [];
    const done = new Promise<void>((resolve) => {
      ws.on("message", (data) => {
        for (const line of String(data).split("\n")) if (line) frames.push(JSON.parse(line));
        const exits = frames.filter((f) => f.name === "exit" || f.name === "error");
        if (exits.length === 4) resolve();
      });
    });
    ws.send(JSON.stringify({ type: "subscribe", id: a.id }));
    ws.send(JSON.stringify({ type: "resume", id: b.id, after: 1 }));
    ws.send(JSON.stringify({ type: "subscribe", id: "missing" }));
    ws.send("{bad json");
    await done;
    ws.close();
    const ofA = frames.filter((f) => f.id === a.id);
    const ofB = frames.filter((f) => f.id === b.id);
    expect(ofA.map((f) => f.name)).toEqual(["stdout", "exit"]);
    expect(ofB[0]!.seq).toBe(2);
    expect(frames.find((f) => f.id === "missing")).toMatchObject({ name: "error", code: "ENOENT" });
    expect(frames.find((f) => f.name === "error" && f.id === undefined)).toMatchObject({
      code: "EINVAL",
    });
  });

  it("WebSocket: unsubscribe and re-subscribe end the replaced subscription without an error frame", async () => {
    const run = await h.client.exec("for i in $(seq 1 40); do echo $i; sleep 0.02; done", {
      encoding: "utf8",
    });
    const ws = new WebSocket(`${h.url.replace("http", "ws")}/v1/ws`, { headers: auth() });
    await new Promise((r) => ws.once("open", r));
    const frames: Record<string, unknown>[] = [];
    const exited = new Promise<void>((resolve) => {
      ws.on("message", (data) => {
        for (const line of String(data).split("\n")) if (line) frames.push(JSON.parse(line));
        if (frames.some((f) => f.name === "exit")) resolve();
      });
    });
    // Resume positions must be seqs the client has seen (later ones are EINVAL).
    const twoFrames = () =>
      new Promise<void>((resolve) => {
        const poll = () => (frames.length >= 2 ? resolve() : setTimeout(poll, 10));
        poll();
      });
    ws.send(JSON.stringify({ type: "subscribe", id: run.id }));
    await twoFrames();
    ws.send(JSON.stringify({ type: "unsubscribe", id: run.id }));
    ws.send(JSON.stringify({ type: "subscribe", id: run.id, after: 1 }));
    ws.send(JSON.stringify({ type: "resume", id: run.id, after: 2 }));
    await exited;
    ws.close();
    expect(frames.filter((f) => f.name === "error")).toEqual([]);
  });
});

describe("operations", () => {
  it("list, get, kill, stdin, dispose", async () => {
    const handle = await h.client.exec("cat", { stdin: "pipe", encoding: "utf8" });
    await handle.write("hello ");
    await handle.write(new TextEncoder().encode("world"));
    await handle.end();
    const r = await handle.result();
    expect(r.stdout).toBe("hello world");
    expect(r.exitCode).toBe(0);
    const list = await h.client.list();
    expect(list.some((x) => x.id === handle.id)).toBe(true);
    const sleeper = await h.client.exec("sleep 30");
    await sleeper.kill("SIGKILL");
    const res = await sleeper.result();
    expect(res.status).toBe("killed");
    await h.client.dispose(handle.id);
    await expect(h.client.get(handle.id)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("stdin to a command that has exited is a 409 ECLOSED, not a server error", async () => {
    const handle = await h.client.exec("true", { stdin: "pipe" });
    await handle.result();
    const r = await fetch(`${h.url}/v1/execs/${handle.id}/stdin`, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/octet-stream" },
      body: "late",
    });
    expect(r.status).toBe(409);
    expect((await r.json()).error.code).toBe("ECLOSED");
  });

  it("/metrics is Prometheus text with our series", async () => {
    const r = await fetch(`${h.url}/metrics`, { headers: auth() });
    const text = await r.text();
    for (const name of [
      "agent_computer_executions_running",
      "agent_computer_executions_total",
      "agent_computer_bytes_streamed_total",
      "agent_computer_subscribers",
      "agent_computer_errors_total",
    ]) {
      expect(text).toContain(name);
    }
    expect(text).toMatch(/agent_computer_errors_total\{code="EINVAL"\} \d+/);
  });
});
