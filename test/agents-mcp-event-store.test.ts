// The MCP event store kept in an EventLog: event ids are `<stream>:<seq>`,
// stores resolve in seq order even when issued at once, a replay sends exactly
// the messages after the given id (priming events carry no data and are
// skipped), a message stored while a replay runs is answered only after the
// replay returned (so the transport either replays it or writes it live), ids
// of other sessions or malformed ids are not recognised, and close() drops the
// session's records.
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { LogEventStore, MCP_LOG_PREFIX } from "../src/agents/mcp-event-store.js";
import { MemoryEventLog } from "../src/store/memory-log.js";

const note = (n: number): JSONRPCMessage => ({
  jsonrpc: "2.0",
  method: "notifications/progress",
  params: { progressToken: 1, progress: n },
});

async function replay(store: LogEventStore, after: string) {
  const got: Array<[string, JSONRPCMessage]> = [];
  const stream = await store.replayEventsAfter(after, {
    send: async (id, m) => {
      got.push([id, m]);
    },
  });
  return { stream, got };
}

describe("LogEventStore", () => {
  it("numbers events per stream, resolves stores in order and replays after an id", async () => {
    const eventLog = new MemoryEventLog();
    const store = new LogEventStore(eventLog, "s1");
    const priming = await store.storeEvent("abc", {} as JSONRPCMessage);
    expect(priming).toBe("abc:1");
    const order: string[] = [];
    const ids = await Promise.all(
      [1, 2, 3, 4].map(async (n) => {
        const id = await store.storeEvent("abc", note(n));
        order.push(id);
        return id;
      }),
    );
    expect(ids).toEqual(["abc:2", "abc:3", "abc:4", "abc:5"]);
    expect(order).toEqual(ids);
    expect(await store.storeEvent("other", note(9))).toBe("other:1");

    const all = await replay(store, priming);
    expect(all.stream).toBe("abc");
    expect(all.got.map(([id]) => id)).toEqual(["abc:2", "abc:3", "abc:4", "abc:5"]);
    expect(all.got[0]![1]).toEqual(note(1));
    const tail = await replay(store, "abc:3");
    expect(tail.got.map(([id]) => id)).toEqual(["abc:4", "abc:5"]);
    const fromZero = await replay(store, "abc:0");
    expect(fromZero.got.map(([id]) => id)).toEqual(["abc:2", "abc:3", "abc:4", "abc:5"]);

    expect(await store.getStreamIdForEventId("abc:3")).toBe("abc");
    expect(await store.getStreamIdForEventId("nope:3")).toBeUndefined();
    expect(await store.getStreamIdForEventId("garbage")).toBeUndefined();
    expect(await store.getStreamIdForEventId("a/b:1")).toBeUndefined();
    // Another session's store does not see these streams.
    expect(await new LogEventStore(eventLog, "s2").getStreamIdForEventId("abc:3")).toBeUndefined();

    const ids2 = (await eventLog.list()).map((r) => r.id).sort();
    expect(ids2).toEqual([`${MCP_LOG_PREFIX}s1/abc`, `${MCP_LOG_PREFIX}s1/other`]);
    await store.close();
    expect(await eventLog.list()).toEqual([]);
  });

  it("holds a store issued during a replay until the replay returned", async () => {
    const eventLog = new MemoryEventLog();
    const store = new LogEventStore(eventLog, "s1");
    await store.storeEvent("st", {} as JSONRPCMessage);
    await store.storeEvent("st", note(1));
    const events: string[] = [];
    let late: Promise<string> | undefined;
    const stream = await store.replayEventsAfter("st:1", {
      send: async (id) => {
        events.push(`replayed ${id}`);
        if (!late) {
          late = store.storeEvent("st", note(2));
          late.then((lid) => events.push(`stored ${lid}`));
          await new Promise((r) => setTimeout(r, 20));
        }
      },
    });
    events.push(`returned ${stream}`);
    await late;
    await new Promise((r) => setImmediate(r));
    // The late message was appended while the replay ran, so the replay sent
    // it, and its store answered only after the replay had returned.
    expect(events).toEqual(["replayed st:2", "replayed st:3", "returned st", "stored st:3"]);
    await store.close();
  });
});
