// The multiplexed WebSocket (/v1/ws) on a real server: unsubscribe is
// acknowledged with an `unsubscribed` frame, never an error frame, and counts
// no error; one subscription's error frame does not break the decoding of
// another's when the client decodes as docs/api.md says (per-id decoders).

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { ExecWireDecoder } from "../src/wire/exec-wire/index.js";
import { type Harness, startServer } from "./support/server-harness.js";

let h: Harness;
beforeAll(async () => {
  h = await startServer();
});
afterAll(async () => {
  await h?.close();
});

async function errorCount(): Promise<number> {
  const text = await (
    await fetch(`${h.url}/metrics`, { headers: { authorization: `Bearer ${h.token}` } })
  ).text();
  let n = 0;
  for (const m of text.matchAll(/^agent_computer_errors_total\{[^}]*\} (\d+)/gm)) n += Number(m[1]);
  return n;
}

describe("/v1/ws", () => {
  it("unsubscribe is acknowledged without an error frame; another subscription's error breaks nothing", async () => {
    const slow = await h.client.exec({
      command: "for i in 1 2 3 4 5 6 7 8; do echo $i; sleep 0.1; done",
    });
    const quick = await h.client.exec({ command: "echo one; echo two" });
    const ws = new WebSocket(`${h.url.replace("http", "ws")}/v1/ws`, {
      headers: { authorization: `Bearer ${h.token}` },
    });
    await new Promise((r) => ws.once("open", r));
    const errorsBefore = await errorCount();
    const raw: Array<Record<string, unknown>> = [];
    const decoders = new Map<string, ExecWireDecoder>();
    const decoded = new Map<string, string[]>();
    const failed = new Map<string, string>();
    let quickExit!: () => void;
    const quickDone = new Promise<void>((r) => {
      quickExit = r;
    });
    ws.on("message", (data) => {
      for (const line of String(data).split("\n")) {
        if (line === "") continue;
        const f = JSON.parse(line) as Record<string, unknown>;
        raw.push(f);
        const id = f.id as string | undefined;
        const d = id === undefined ? undefined : decoders.get(id);
        if (!d) continue;
        try {
          for (const ev of d.push(Buffer.from(`${line}\n`))) {
            decoded.get(id!)!.push(ev.name);
            if (id === quick.id && ev.name === "exit") quickExit();
          }
        } catch (err) {
          failed.set(id!, (err as { code: string }).code);
        }
      }
    });
    for (const id of [slow.id, quick.id, "no-such-exec"]) {
      decoders.set(id, new ExecWireDecoder());
      decoded.set(id, []);
    }
    ws.send(JSON.stringify({ type: "subscribe", id: "no-such-exec", after: 0 }));
    ws.send(JSON.stringify({ type: "subscribe", id: slow.id, after: 0 }));
    await new Promise((r) => setTimeout(r, 250));
    ws.send(JSON.stringify({ type: "unsubscribe", id: slow.id }));
    ws.send(JSON.stringify({ type: "subscribe", id: quick.id, after: 0 }));
    await quickDone;
    await new Promise((r) => setTimeout(r, 200));
    ws.close();

    // The failed subscription ended on its own...
    expect(failed.get("no-such-exec")).toBe("ENOENT");
    // ...the other one decoded to its exit...
    expect(decoded.get(quick.id)![0]).toBe("stdout");
    expect(decoded.get(quick.id)!.at(-1)).toBe("exit");
    // ...and the unsubscribe got its acknowledgement, no error frame.
    expect(raw).toContainEqual({ id: slow.id, name: "unsubscribed" });
    expect(raw.filter((f) => f.id === slow.id && f.name === "error")).toEqual([]);
    expect(failed.has(slow.id)).toBe(false);
    // Only the ENOENT counted as an error.
    expect((await errorCount()) - errorsBefore).toBe(1);
  });
});
