// The A@UI relay keeps its channels in the server's log (SQLite, Redis): real
// `agent-computer serve` processes publish commands and take UI events, are
// stopped (SIGTERM) or crashed (kill -9), and restarted on the same log. The
// restarted server must serve the same channel: the same compacted commands
// at the same positions, an exact resume from an old cursor, the UI events
// from where the agent left off, and (after a crash) no seq handed out twice.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CRASH_GAP } from "../src/server/relay/persist.js";
import { ensureDistBuilt } from "./support/dist.js";
import { PROC_TOKEN, type ServeProc, startServe } from "./support/proc-serve.js";
import { redisAvailable, startRedis } from "./support/redis-server.js";

const dirs: string[] = [];
const tmp = (tag: string) => {
  const d = mkdtempSync(path.join(tmpdir(), `ac-relay-${tag}-`));
  dirs.push(d);
  return d;
};
beforeAll(() => ensureDistBuilt(), 180_000);
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface PollAnswer {
  commands: unknown[];
  positions: number[];
  cursor: number;
  done: boolean;
}

async function poll(s: ServeProc, ch: string, after: number): Promise<Response> {
  return fetch(`${s.url}/v1/ui/${ch}/poll?after=${after}`, {
    headers: { authorization: `Bearer ${PROC_TOKEN}` },
  });
}
async function pollOk(s: ServeProc, ch: string, after: number): Promise<PollAnswer> {
  const r = await poll(s, ch, after);
  expect(r.status).toBe(200);
  return (await r.json()) as PollAnswer;
}

/** A channel with compaction at work: merged updates, a destroyed widget, UI events. */
async function fill(s: ServeProc, ch: string) {
  const ui = s.client.ui.channel(ch);
  const a = await ui.render("Label", { text: "a", n: 0 });
  for (let i = 1; i <= 5; i++) await ui.update(a.widgetId!, { n: i });
  const b = await ui.render("Label", { text: "b" });
  await ui.destroy(b.widgetId!);
  const c = await ui.render("Label", { text: "c" });
  await ui.update(c.widgetId!, { text: "c2" });
  for (let i = 0; i < 3; i++)
    await ui.sendEvent({
      type: "Label:click",
      widgetId: a.widgetId!,
      payload: { i },
      timestamp: 1000 + i,
    });
}

async function state(s: ServeProc, ch: string) {
  const ui = s.client.ui.channel(ch);
  const events: unknown[] = [];
  for await (const ev of ui.events({ after: 0, waitMs: 0 })) {
    events.push(ev);
    if (events.length === 3) break;
  }
  return {
    snapshot: await pollOk(s, ch, 0),
    resume: await pollOk(s, ch, 3),
    events,
    list: (
      (await (
        await fetch(`${s.url}/v1/ui`, {
          headers: { authorization: `Bearer ${PROC_TOKEN}` },
        })
      ).json()) as { channels: { name: string }[] }
    ).channels.find((c) => c.name === ch),
  };
}

async function stop(s: ServeProc, signal: NodeJS.Signals): Promise<void> {
  s.child.kill(signal);
  await s.exited;
}

/** The whole scenario on one log: clean restart, crash restart, delete. */
async function scenario(args: string[], env: NodeJS.ProcessEnv = {}) {
  const ch = "review";
  const first = await startServe(args, env);
  let before: Awaited<ReturnType<typeof state>>;
  try {
    await fill(first, ch);
    before = await state(first, ch);
    expect(before.snapshot.positions).toEqual([1, 6, 8, 9, 10]); // a, its merged update, b's tombstone, c, its update
  } finally {
    await stop(first, "SIGTERM");
  }

  // Clean restart: identical, and the seqs continue.
  const second = await startServe(args, env);
  try {
    expect(await state(second, ch)).toEqual(before);
    const next = await second.client.ui.channel(ch).update("w1", { n: 6 });
    expect(next.cursor).toBe(before.snapshot.cursor + 1);
    const { seq: evSeq } = await second.client.ui
      .channel(ch)
      .sendEvent({ type: "Label:click", widgetId: "w1", payload: { i: 3 }, timestamp: 2000 });
    expect(evSeq).toBe(4);
  } finally {
    // Give the write-behind journal a moment, then crash.
    await new Promise((r) => setTimeout(r, 500));
    await stop(second, "SIGKILL");
  }

  // Crash restart: what was stored comes back; seqs move on past anything unstored.
  const third = await startServe(args, env);
  try {
    const snap = await pollOk(third, ch, 0);
    expect(snap.positions).toEqual([1, 8, 9, 10, 11]);
    expect(snap.commands[1]).toEqual({ type: "destroy", widgetId: "w7" });
    expect(snap.commands[4]).toEqual({ type: "update", widgetId: "w1", params: { n: 6 } });
    const lastSeen = 11; // the update's seq
    expect((await pollOk(third, ch, lastSeen)).commands).toEqual([]);
    // A cursor the crash may have taken back: 410, the page starts over.
    expect((await poll(third, ch, lastSeen + 1)).status).toBe(410);
    const r = await third.client.ui.channel(ch).render("Label", { text: "d" });
    expect(r.widgetId).toBe(`w${lastSeen + CRASH_GAP + 1}`);
    const events: { seq: number }[] = [];
    for await (const ev of third.client.ui.channel(ch).events({ after: 3, waitMs: 0 })) {
      events.push(ev as { seq: number });
      break;
    }
    expect(events[0]!.seq).toBe(4);
    // Deleting the channel removes its record.
    const del = await fetch(`${third.url}/v1/ui/${ch}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${PROC_TOKEN}` },
    });
    expect(del.status).toBe(204);
  } finally {
    await stop(third, "SIGTERM");
  }
  const fourth = await startServe(args, env);
  try {
    expect((await pollOk(fourth, ch, 0)).cursor).toBe(0);
  } finally {
    await stop(fourth, "SIGTERM");
  }
}

describe("A@UI relay persistence", () => {
  it("SQLite: channels survive a restart and a kill -9 with their seqs", async () => {
    const dir = tmp("sqlite");
    await scenario(["--workspace", dir, "--log", `sqlite:${path.join(dir, "log.db")}`]);
  }, 120_000);

  it.skipIf(!redisAvailable())(
    "Redis: channels survive a restart and a kill -9 with their seqs",
    async () => {
      const redis = await startRedis();
      try {
        await scenario(["--workspace", tmp("redis")], {
          AGENT_COMPUTER_LOG: `${redis.url}?prefix=ui:`,
          AGENT_COMPUTER_NODE_ID: "n1",
        });
      } finally {
        await redis.close();
      }
    },
    180_000,
  );

  it("memory: a restart starts over (nothing is kept)", async () => {
    const dir = tmp("mem");
    const first = await startServe(["--workspace", dir, "--log", "memory"]);
    try {
      await first.client.ui.channel("m").render("Label", { text: "x" });
    } finally {
      await stop(first, "SIGTERM");
    }
    const second = await startServe(["--workspace", dir, "--log", "memory"]);
    try {
      expect((await pollOk(second, "m", 0)).cursor).toBe(0);
    } finally {
      await stop(second, "SIGTERM");
    }
  }, 60_000);
});
