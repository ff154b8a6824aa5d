// The relay's channel registry: names, the channel limit, replacing a closed
// channel, the listing, and the shutdown that cuts every page.
import { describe, expect, it } from "vitest";
import { DEFAULT_RELAY_LIMITS, UiRelay } from "./registry.js";

describe("UiRelay", () => {
  it("fills in default limits and keeps the ones given", () => {
    const relay = new UiRelay({ maxChannels: 2, heartbeatMs: undefined });
    expect(relay.limits).toEqual({ ...DEFAULT_RELAY_LIMITS, maxChannels: 2 });
  });

  it("creates channels on first use, refuses bad names and more than maxChannels", () => {
    const relay = new UiRelay({ maxChannels: 2 });
    const a = relay.channel("a");
    expect(relay.channel("a")).toBe(a);
    relay.channel("b.c_d~e-1");
    expect(() => relay.channel("c")).toThrow(expect.objectContaining({ code: "ELIMIT" }));
    expect(() => relay.channel("bad/name")).toThrow(expect.objectContaining({ code: "EINVAL" }));
    expect(() => relay.channel("x".repeat(129))).toThrow(
      expect.objectContaining({ code: "EINVAL" }),
    );
  });

  it("lists channels with their API fields, and a deleted channel starts over", () => {
    const relay = new UiRelay();
    relay.publish("a", { type: "render", component: "Label" });
    relay.channel("a").postEvent({ type: "t", widgetId: "w1", timestamp: 1 });
    relay.channel("a").subscribe(0, () => {});
    expect(relay.list()).toEqual([{ name: "a", cursor: 1, subscribers: 1, events: 1 }]);
    const old = relay.channel("a");
    relay.deleteChannel("a");
    expect(old.closed).toBe(true);
    expect(old.endMode).toBe("done");
    expect(relay.list()).toEqual([]);
    expect(relay.publish("a", { type: "render", component: "Label" })).toEqual({
      seq: 1,
      widgetId: "w1",
    });
  });

  it("a shutdown cuts every channel (no [DONE]) and forgets them", () => {
    const relay = new UiRelay();
    const seen: unknown[] = [];
    relay.channel("a").subscribe(0, (e) => seen.push(e));
    relay.close();
    expect(seen).toEqual(["cut"]);
    expect(relay.list()).toEqual([]);
  });
});
