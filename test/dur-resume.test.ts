// A client cut off while a command writes fast resumes losslessly: the 25 MB
// an unpaced `cat` writes while the client is away is more than the memory
// ring holds (16 MiB), so it must come back from the disk spill, byte-exact,
// without ELOG_TRUNCATED. Real server, real sockets, the SDK's resume.
import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ExecEvent } from "../src/wire/types.js";
import { type Harness, startServer } from "./support/server-harness.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe("resume after a cut while the command writes fast", () => {
  it("gets every byte of an unpaced 25 MB cat back after a short cut", async () => {
    h = await startServer();
    const data = randomBytes(25 * 1000 * 1000);
    await writeFile(path.join(h.workspace, "big"), data);
    const run = await h.client.exec("cat big");
    const parts: Buffer[] = [];
    let after = 0;
    // Read a little, then the connection is cut (the client goes away).
    const cut = new AbortController();
    const first = run.events({ signal: cut.signal }).getReader();
    while (after < 3) {
      const { value } = await first.read();
      const ev = value as ExecEvent<Uint8Array>;
      if (ev.name === "stdout") parts.push(Buffer.from(ev.value));
      if (ev.name !== "heartbeat") after = ev.seq;
    }
    cut.abort();
    await first.cancel().catch(() => {});
    // The command finishes unpaced while nobody reads.
    const res = await run.result();
    expect(res.exitCode).toBe(0);
    // Resume from the last seq seen: everything comes back.
    let exit: ExecEvent | undefined;
    for await (const ev of run.events({ after }) as unknown as AsyncIterable<
      ExecEvent<Uint8Array>
    >) {
      if (ev.name === "stdout") parts.push(Buffer.from(ev.value));
      if (ev.name === "exit") exit = ev;
    }
    expect(exit?.name).toBe("exit");
    const got = Buffer.concat(parts);
    expect(got.length).toBe(data.length);
    expect(got.equals(data)).toBe(true);
  }, 60_000);
});
