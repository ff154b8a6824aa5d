// Lossless resume over the WebSocket transport (/v1/ws), through real sockets:
// - chaos: a TCP proxy cuts the connection at random points (mid-message) 15
//   times during a 50 MiB command output; the `ws` client reconnects on a new
//   socket each time and sends `resume` with the last seq it decoded. The
//   joined stdout is byte-exact (SHA-256), seqs are gap-free with no
//   duplicates, and exactly one exit frame ends it;
// - a resume older than what the ring keeps is answered with an exec-wire
//   error frame (ELOG_TRUNCATED with earliestSeq), never silent loss, and a
//   resume from earliestSeq - 1 then gets the rest, gap-free.
//
// The client below is written against docs/api.md only (subscribe/resume JSON
// messages, exec-wire lines decoded with ExecWireDecoder), not the SDK, so it
// checks the protocol as a third-party client would use it.

import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { ExecWireDecoder, type ExecWireError } from "../src/wire/exec-wire/index.js";
import type { ExecEvent } from "../src/wire/types.js";
import { startChaosProxy } from "./support/chaos-proxy.js";
import {
  PACED_STREAM_COMMAND,
  RESUME_STREAM_BYTES,
  startResumeFixture,
} from "./support/resume-fixture.js";
import { type Harness, startServer } from "./support/server-harness.js";

const SIZE = RESUME_STREAM_BYTES;
const CUTS = 15;

function wsUrl(httpUrl: string): string {
  return `${httpUrl.replace(/^http/, "ws")}/v1/ws`;
}

/**
 * One WebSocket connection's life: sends `message` once open, hands every
 * decoded event to `onEvent`, and settles with "exit" after the exit frame or
 * "closed" when the connection dies first (a cut, or a failed upgrade). A
 * producer error frame rejects (the decoder throws it as an ExecWireError).
 * Each connection gets a fresh decoder: messages hold whole lines, so nothing
 * from a cut connection can carry over.
 */
function connectOnce(
  url: string,
  token: string,
  message: Record<string, unknown>,
  onEvent: (ev: ExecEvent<Uint8Array>) => void,
): Promise<"exit" | "closed"> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } });
    const decoder = new ExecWireDecoder<Uint8Array>({ values: "bytes" });
    let settled = false;
    const settle = (f: () => void) => {
      if (settled) return;
      settled = true;
      f();
    };
    ws.on("open", () => ws.send(JSON.stringify(message)));
    ws.on("message", (data: Buffer) => {
      if (settled) return;
      try {
        for (const ev of decoder.push(data)) {
          onEvent(ev);
          if (ev.name === "exit") {
            settle(() => resolve("exit"));
            ws.close();
            return;
          }
        }
      } catch (err) {
        settle(() => reject(err));
        ws.terminate();
      }
    });
    // A reset shows up as "error" (sometimes) then "close" (always).
    ws.on("error", () => {});
    ws.on("close", () => settle(() => resolve("closed")));
  });
}

