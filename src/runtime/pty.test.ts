// PtyChild on a real pseudo-terminal: what the command wrote before it exited
// is delivered even when nobody was reading at that moment (a paused reader,
// or an event loop busy past node-pty's own 200 ms close timer).
import { describe, expect, it } from "vitest";
import { PtyChild } from "./pty.js";

describe("PtyChild", () => {
  it("delivers the output written before the exit even when it was paused then", async () => {
    const child = new PtyChild("/bin/sh", ["-c", "printf 'x%.0s' $(seq 1 3000); echo; echo END"], {
      cwd: "/",
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      size: { cols: 80, rows: 24 },
    });
    const chunks: Buffer[] = [];
    child.stdout.on("data", (d: Buffer) => chunks.push(d));
    // A reader that fell behind: nothing is read while the command runs and exits.
    child.stdout.pause();
    const exited = new Promise<unknown[]>((r) => child.once("exit", (...a) => r(a)));
    await new Promise((r) => setTimeout(r, 800));
    child.stdout.resume();
    expect(await exited).toEqual([0, null]);
    const text = Buffer.concat(chunks).toString("latin1");
    expect(text.match(/x/g)?.length).toBe(3000);
    expect(text).toMatch(/END\r\n$/);
  });
});
