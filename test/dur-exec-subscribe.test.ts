// The SDK's exec() + events() cannot lose output between the two calls: exec()
// starts and subscribes in one request, so even a log that retains little (a
// 16 MiB ring without disk spill, as SQLite and Redis are) keeps everything
// until the first events() call reads it. And a handle used only for
// result() does not hold the command back.
import { afterEach, describe, expect, it } from "vitest";
import type { ExecEvent } from "../src/wire/types.js";
import { type Harness, startServer } from "./support/server-harness.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const SIZE = 40 * 1000 * 1000;

describe("exec() then events()", () => {
  it("loses nothing when events() comes late and the command wrote more than the log keeps", async () => {
    h = await startServer({ computer: { spill: { spillMaxBytes: 0 } } });
    const run = await h.client.exec(`head -c ${SIZE} /dev/zero`);
    // The command could write all of it (40 MB > the 16 MiB ring) before we look.
    await new Promise((r) => setTimeout(r, 1500));
    let bytes = 0;
    let first: number | undefined;
    let exit: ExecEvent | undefined;
    for await (const ev of run.events() as unknown as AsyncIterable<ExecEvent<Uint8Array>>) {
      if (ev.name === "heartbeat") continue;
      first ??= ev.seq;
      if (ev.name === "stdout") bytes += ev.value.byteLength;
      if (ev.name === "exit") exit = ev;
    }
    expect(first).toBe(1);
    expect(bytes).toBe(SIZE);
    expect(exit?.name === "exit" && exit.value).toBe(0);
  }, 60_000);

  it("result() alone does not wait for an unread stream", async () => {
    // A stall cut far beyond the test's timeout: if the stream opened by
    // exec() still held the command back, result() could only come after
    // the cut, and the test would time out.
    h = await startServer({ computer: { spill: { spillMaxBytes: 0 }, stallMs: 3_600_000 } });
    const run = await h.client.exec(`head -c ${SIZE} /dev/zero`);
    const res = await run.result();
    expect(res.exitCode).toBe(0);
    expect(res.status).toBe("exited");
  }, 90_000);

  it("events({ after }) from elsewhere releases the opened stream and reads from there", async () => {
    h = await startServer();
    const run = await h.client.exec("printf 'a\\nb\\n'; sleep 0.2; printf 'c\\n'");
    await run.result();
    const seqs: number[] = [];
    for await (const ev of run.events({ after: 1 }) as unknown as AsyncIterable<ExecEvent>) {
      if (ev.name !== "heartbeat") seqs.push(ev.seq);
    }
    expect(seqs[0]).toBe(2);
  }, 30_000);
});