describe("WebSocket resume under random connection cuts", () => {
  let h: Harness;
  let expected: string;

  beforeAll(async () => {
    ({ h, expectedSha256: expected } = await startResumeFixture());
  }, 120_000);
  afterAll(async () => {
    await h?.close();
  });

  it("15 random cuts during a 50 MiB stream: resume on a new socket each time, output byte-exact, seqs gap-free, one exit", async () => {
    const seed = Number(process.env.CHAOS_SEED ?? Date.now() % 1_000_000);
    // Each connection carries a budget in [min, max) bytes before its cut; the
    // stream is ~67 MiB on the wire (base64), so 15 budgets of at most 4 MiB
    // (60 MiB) always run out before it does: exactly 15 cuts, every seed.
    const proxy = await startChaosProxy({
      target: h.url,
      cuts: CUTS,
      minBytes: 64 * 1024,
      maxBytes: 4 * 1024 * 1024,
      seed,
    });
    const why = `CHAOS_SEED=${seed}`;
    try {
      // The file goes out 1 MiB at a time with a short pause between blocks
      // (`cat` alone finishes within the first few cuts), so most resumes
      // happen while the command is still writing: they exercise the log's
      // hand-over from replay to live, not only replay. Gated on one stdin
      // byte, sent once the first socket is subscribing. The POST goes
      // straight to the server, so only the WebSocket is cut.
      const handle = await h.client.exec(PACED_STREAM_COMMAND, { stdin: "pipe" });
      const hash = createHash("sha256");
      const seqs: number[] = [];
      const resumedAfter: number[] = [];
      let bytes = 0;
      let exits = 0;
      let exitEvent: ExecEvent | undefined;
      let last = 0;
      const onEvent = (ev: ExecEvent<Uint8Array>) => {
        if (ev.name === "heartbeat") return;
        seqs.push(ev.seq);
        last = ev.seq;
        if (ev.name === "stdout") {
          hash.update(ev.value);
          bytes += ev.value.length;
        } else if (ev.name === "exit") {
          exits++;
          exitEvent = ev;
        }
      };

      let outcome = connectOnce(
        wsUrl(proxy.url),
        h.token,
        { type: "subscribe", id: handle.id, after: 0, heartbeats: false },
        onEvent,
      );
      await handle.write("g");
      await handle.end();
      let connections = 1;
      while ((await outcome) === "closed") {
        // Bounded so a server that never finishes the stream fails the test
        // instead of spinning until the timeout.
        expect(connections, why).toBeLessThan(CUTS + 5);
        connections++;
        resumedAfter.push(last);
        outcome = connectOnce(
          wsUrl(proxy.url),
          h.token,
          { type: "resume", id: handle.id, after: last, heartbeats: false },
          onEvent,
        );
      }

      expect(proxy.cuts, why).toBe(CUTS);
      expect(connections, why).toBe(CUTS + 1);
      // Every cut was followed by a resume on a new socket, from positions
      // that only move forward. A cut before a connection's first complete
      // message (budgets start at 64 KiB, messages hold up to ~256 KiB)
      // resumes from the same seq again, which is fine; most resume mid-stream.
      expect(resumedAfter.length, why).toBe(CUTS);
      expect(resumedAfter, why).toEqual([...resumedAfter].sort((a, b) => a - b));
      expect(
        resumedAfter.some((a) => a > 0),
        why,
      ).toBe(true);
      expect(seqs, why).toEqual(seqs.map((_s, i) => i + 1));
      expect(exits, why).toBe(1);
      expect(seqs.at(-1), why).toBe(exitEvent?.seq);
      expect(exitEvent, why).toMatchObject({ name: "exit", value: 0 });
      expect(bytes, why).toBe(SIZE);
      expect(hash.digest("hex"), why).toBe(expected);
    } finally {
      await proxy.close();
    }
  });
});

describe("WebSocket resume older than the ring", () => {
  let h: Harness;

  beforeAll(async () => {
    // A 4 KiB ring: 20 KB of output does not fit, so early seqs are dropped.
    h = await startServer({ computer: { logMaxBytes: 4096, spill: { spillMaxBytes: 0 } } });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("answers an ELOG_TRUNCATED error frame with earliestSeq (not silent loss); resuming from earliestSeq - 1 then gets the rest", async () => {
    // 100 lines of 201 bytes (printf is a dash builtin: no fork per line),
    // paced so they arrive as many small stdout events; the ring keeps only
    // the last ~20, so a coalesced chunk would need a 100 ms stall to matter.
    const handle = await h.client.exec(
      "for i in $(seq 1 100); do printf '%0200d\\n' $i; sleep 0.005; done",
      { encoding: "utf8" },
    );
    const full = Array.from(
      { length: 100 },
      (_v, i) => `${String(i + 1).padStart(200, "0")}\n`,
    ).join("");
    await handle.result();

    const url = wsUrl(h.url);
    const truncated = await connectOnce(
      url,
      h.token,
      { type: "resume", id: handle.id, after: 0, heartbeats: false },
      () => {
        throw new Error("no event may arrive before the error frame");
      },
    ).then(
      () => undefined,
      (err: ExecWireError) => err,
    );
    expect(truncated).toMatchObject({ code: "ELOG_TRUNCATED" });
    const earliestSeq = truncated?.earliestSeq;
    expect(earliestSeq).toBeGreaterThan(1);
    // The frame names the subscription it ends and carries earliestSeq itself.
    expect(truncated?.frame).toMatchObject({
      id: handle.id,
      name: "error",
      code: "ELOG_TRUNCATED",
      earliestSeq,
    });

    // Resuming at the start of what the ring holds loses nothing further.
    const seqs: number[] = [];
    let text = "";
    const outcome = await connectOnce(
      url,
      h.token,
      { type: "resume", id: handle.id, after: earliestSeq! - 1, heartbeats: false },
      (ev) => {
        if (ev.name === "heartbeat") return;
        seqs.push(ev.seq);
        if (ev.name === "stdout") text += Buffer.from(ev.value).toString("utf8");
      },
    );
    expect(outcome).toBe("exit");
    expect(seqs[0]).toBe(earliestSeq);
    expect(seqs).toEqual(seqs.map((_s, i) => earliestSeq! + i));
    expect(text.length).toBeGreaterThan(0);
    expect(text.length).toBeLessThan(full.length);
    expect(full.endsWith(text)).toBe(true);
  });
});
