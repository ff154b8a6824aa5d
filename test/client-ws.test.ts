// The SDK's websocket transport (`transport: "websocket"`) against a real
// server over real sockets:
// - several executions followed on ONE socket (upgrades counted on the
//   server), each complete and gap-free; a second follower of the same
//   execution gets its own socket and the same events;
// - the server destroys the socket mid-stream, again and again, during a
//   50 MiB paced output: the SDK reconnects and resumes every time, and the
//   output is byte-exact (SHA-256) with seqs 1..n, nothing lost or repeated;
// - binary records and text frames give identical events (and the same as
//   HTTP), the subprotocol is negotiated only when asked for, and a raw `ws`
//   client sees binary messages only when it offers the subprotocol;
// - errors keep their codes (EEXEC_BUSY, EINVAL, ENOENT, EUNAUTHORIZED) and
//   the socket lives on; a tail of a finished execution ends at once.

import { createHash } from "node:crypto";
import type { Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { ComputerClient } from "../src/client/client.js";
import type { ExecEvent } from "../src/wire/types.js";
import { BINARY_SUBPROTOCOL, decodeBinaryMessage } from "../src/wire/ws-binary.js";
import {
  PACED_STREAM_COMMAND,
  RESUME_STREAM_BYTES,
  startResumeFixture,
} from "./support/resume-fixture.js";
import type { Harness } from "./support/server-harness.js";

let h: Harness;
let expectedSha: string;
/** Every WebSocket upgrade the server received: its offered subprotocols and its socket. */
const upgrades: { protocol: string | undefined; socket: Socket }[] = [];

beforeAll(async () => {
  ({ h, expectedSha256: expectedSha } = await startResumeFixture());
  h.server.httpServer.on("upgrade", (req, socket: Socket) => {
    const p = req.headers["sec-websocket-protocol"];
    upgrades.push({ protocol: typeof p === "string" ? p : undefined, socket });
  });
}, 120_000);
afterAll(async () => {
  await h?.close();
});

const wsClient = (binary = true, token = h.token) =>
  new ComputerClient({ url: h.url, token, transport: "websocket", binary });

async function readAll<V extends ExecEvent>(stream: ReadableStream<V>): Promise<V[]> {
  const out: V[] = [];
  const reader = stream.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return out;
    out.push(value);
  }
}

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/**
 * Events as comparable plain data (bytes as their SHA-256: deep equality of
 * megabytes would block the event loop the in-process server needs).
 */
const plain = (events: ExecEvent[]) =>
  events.map((e) => ({
    ...e,
    id: "x",
    value: e.value instanceof Uint8Array ? `bytes:${e.value.length}:${sha(e.value)}` : e.value,
  }));

