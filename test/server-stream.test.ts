// 100 MiB of random bytes from a real command (`cat`), byte-exact (SHA-256)
// through a real socket over each transport: exec-wire over HTTP (the client
// SDK), SSE (our parser, frames decoded independently) and WebSocket (the `ws`
// client, messages fed to the exec-wire decoder). One test per transport,
// sized for a 2-core machine.
//
// The command waits for one byte on stdin before it writes, and the test sends
// it only once subscribed, so the stream is live from the first byte and the
// log's ring never has to hold more than the subscriber lags behind.
// Then backpressure: a reader that stops reading (WebSocket or HTTP) must hold
// the command back, not make the server buffer its output. Last, text output
// with non-ASCII characters over every transport (frames mix latin1 text and
// UTF-8 bytes).

import { createHash, randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { ExecWireDecoder } from "../src/wire/exec-wire/index.js";
import { createSseParser } from "../src/wire/sse.js";
import type { ExecEvent } from "../src/wire/types.js";
import { type Harness, startServer } from "./support/server-harness.js";

const SIZE = 100 * 1024 * 1024;
const GATED = "head -c 1 >/dev/null; cat big.bin";

let h: Harness;
let expected: string;

beforeAll(async () => {
  h = await startServer();
  const data = randomBytes(SIZE);
  expected = createHash("sha256").update(data).digest("hex");
  await writeFile(path.join(h.workspace, "big.bin"), data);
}, 120_000);
afterAll(async () => {
  await h?.close();
});

/** Checks seq continuity and hashes stdout, from events in order. */
class Checker {
  hash = createHash("sha256");
  bytes = 0;
  nextSeq = 1;
  exit: ExecEvent | undefined;
  push(ev: ExecEvent): void {
    if (ev.name === "heartbeat") return;
    expect(ev.seq).toBe(this.nextSeq);
    this.nextSeq++;
    if (ev.name === "stdout") {
      const v = ev.value as Uint8Array;
      this.hash.update(v);
      this.bytes += v.length;
    } else if (ev.name === "exit") {
      this.exit = ev;
    }
  }
  done(): void {
    expect(this.exit).toMatchObject({ name: "exit", value: 0 });
    expect(this.bytes).toBe(SIZE);
    expect(this.hash.digest("hex")).toBe(expected);
  }
}

describe("100 MiB byte-exact", () => {
  it("over exec-wire (HTTP, client SDK)", async () => {
    const handle = await h.client.exec(GATED, { stdin: "pipe" });
    const reader = handle.events().getReader();
    const first = reader.read(); // subscribe before the command may write
    await new Promise((r) => setTimeout(r, 100));
    await handle.write("g");
    await handle.end();
    const check = new Checker();
    let r = await first;
    while (!r.done) {
      check.push(r.value);
      r = await reader.read();
    }
    check.done();
  });

  it("over SSE", async () => {
    const start = await fetch(`${h.url}/v1/execs`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.token}`, "content-type": "application/json" },
      body: JSON.stringify({ command: GATED, stdin: { pipe: true } }),
    });
    const { id } = await start.json();
    const res = await fetch(`${h.url}/v1/execs/${id}/events`, {
      headers: { authorization: `Bearer ${h.token}`, accept: "text/event-stream" },
    });
    expect(res.headers.get("content-type")).toMatch(/text\/event-stream/);
    await (await h.client.get(id)).write("g");
    const check = new Checker();
    let ended = false;
    const parser = createSseParser({
      onEvent(e) {
        if (e.type === "end") {
          ended = true;
          return;
        }
        const frame = JSON.parse(e.data);
        expect(e.lastEventId).toBe(String(frame.seq));
        if (frame.name === "stdout") frame.value = Buffer.from(frame.value, "base64");
        check.push(frame);
      },
    });
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) parser.feed(chunk);
    parser.end();
    expect(ended).toBe(true);
    check.done();
  });

  it("over WebSocket", async () => {
    const handle = await h.client.exec(GATED, { stdin: "pipe" });
    const ws = new WebSocket(`${h.url.replace("http", "ws")}/v1/ws`, {
      headers: { authorization: `Bearer ${h.token}` },
    });
    await new Promise((r, j) => {
      ws.once("open", r);
      ws.once("error", j);
    });
    const check = new Checker();
    const decoder = new ExecWireDecoder();
    const done = new Promise<void>((resolve, reject) => {
      ws.on("message", (data: Buffer) => {
        try {
          for (const ev of decoder.push(data)) {
            check.push(ev);
            if (ev.name === "exit") resolve();
          }
        } catch (err) {
          reject(err);
        }
      });
      ws.on("close", () => reject(new Error("socket closed before exit")));
    });
    ws.send(JSON.stringify({ type: "subscribe", id: handle.id }));
    await new Promise((r) => setTimeout(r, 100));
    await handle.write("g");
    await handle.end();
    await done;
    ws.close();
    check.done();
  });
});

describe("backpressure", () => {
  it("a WebSocket client that stops reading holds the command back instead of growing the server", async () => {
    const handle = await h.client.exec("head -c 1 >/dev/null; head -c 67108864 /dev/zero", {
      stdin: "pipe",
    });
    const ws = new WebSocket(`${h.url.replace("http", "ws")}/v1/ws`, {
      headers: { authorization: `Bearer ${h.token}` },
    });
    await new Promise((r) => ws.once("open", r));
    const decoder = new ExecWireDecoder();
    let bytes = 0;
    const done = new Promise<ExecEvent>((resolve) => {
      ws.on("message", (data: Buffer) => {
        for (const ev of decoder.push(data)) {
          if (ev.name === "stdout") bytes += (ev.value as Uint8Array).length;
          if (ev.name === "exit") resolve(ev);
        }
      });
    });
    ws.send(JSON.stringify({ type: "subscribe", id: handle.id, heartbeats: false }));
    // Stop reading the socket: the kernel buffers fill, then the server's
    // bufferedAmount passes its mark and the pump stops pulling the log.
    const raw = (ws as unknown as { _socket: import("node:net").Socket })._socket;
    raw.pause();
    await handle.write("g");
    await handle.end();
    await new Promise((r) => setTimeout(r, 1500));
    // 64 MiB of /dev/zero takes well under a second unthrottled; held back, it cannot finish.
    const info = await handle.info();
    expect(info.state).toBe("running");
    raw.resume();
    expect(await done).toMatchObject({ name: "exit", value: 0 });
    expect(bytes).toBe(67108864);
    ws.close();
  });
  it("an HTTP client that stops reading holds the command back too", async () => {
    const { request } = await import("node:http");
    const handle = await h.client.exec("head -c 1 >/dev/null; head -c 67108864 /dev/zero", {
      stdin: "pipe",
    });
    const u = new URL(h.url);
    const res = await new Promise<import("node:http").IncomingMessage>((resolve, reject) => {
      const req = request(
        {
          host: u.hostname,
          port: u.port,
          path: `/v1/execs/${handle.id}/events?heartbeats=0`,
          headers: { authorization: `Bearer ${h.token}` },
        },
        resolve,
      );
      req.on("error", reject);
      req.end();
    });
    res.pause();
    await handle.write("g");
    await handle.end();
    await new Promise((r) => setTimeout(r, 1500));
    expect((await handle.info()).state).toBe("running");
    const decoder = new ExecWireDecoder();
    let bytes = 0;
    let exit: ExecEvent | undefined;
    for await (const chunk of res as AsyncIterable<Buffer>) {
      for (const ev of decoder.push(chunk)) {
        if (ev.name === "stdout") bytes += (ev.value as Uint8Array).length;
        if (ev.name === "exit") exit = ev;
      }
    }
    expect(exit).toMatchObject({ name: "exit", value: 0 });
    expect(bytes).toBe(67108864);
  });
});

describe("text output (encoding utf8) with non-ASCII characters", () => {
  // The server writes ASCII frames as latin1 and hands others over as UTF-8
  // bytes (src/server/streaming/encode-cache.ts); a batch can mix both. Every
  // transport must deliver exactly the text the command wrote.
  const script =
    // Paced so that ASCII-only and non-ASCII output become separate events.
    "for i in 1 2 3 4 5 6 7 8 9 10; do printf 'plain %s\\n' $i; sleep 0.01; printf 'héllo ✓ 日本 😀 %s\\n' $i; sleep 0.01; done";
  const expectedText = Array.from(
    { length: 10 },
    (_v, i) => `plain ${i + 1}\nhéllo ✓ 日本 😀 ${i + 1}\n`,
  ).join("");

  it("arrives intact over exec-wire (SDK), SSE and WebSocket", async () => {
    const handle = await h.client.exec(script, { encoding: "utf8" });
    const sdk = (await handle.result()).stdout;
    expect(sdk).toBe(expectedText);

    const res = await fetch(`${h.url}/v1/execs/${handle.id}/events?after=0`, {
      headers: { authorization: `Bearer ${h.token}`, accept: "text/event-stream" },
    });
    let sse = "";
    const parser = createSseParser({
      onEvent(e) {
        if (e.type === "stdout") sse += JSON.parse(e.data).value;
      },
    });
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) parser.feed(chunk);
    parser.end();
    expect(sse).toBe(expectedText);

    const ws = new WebSocket(`${h.url.replace("http", "ws")}/v1/ws`, {
      headers: { authorization: `Bearer ${h.token}` },
    });
    const decoder = new ExecWireDecoder();
    let viaWs = "";
    await new Promise<void>((resolve, reject) => {
      ws.once("error", reject);
      ws.once("open", () =>
        ws.send(JSON.stringify({ type: "subscribe", id: handle.id, after: 0 })),
      );
      ws.on("message", (data: Buffer) => {
        for (const ev of decoder.push(data)) {
          if (ev.name === "stdout") viaWs += ev.value as string;
          if (ev.name === "exit") resolve();
        }
      });
    });
    ws.close();
    expect(viaWs).toBe(expectedText);
  });
});
