// The relay's journal over a real SQLite log, in process: a channel rebuilt
// from its record has exactly the state it had (seqs, floor, compaction,
// recent window, UI events), including when small bounds drop entries and
// when the journal has re-snapshotted because the record grew.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { SqliteEventLog } from "../../store/sqlite-log.js";
import { type ChannelLimits, DEFAULT_CHANNEL_LIMITS, type UiChannel } from "./channel.js";
import { CRASH_GAP, RelayStore } from "./persist.js";
import { UiRelay } from "./registry.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const SMALL: ChannelLimits = {
  ...DEFAULT_CHANNEL_LIMITS,
  maxRetained: 12,
  maxRecent: 6,
  maxEvents: 5,
};

/** Renders, updates, destroys and UI events, deterministic but varied. */
function drive(ch: UiChannel, n: number): void {
  const live: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = i % 7;
    if (r === 0 || live.length === 0) {
      try {
        live.push(ch.publish({ type: "render", component: "L", params: { i } }).widgetId!);
      } catch {
        /* ELIMIT: full of live widgets */
      }
    } else if (r === 5) {
      ch.publish({ type: "destroy", widgetId: live.shift()! });
    } else if (r === 6) {
      ch.postEvent({ type: "L:click", widgetId: live[0]!, timestamp: i, payload: { i } });
    } else {
      ch.publish({ type: "update", widgetId: live[i % live.length]!, params: { [`k${r}`]: i } });
    }
  }
}

async function open(dir: string, logMaxBytes?: number) {
  const eventLog = new SqliteEventLog(path.join(dir, "log.db"), logMaxBytes ? { logMaxBytes } : {});
  const store = new RelayStore(Promise.resolve(eventLog));
  const relay = new UiRelay(SMALL, store);
  await relay.ready;
  return { eventLog, relay, store };
}

function observe(ch: UiChannel) {
  const replays: unknown[] = [];
  for (let after = 0; after <= ch.lastSeq; after++) {
    try {
      replays.push(ch.replay(after));
    } catch (err) {
      replays.push((err as { code?: string }).code);
    }
  }
  return { snapshot: ch.snapshot(), replays, events: ch.readEvents(ch.lastEventSeq - 3) };
}

describe("RelayStore", () => {
  for (const [name, cap] of [
    ["one record", undefined],
    ["re-snapshotted records", 4096],
  ] as const) {
    it(`rebuilds a channel exactly after a clean shutdown (${name})`, async () => {
      const dir = mkdtempSync(path.join(tmpdir(), "ac-relay-persist-"));
      dirs.push(dir);
      const a = await open(dir, cap);
      drive(a.relay.channel("c"), 300);
      const before = observe(a.relay.channel("c"));
      expect(before.snapshot.floor).toBeGreaterThan(0); // the small bounds dropped entries
      await a.relay.flush();
      await a.eventLog.close();

      const b = await open(dir, cap);
      expect(observe(b.relay.channel("c"))).toEqual(before);
      // It goes on identically too: the same next seq and widget id.
      const next = b.relay.channel("c").publish({ type: "render", component: "L", params: {} });
      expect(next.seq).toBe(before.snapshot.lastSeq + 1);
      await b.relay.flush();
      await b.eventLog.close();
    });
  }

  it("without the clean-shutdown marker, seqs move on by the crash gap", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "ac-relay-persist-"));
    dirs.push(dir);
    const a = await open(dir);
    drive(a.relay.channel("c"), 50);
    const last = a.relay.channel("c").lastSeq;
    const lastEvent = a.relay.channel("c").lastEventSeq;
    // Wait for the journal without writing the marker (what a kill -9 leaves).
    await a.store.settled();
    await a.eventLog.close();

    const b = await open(dir);
    const ch = b.relay.channel("c");
    expect(ch.replay(last)).toEqual([]);
    expect(() => ch.replay(last + 1)).toThrow(/not stored/);
    expect(ch.publish({ type: "render", component: "L", params: {} }).seq).toBe(
      last + CRASH_GAP + 1,
    );
    expect(ch.postEvent({ type: "x", widgetId: "w1", timestamp: 1 }).seq).toBe(
      lastEvent + CRASH_GAP + 1,
    );
    expect(() => ch.readEvents(lastEvent + 1)).toThrow(/not stored/);
    expect(ch.readEvents(lastEvent).map((e) => e.seq)).toEqual([lastEvent + CRASH_GAP + 1]);
    await b.relay.flush();
    await b.eventLog.close();
  });

  it("a deleted channel's record is gone after a restart", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "ac-relay-persist-"));
    dirs.push(dir);
    const a = await open(dir);
    drive(a.relay.channel("c"), 20);
    a.relay.deleteChannel("c");
    await a.relay.flush();
    expect((await a.eventLog.list()).map((r) => r.id)).toEqual([]);
    await a.eventLog.close();
    const b = await open(dir);
    expect(b.relay.list()).toEqual([]);
    await b.eventLog.close();
  });
});
