// Lossless resume under failure, through real sockets:
// - chaos: a TCP proxy cuts the connection at random points (mid-frame) 20
//   times during a 50 MiB stream; the client SDK's output is byte-exact, its
//   seqs gap-free and without duplicates;
// - the `eventsource` npm package, an independent SSE client, reconnects
//   through the same kind of proxy with Last-Event-ID and receives every event
//   exactly once;
// - a server that skips a seq: the SDK delivers every event before the gap,
//   then fails with EGAP (nothing accepted is lost to the error).

import { createHash } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { EventSource } from "eventsource";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ComputerClient } from "../src/client/client.js";
import type { ExecEvent } from "../src/wire/types.js";
import { startChaosProxy } from "./support/chaos-proxy.js";
import {
  PACED_STREAM_COMMAND,
  RESUME_STREAM_BYTES,
  startResumeFixture,
} from "./support/resume-fixture.js";
import { type Harness, startServer } from "./support/server-harness.js";

const SIZE = RESUME_STREAM_BYTES;
let h: Harness;
let expected: string;

beforeAll(async () => {
  ({ h, expectedSha256: expected } = await startResumeFixture());
}, 120_000);
afterAll(async () => {
  await h?.close();
});

describe("resume", () => {
  it("chaos: 20 random cuts during a 50 MiB stream, output byte-exact, no gaps, no duplicates", async () => {
    const seed = Number(process.env.CHAOS_SEED ?? Date.now() % 1_000_000);
    const proxy = await startChaosProxy({
      target: h.url,
      cuts: 20,
      minBytes: 64 * 1024,
      maxBytes: 4 * 1024 * 1024,
      seed,
    });
    try {
      const client = new ComputerClient({
        url: proxy.url,
        token: h.token,
        resume: { initialDelayMs: 5, maxDelayMs: 100, maxRetries: 20 },
      });
      // Start directly (not through the proxy) so the POST itself is never cut.
      // Paced, so the cuts fall during live output (see resume-fixture.ts).
      const handle = await h.client.exec(PACED_STREAM_COMMAND, { stdin: "pipe" });
      const remote = await client.get(handle.id);
      const reader = remote.events({ heartbeats: false }).getReader();
      const first = reader.read();
      await new Promise((r) => setTimeout(r, 100));
      await handle.write("g");
      await handle.end();
      const hash = createHash("sha256");
      const seqs: number[] = [];
      let bytes = 0;
      let exit: ExecEvent | undefined;
      let r = await first;
      while (!r.done) {
        const ev = r.value;
        seqs.push(ev.seq);
        if (ev.name === "stdout") {
          hash.update(ev.value as Uint8Array);
          bytes += (ev.value as Uint8Array).length;
        } else if (ev.name === "exit") exit = ev;
        r = await reader.read();
      }
      expect(proxy.cuts, `seed ${seed}`).toBe(20);
      expect(exit, `seed ${seed}`).toMatchObject({ name: "exit", value: 0 });
      expect(seqs, `seed ${seed}`).toEqual(seqs.map((_s, i) => i + 1));
      expect(bytes, `seed ${seed}`).toBe(SIZE);
      expect(hash.digest("hex"), `seed ${seed}`).toBe(expected);
      // It really resumed: later requests ask for after=N > 0.
      expect(
        proxy.requests.filter((q) => /events\?after=[1-9]/.test(q)).length,
      ).toBeGreaterThanOrEqual(19);
    } finally {
      await proxy.close();
    }
  });

  it("the eventsource package resumes with Last-Event-ID: every event exactly once", async () => {
    const proxy = await startChaosProxy({
      target: h.url,
      cuts: 3,
      minBytes: 2_000,
      maxBytes: 6_000,
      seed: 7,
    });
    try {
      // ~300 small events (one per line: each line is its own write), paced
      // so the stream is still live across the cuts.
      const handle = await h.client.exec(
        "for i in $(seq 1 300); do echo line-$i; sleep 0.005; done",
        { encoding: "utf8" },
      );
      const token = h.token;
      const es = new EventSource(`${proxy.url}/v1/execs/${handle.id}/events`, {
        fetch: (input, init) =>
          fetch(input, {
            ...init,
            headers: {
              ...(init?.headers as Record<string, string>),
              authorization: `Bearer ${token}`,
            },
          }),
      });
      const seqs: number[] = [];
      let text = "";
      const done = new Promise<void>((resolve, reject) => {
        const onFrame = (e: MessageEvent) => {
          const frame = JSON.parse(e.data);
          expect(e.lastEventId).toBe(String(frame.seq));
          seqs.push(frame.seq);
          if (frame.name === "stdout") text += frame.value;
        };
        es.addEventListener("stdout", onFrame);
        es.addEventListener("stderr", onFrame);
        es.addEventListener("exit", onFrame);
        es.addEventListener("end", (e) => {
          expect((e as MessageEvent).data).toBe("[DONE]");
          es.close();
          resolve();
        });
        setTimeout(() => reject(new Error("timed out waiting for end")), 50_000).unref();
      });
      await done;
      expect(proxy.cuts).toBe(3);
      expect(seqs).toEqual(seqs.map((_s, i) => i + 1));
      const expectedText = Array.from({ length: 300 }, (_v, i) => `line-${i + 1}\n`).join("");
      expect(text).toBe(expectedText);
      const resumed = proxy.requests.filter((q) => /last-event-id: \d+/i.test(q));
      expect(resumed.length).toBeGreaterThanOrEqual(3);
    } finally {
      await proxy.close();
    }
  });
});

