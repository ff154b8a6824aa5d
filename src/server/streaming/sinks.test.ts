// The two byte sinks on fake transports: the HTTP sink writes text frames as
// latin1 and several frames under one cork, reports full as res.write() does,
// and wakes drain waiters on 'drain' or 'close'; the WebSocket sink joins a
// batch into one text message, is full over its high-water mark and wakes
// waiters once sends bring bufferedAmount under half of it, or on close;
// given the TCP socket, it corks it for the rest of the turn at a send.
import { EventEmitter } from "node:events";
import type { ServerResponse } from "node:http";
import { describe, expect, it } from "vitest";
import type { WebSocket } from "ws";
import { responseSink, webSocketSink } from "./sinks.js";

class FakeResponse extends EventEmitter {
  writes: { chunk: unknown; encoding?: string }[] = [];
  corked = 0;
  uncorked = 0;
  destroyed = false;
  writableNeedDrain = false;
  /** What write() returns. */
  accept = true;
  write(chunk: unknown, encoding?: string): boolean {
    this.writes.push({ chunk, encoding });
    if (!this.accept) this.writableNeedDrain = true;
    return this.accept;
  }
  cork() {
    this.corked++;
  }
  uncork() {
    this.uncorked++;
  }
}

const settled = async (p: Promise<void>) => {
  let done = false;
  void p.then(() => {
    done = true;
  });
  await new Promise((r) => setImmediate(r));
  return done;
};

describe("responseSink", () => {
  it("writes one frame directly, text as latin1 and bytes as they are", () => {
    const res = new FakeResponse();
    const sink = responseSink(res as unknown as ServerResponse);
    expect(sink.write(["abc"], 3)).toBe(true);
    const bytes = new Uint8Array([1, 2]);
    sink.write([bytes], 2);
    expect(res.writes).toEqual([
      { chunk: "abc", encoding: "latin1" },
      { chunk: bytes, encoding: undefined },
    ]);
    expect(res.corked).toBe(0);
    sink.dispose();
  });

  it("writes several frames under one cork, in order", () => {
    const res = new FakeResponse();
    const sink = responseSink(res as unknown as ServerResponse);
    sink.write(["a", new Uint8Array([98]), "c"], 3);
    expect(res.writes.map((w) => w.chunk)).toEqual(["a", new Uint8Array([98]), "c"]);
    expect([res.corked, res.uncorked]).toEqual([1, 1]);
    sink.dispose();
  });

  it("reports full when res.write() does, and drained() waits for 'drain'", async () => {
    const res = new FakeResponse();
    const sink = responseSink(res as unknown as ServerResponse);
    expect(await settled(sink.drained())).toBe(true);
    res.accept = false;
    expect(sink.write(["x"], 1)).toBe(false);
    const waiting = sink.drained();
    expect(await settled(waiting)).toBe(false);
    res.writableNeedDrain = false;
    res.emit("drain");
    expect(await settled(waiting)).toBe(true);
    sink.dispose();
  });

  it("is closed after 'close' or once destroyed, and a close wakes drain waiters", async () => {
    const res = new FakeResponse();
    const sink = responseSink(res as unknown as ServerResponse);
    res.accept = false;
    sink.write(["x"], 1);
    const waiting = sink.drained();
    expect(sink.closed).toBe(false);
    res.emit("close");
    expect(sink.closed).toBe(true);
    expect(await settled(waiting)).toBe(true);
    expect(await settled(sink.drained())).toBe(true);
    const other = new FakeResponse();
    const sink2 = responseSink(other as unknown as ServerResponse);
    other.destroyed = true;
    expect(sink2.closed).toBe(true);
    sink.dispose();
    sink2.dispose();
  });

  it("dispose() removes its listeners", () => {
    const res = new FakeResponse();
    const sink = responseSink(res as unknown as ServerResponse);
    expect(res.listenerCount("close")).toBe(1);
    expect(res.listenerCount("drain")).toBe(1);
    sink.dispose();
    expect(res.listenerCount("close")).toBe(0);
    expect(res.listenerCount("drain")).toBe(0);
  });
});

class FakeWebSocket {
  bufferedAmount = 0;
  sent: { data: Uint8Array; binary: boolean; done: () => void }[] = [];
  send(data: Uint8Array, options: { binary: boolean }, cb: () => void) {
    this.bufferedAmount += data.length;
    this.sent.push({
      data,
      binary: options.binary,
      done: () => {
        this.bufferedAmount -= data.length;
        cb();
      },
    });
  }
}

describe("webSocketSink", () => {
  it("sends a batch as one text message with every frame's bytes in order", () => {
    const ws = new FakeWebSocket();
    const sink = webSocketSink(ws as unknown as WebSocket, 1000);
    sink.write(["ab", new Uint8Array([99, 100]), "é"], 5);
    expect(ws.sent).toHaveLength(1);
    expect(ws.sent[0]!.binary).toBe(false);
    // Text frames are written as latin1 (one byte per character).
    expect([...ws.sent[0]!.data]).toEqual([97, 98, 99, 100, 0xe9]);
  });

  it("sends a single byte frame as it is, without a copy", () => {
    const ws = new FakeWebSocket();
    const sink = webSocketSink(ws as unknown as WebSocket, 1000);
    const frame = new Uint8Array([1, 2, 3]);
    sink.write([frame], 3);
    expect(ws.sent[0]!.data).toBe(frame);
  });

  it("is full at the high-water mark and wakes waiters once sends bring it under half", async () => {
    const ws = new FakeWebSocket();
    const sink = webSocketSink(ws as unknown as WebSocket, 100);
    expect(sink.write(["x".repeat(60)], 60)).toBe(true);
    expect(sink.write(["y".repeat(60)], 60)).toBe(false);
    const waiting = sink.drained();
    expect(await settled(waiting)).toBe(false);
    ws.sent[0]!.done(); // 60 buffered: under the mark, not under half
    expect(await settled(waiting)).toBe(false);
    ws.sent[1]!.done(); // 0 buffered
    expect(await settled(waiting)).toBe(true);
    expect(await settled(sink.drained())).toBe(true);
  });

  it("with the TCP socket, sends of one turn leave in one write: corked at the first, uncorked in the next check phase", async () => {
    const ws = new FakeWebSocket();
    const log: string[] = [];
    const socket = { cork: () => log.push("cork"), uncork: () => log.push("uncork") };
    const sink = webSocketSink(ws as unknown as WebSocket, 1000, false, socket);
    sink.write(["a"], 1);
    sink.write(["b"], 1);
    sink.write(["c"], 1);
    expect(ws.sent).toHaveLength(3);
    expect(log).toEqual(["cork"]);
    await new Promise((r) => setImmediate(r));
    expect(log).toEqual(["cork", "uncork"]);
    sink.write(["d"], 1);
    expect(log).toEqual(["cork", "uncork", "cork"]);
    await new Promise((r) => setImmediate(r));
    expect(log).toEqual(["cork", "uncork", "cork", "uncork"]);
  });

  it("wakes waiters and reports closed once close() is called", async () => {
    const ws = new FakeWebSocket();
    const sink = webSocketSink(ws as unknown as WebSocket, 10);
    sink.write(["x".repeat(20)], 20);
    const waiting = sink.drained();
    expect(sink.closed).toBe(false);
    sink.close();
    expect(sink.closed).toBe(true);
    expect(await settled(waiting)).toBe(true);
    expect(await settled(sink.drained())).toBe(true);
  });
});