describe.each([true, false])("SDK over WebSocket (binary: %s)", (binary) => {
  it("follows several executions on one socket, each complete and gap-free", async () => {
    const c = wsClient(binary);
    const before = upgrades.length;
    const handles = await Promise.all(
      [0, 1, 2, 3].map((i) =>
        c.exec(`for j in $(seq 1 40); do echo ${i}-$j; sleep 0.002; done; exit ${i}`),
      ),
    );
    const all = await Promise.all(handles.map((x) => readAll(x.events({ heartbeats: false }))));
    all.forEach((events, i) => {
      expect(events.map((e) => e.seq)).toEqual(events.map((_, k) => k + 1));
      const text = events
        .filter((e) => e.name === "stdout")
        .map((e) => Buffer.from(e.value as Uint8Array).toString())
        .join("");
      expect(text).toBe(Array.from({ length: 40 }, (_, k) => `${i}-${k + 1}\n`).join(""));
      expect(events.at(-1)).toMatchObject({ name: "exit", value: i });
    });
    // A second follower of a finished one, and a tail that ends at once.
    const again = await readAll((await c.get(handles[2]!.id)).events({ heartbeats: false }));
    expect(plain(again)).toEqual(plain(all[2]!));
    const tail = await readAll((await c.get(handles[1]!.id)).events({ after: "tail" }));
    expect(tail).toEqual([]);
    expect(upgrades.length - before).toBe(1);
    expect(upgrades.at(-1)!.protocol).toBe(binary ? BINARY_SUBPROTOCOL : undefined);
    await c.close();
  });

  it("two followers of one running execution on one client both get every event", async () => {
    const c = wsClient(binary);
    const x = await c.exec("for j in $(seq 1 30); do echo $j; sleep 0.005; done");
    const other = await c.get(x.id);
    const [a, b] = await Promise.all([
      readAll(x.events({ heartbeats: false })),
      readAll(other.events({ heartbeats: false })),
    ]);
    expect(a.at(-1)?.name).toBe("exit");
    expect(plain(a)).toEqual(plain(b));
    await c.close();
  });

  it("the server destroys the socket mid-stream 4 times: the SDK resumes, nothing lost or repeated", async () => {
    const c = wsClient(binary);
    const before = upgrades.length;
    const handle = await c.exec(PACED_STREAM_COMMAND, { stdin: "pipe" });
    const reader = handle.events({ heartbeats: false }).getReader();
    await handle.write("g");
    const hash = createHash("sha256");
    const seqs: number[] = [];
    let bytes = 0;
    let kills = 0;
    let exits = 0;
    for (;;) {
      const { value: ev, done } = await reader.read();
      if (done) break;
      seqs.push(ev.seq);
      if (ev.name === "stdout") {
        hash.update(ev.value as Uint8Array);
        bytes += ev.value.length;
        // Every ~10 MiB, the server side cuts every WebSocket it holds.
        if (bytes > (kills + 1) * 10 * 1024 * 1024 && kills < 4) {
          kills++;
          for (const u of upgrades.slice(before)) u.socket.destroy();
        }
      } else if (ev.name === "exit") exits++;
    }
    expect(kills).toBe(4);
    expect(upgrades.length - before).toBeGreaterThanOrEqual(5); // reconnected after each cut
    expect(bytes).toBe(RESUME_STREAM_BYTES);
    expect(hash.digest("hex")).toBe(expectedSha);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    expect(exits).toBe(1);
    await c.close();
  }, 120_000);

  it("output nobody reads pauses the socket; result() releases it and the socket carries on", async () => {
    const c = wsClient(binary);
    const before = upgrades.length;
    // 24 MiB arrive unread (over the 8 MiB mark: the socket pauses, the command waits).
    const unread = await c.exec("head -c 25165824 /dev/zero");
    await new Promise((r) => setTimeout(r, 500));
    const r = await unread.result(); // releases the unread subscription
    expect((r.stdout as Uint8Array).length + (r.truncated ? 1 : 0)).toBeGreaterThan(0);
    const next = await readAll((await c.exec("printf after")).events({ heartbeats: false }));
    expect(Buffer.from(next[0]!.value as Uint8Array).toString()).toBe("after");
    expect(upgrades.length - before).toBe(1);
    await c.close();
  });

  it("errors keep their codes and the socket lives on", async () => {
    const c = wsClient(binary);
    const before = upgrades.length;
    await expect(c.exec("true", { cwd: "../outside" })).rejects.toMatchObject({ code: "EINVAL" });
    const gone = await c.exec("true");
    await gone.result();
    const late = await c.get(gone.id);
    await c.dispose(gone.id);
    await expect(readAll(late.events())).rejects.toMatchObject({ code: "ENOENT" });
    const ok = await (await c.exec("printf fine")).result();
    expect(Buffer.from(ok.stdout as Uint8Array).toString()).toBe("fine");
    expect(upgrades.length - before).toBe(1);
    await c.close();
    // A running id: EEXEC_BUSY (from another client: this one would give the
    // duplicate its own socket, as the id is subscribed on the first).
    const other = wsClient(binary);
    const running = await other.exec("sleep 5", { id: `busy-${binary}` });
    await expect(wsClient(binary).exec("true", { id: `busy-${binary}` })).rejects.toMatchObject({
      code: "EEXEC_BUSY",
    });
    await running.kill("SIGKILL");
    await other.close();
    const wrong = wsClient(binary, "wrong-token");
    await expect(wrong.exec("true")).rejects.toMatchObject({ code: "EUNAUTHORIZED" });
    await wrong.close();
  });
});

