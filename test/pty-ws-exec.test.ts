// Starting executions over the WebSocket ("exec" messages, docs/api.md): a pty
// shell started, typed into, resized and ended on one socket with a real
// server and the `ws` client, every output byte from seq 1 on; validation
// shared with POST /v1/execs (same EINVAL messages), and errors as error frames
// carrying the message's id.

import { mkdirSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type Harness, startServer } from "./support/server-harness.js";

let h: Harness;
beforeAll(async () => {
  h = await startServer({ computer: { killGraceMs: 1000 } });
});
afterAll(async () => {
  await h?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Frame {
  id?: string;
  seq?: number;
  name: string;
  enc?: string;
  value?: unknown;
  code?: string;
  message?: string;
}

/** An open socket whose exec-wire lines are decoded into `frames`. */
async function socket() {
  const ws = new WebSocket(`${h.url.replace("http", "ws")}/v1/ws`, {
    headers: { authorization: `Bearer ${h.token}` },
  });
  await new Promise((r, j) => {
    ws.once("open", r);
    ws.once("error", j);
  });
  const frames: Frame[] = [];
  ws.on("message", (d) => {
    for (const line of String(d).split("\n")) if (line) frames.push(JSON.parse(line));
  });
  const send = (m: Record<string, unknown>) => ws.send(JSON.stringify(m));
  /** The stdout text of execution `id` so far (utf8 or b64 frames). */
  const text = (id: string) =>
    frames
      .filter((f) => f.id === id && f.name === "stdout")
      .map((f) =>
        f.enc === "b64" ? Buffer.from(String(f.value), "base64").toString() : String(f.value),
      )
      .join("");
  const until = async (cond: () => boolean, what: string, ms = 10_000) => {
    const end = Date.now() + ms;
    while (!cond()) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await sleep(20);
    }
  };
  return { ws, frames, send, text, until };
}

describe("exec over the WebSocket", () => {
  it("starts a pty shell, takes stdin and resize, streams from seq 1 to exit", async () => {
    const s = await socket();
    const id = `ws-pty-${process.pid}`;
    s.send({
      type: "exec",
      id,
      argv: ["bash", "--norc", "--noprofile", "-i"],
      env: { PS1: "$ " },
      pty: { cols: 83, rows: 27 },
      heartbeats: false,
    });
    // Sent right after the exec message, before any output: queued behind the start.
    for (const ch of "stty size; tty\r") s.send({ type: "stdin", id, data: ch });
    await s.until(() => /27 83/.test(s.text(id)), "stty size 27 83");
    expect(s.text(id)).toMatch(/\/dev\/pts\/\d+/);
    s.send({ type: "resize", id, cols: 101, rows: 33 });
    s.send({ type: "stdin", id, data: "stty size\r" });
    await s.until(() => /33 101/.test(s.text(id)), "stty size 33 101");
    s.send({ type: "stdin", id, data: "exit 7\r" });
    await s.until(() => s.frames.some((f) => f.id === id && f.name === "exit"), "exit");
    // The start is acknowledged by a `started` extension frame (no seq).
    expect(s.frames.filter((f) => f.id === id && f.name === "started")).toHaveLength(1);
    const mine = s.frames.filter((f) => f.id === id && f.name !== "started");
    expect(mine.at(-1)).toMatchObject({ name: "exit", value: 7 });
    // Gap-free from seq 1: nothing was lost between the start and the subscription.
    expect(mine.map((f) => f.seq)).toEqual(mine.map((_, i) => i + 1));
    expect(mine.some((f) => f.name === "heartbeat")).toBe(false);
    // The same execution over HTTP: a pty of the last size.
    const info = (await (
      await fetch(`${h.url}/v1/execs/${id}`, { headers: { authorization: `Bearer ${h.token}` } })
    ).json()) as { pty?: unknown };
    expect(info.pty).toMatchObject({ cols: 101, rows: 33 });
    s.ws.close();
  });

  it("starts a plain command with the POST /v1/execs fields (cwd, env, stdin, encoding)", async () => {
    const s = await socket();
    const id = `ws-plain-${process.pid}`;
    mkdirSync(path.join(h.workspace, "wsdir"));
    s.send({
      type: "exec",
      id,
      command: 'pwd; echo "$FOO"; cat',
      cwd: "wsdir",
      env: { FOO: "bar" },
      stdin: "from-stdin\n",
      encoding: "b64",
    });
    await s.until(() => s.frames.some((f) => f.id === id && f.name === "exit"), "exit");
    expect(s.text(id)).toBe(`${path.join(h.workspace, "wsdir")}\nbar\nfrom-stdin\n`);
    expect(s.frames.filter((f) => f.name === "stdout").every((f) => f.enc === "b64")).toBe(true);
    s.ws.close();
  });

  it("validates like POST /v1/execs; errors are frames with the id; the socket lives on", async () => {
    const s = await socket();
    const bad = [
      { type: "exec", id: "e1" }, // neither command nor argv
      { type: "exec", id: "e2", command: "true", pty: { cols: 0, rows: 10 } },
      { type: "exec", id: "e3", command: "true", after: 0 }, // not an exec field
      { type: "exec", id: "e4", command: "true", heartbeats: "yes" },
      { type: "exec", id: "bad id!", command: "true" },
      { type: "subscribe", id: "e5", command: "true" }, // exec fields on another type
    ];
    for (const m of bad) s.send(m);
    await s.until(() => s.frames.filter((f) => f.name === "error").length === bad.length, "errors");
    const errors = s.frames.filter((f) => f.name === "error");
    expect(errors.map((f) => [f.id, f.code])).toEqual(bad.map((m) => [m.id, "EINVAL"]));
    // The same message as the HTTP route gives.
    const res = await fetch(`${h.url}/v1/execs`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.token}`, "content-type": "application/json" },
      body: JSON.stringify({ command: "true", pty: { cols: 0, rows: 10 } }),
    });
    const body = (await res.json()) as { error: { message: string } };
    expect(errors[1]!.message).toBe(body.error.message);

    // A start failure (the id is busy) is an error frame too; the socket still works.
    const id = `ws-busy-${process.pid}`;
    s.send({ type: "exec", id, command: "sleep 30" });
    await sleep(200);
    s.send({ type: "exec", id, command: "true" });
    await s.until(() => s.frames.some((f) => f.id === id && f.code === "EEXEC_BUSY"), "busy");
    await fetch(`${h.url}/v1/execs/${id}/kill`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.token}` },
    });
    const ok = `ws-ok-${process.pid}`;
    s.send({ type: "exec", id: ok, command: "echo still-open" });
    await s.until(() => /still-open/.test(s.text(ok)), "still-open");
    s.ws.close();
  });
});
