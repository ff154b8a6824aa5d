// writeOut on a fake stream: nothing to wait for while the stream takes
// data; when it is full, a promise that settles on 'drain' (or 'error', so a
// closed pipe cannot hang the CLI) and leaves no listener behind.
import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { writeOut } from "./output.js";

class FakeStream extends EventEmitter {
  written: unknown[] = [];
  full = false;
  write(chunk: unknown): boolean {
    this.written.push(chunk);
    return !this.full;
  }
}

const asStream = (s: FakeStream) => s as unknown as NodeJS.WriteStream;

describe("writeOut", () => {
  it("writes the chunk as given and returns nothing to wait for while the stream takes data", () => {
    const s = new FakeStream();
    const bytes = new Uint8Array([0, 255]);
    expect(writeOut(asStream(s), bytes)).toBeUndefined();
    expect(writeOut(asStream(s), "text")).toBeUndefined();
    expect(s.written).toEqual([bytes, "text"]);
  });

  it("waits for 'drain' when the stream is full, then removes its listeners", async () => {
    const s = new FakeStream();
    s.full = true;
    const wait = writeOut(asStream(s), "x");
    expect(wait).toBeInstanceOf(Promise);
    let done = false;
    void wait!.then(() => {
      done = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false);
    s.emit("drain");
    await wait;
    expect(s.listenerCount("drain")).toBe(0);
    expect(s.listenerCount("error")).toBe(0);
  });

  it("stops waiting when the stream fails", async () => {
    const s = new FakeStream();
    s.full = true;
    const wait = writeOut(asStream(s), "x");
    s.emit("error", new Error("EPIPE"));
    await expect(wait).resolves.toBeUndefined();
    expect(s.listenerCount("drain")).toBe(0);
    expect(s.listenerCount("error")).toBe(0);
  });
});