describe("binary and text WebSocket output", () => {
  const cmd = "head -c 3000000 stream.bin; printf 'π err\\n' >&2; exit 5";

  it("binary records, text frames and HTTP give identical events for the same output", async () => {
    const http = h.client;
    const first = await http.exec(cmd);
    const viaHttp = await readAll(first.events({ heartbeats: false }));
    const events: Record<string, ExecEvent[]> = {};
    for (const binary of [true, false]) {
      const c = wsClient(binary);
      events[String(binary)] = await readAll((await c.get(first.id)).events({ heartbeats: false }));
      // And a fresh execution of the same command, started over the socket.
      const fresh = await readAll((await c.exec(cmd)).events({ heartbeats: false }));
      const stdout = (evs: ExecEvent[]) =>
        sha(
          Buffer.concat(evs.filter((e) => e.name === "stdout").map((e) => e.value as Uint8Array)),
        );
      expect(stdout(fresh)).toBe(stdout(viaHttp));
      await c.close();
    }
    expect(plain(events.true!)).toEqual(plain(viaHttp));
    expect(plain(events.false!)).toEqual(plain(viaHttp));
    expect(viaHttp.at(-1)).toMatchObject({ name: "exit", value: 5 });
  });

  it("utf8 executions give the same strings over binary and text", async () => {
    const got: ExecEvent[][] = [];
    for (const binary of [true, false]) {
      const c = wsClient(binary);
      const x = await c.exec("printf 'grün ✓\\n'; printf 'x\\377y' >&2", { encoding: "utf8" });
      got.push(await readAll(x.events({ heartbeats: false })));
      await c.close();
    }
    expect(plain(got[0]!)).toEqual(plain(got[1]!));
    expect(got[0]![0]).toMatchObject({ name: "stdout", value: "grün ✓\n" });
  });

  it("the server sends binary messages only to a socket that offered the subprotocol", async () => {
    const x = await h.client.exec("head -c 100000 stream.bin");
    await x.result();
    const url = `${h.url.replace(/^http/, "ws")}/v1/ws`;
    const headers = { authorization: `Bearer ${h.token}` };
    const run = (protocols: string[]) =>
      new Promise<{ protocol: string; kinds: boolean[]; events: ExecEvent[] }>(
        (resolve, reject) => {
          const ws = new WebSocket(url, protocols, { headers });
          const kinds: boolean[] = [];
          const events: ExecEvent[] = [];
          ws.on("open", () =>
            ws.send(JSON.stringify({ type: "subscribe", id: x.id, heartbeats: false })),
          );
          ws.on("message", (data: Buffer, isBinary: boolean) => {
            kinds.push(isBinary);
            const evs = isBinary
              ? decodeBinaryMessage(new Uint8Array(data))
              : String(data)
                  .split("\n")
                  .filter(Boolean)
                  .map((l) => JSON.parse(l));
            events.push(...evs);
            if (evs.some((e) => e.name === "exit")) {
              ws.close();
              resolve({ protocol: ws.protocol, kinds, events });
            }
          });
          ws.on("error", reject);
        },
      );
    const bin = await run([BINARY_SUBPROTOCOL]);
    expect(bin.protocol).toBe(BINARY_SUBPROTOCOL);
    expect(bin.kinds.every(Boolean)).toBe(true);
    const text = await run([]);
    expect(text.protocol).toBe("");
    expect(text.kinds.some(Boolean)).toBe(false);
    const stdout = (evs: ExecEvent[]) =>
      Buffer.concat(
        evs
          .filter((e) => e.name === "stdout")
          .map((e) =>
            typeof e.value === "string"
              ? Buffer.from(e.value, "base64")
              : Buffer.from(e.value as Uint8Array),
          ),
      );
    expect(stdout(bin.events).length).toBe(100_000);
    expect(stdout(bin.events).equals(stdout(text.events))).toBe(true);
    // A protocol we do not know is still accepted (first offered), and served text.
    const other = await run(["something-else"]);
    expect(other.protocol).toBe("something-else");
    expect(other.kinds.some(Boolean)).toBe(false);
  });
});