describe("resume across a server restart (durable log)", () => {
  it("the client's stream continues on the restarted server with nothing lost or repeated", async () => {
    const { mkdtemp, rm } = await import("node:fs/promises");
    const { tmpdir } = await import("node:os");
    const base = await mkdtemp(path.join(tmpdir(), "ac-restart-"));
    const logPath = path.join(base, "events.db");
    const first = await startServer({ computer: { eventLog: `sqlite:${logPath}` } });
    const port = Number(new URL(first.url).port);
    let second: Harness | undefined;
    try {
      const client = new ComputerClient({
        url: first.url,
        token: first.token,
        resume: { initialDelayMs: 20, maxDelayMs: 200, maxRetries: 30 },
      });
      const handle = await client.exec(
        "for i in $(seq 1 1000); do echo line-$i; sleep 0.01; done",
        {
          encoding: "utf8",
        },
      );
      const reader = handle.events({ heartbeats: false }).getReader();
      const seqs: number[] = [];
      let text = "";
      let exit: ExecEvent | undefined;
      // Read a few events from the first server...
      while (seqs.length < 5) {
        const { value } = await reader.read();
        seqs.push(value!.seq);
        if (value!.name === "stdout") text += value!.value;
      }
      // ...then restart it on the same port with the same SQLite log. Shutdown
      // kills the command (exit reason "killed"), which the new server replays.
      const closing = first.server.close(); // stops accepting at once
      first.server.httpServer.closeAllConnections(); // cut the live stream mid-run
      await closing;
      const seen: Record<string, unknown>[] = [];
      second = await startServer({
        computer: { eventLog: `sqlite:${logPath}` },
        server: { port, logger: (e) => seen.push(e) },
      });
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        seqs.push(value.seq);
        if (value.name === "stdout") text += value.value;
        else if (value.name === "exit") exit = value;
      }
      expect(exit).toMatchObject({ name: "exit", reason: "killed" });
      // The rest really came from the restarted server, resumed after a seq > 0.
      expect(seen.some((e) => e.msg === "request" && String(e.path).endsWith("/events"))).toBe(
        true,
      );
      expect(seqs).toEqual(seqs.map((_s, i) => i + 1));
      const lines = text.split("\n").filter(Boolean);
      expect(lines).toEqual(lines.map((_l, i) => `line-${i + 1}`));
    } finally {
      await second?.close();
      await first.close().catch(() => {});
      await rm(base, { recursive: true, force: true });
    }
  });
});

describe("a gap from the server", () => {
  it("1, 2, 4: the consumer gets 1 and 2, then EGAP", async () => {
    const line = (seq: number) =>
      `${JSON.stringify({ id: "x", seq, name: "stdout", enc: "utf8", value: `line ${seq}\n` })}\n`;
    const requests: string[] = [];
    const server = createServer((req, res) => {
      requests.push(req.url!);
      if (req.url === "/v1/execs/x") {
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ id: "x", state: "running", lastSeq: 4, earliestSeq: 1 }));
        return;
      }
      res.setHeader("content-type", "application/x-ndjson");
      res.write(line(1) + line(2) + line(4)); // one chunk: the gap is in the same batch
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const client = new ComputerClient({ url, resume: { initialDelayMs: 1, maxDelayMs: 5 } });
      const reader = (await client.get("x")).events({ heartbeats: false }).getReader();
      const seqs: number[] = [];
      let error: unknown;
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          seqs.push(value.seq);
        }
      } catch (err) {
        error = err;
      }
      expect(seqs).toEqual([1, 2]);
      expect(error).toMatchObject({ code: "EGAP" });
      expect((error as Error).message).toMatch(/expected seq 3, got 4/);
      expect(requests.filter((u) => u.includes("/events"))).toEqual([
        "/v1/execs/x/events?after=0&heartbeats=0",
      ]);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
