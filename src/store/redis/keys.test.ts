// The Redis key schema: every name sits under the prefix, an execution's two
// keys share one hash tag (one slot), and the segments the Lua scripts splice
// in match the names built here. The layout is pinned: data written by a
// running deployment must stay readable.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DEFAULT_PREFIX, NOTIFY_CHANNEL_SEGMENT, RedisKeys, RUNNING_SET_SEGMENT } from "./keys.js";

describe("RedisKeys", () => {
  it("spells the documented layout under the default prefix", () => {
    const k = new RedisKeys();
    expect(k.prefix).toBe(DEFAULT_PREFIX);
    expect(k.meta("e1")).toBe("ac:{e1}:m");
    expect(k.stream("e1")).toBe("ac:{e1}:s");
    expect(k.index).toBe("ac:execs");
    expect(k.counter).toBe("ac:ctr");
    expect(k.running("n1")).toBe("ac:run:n1");
    expect(k.notifyChannel("e1")).toBe("ac:n:e1");
    expect(k.notifyChannelPrefix).toBe("ac:n:");
    expect(k.alive("n1")).toBe("ac:node:n1");
    expect(k.nodes).toBe("ac:nodes");
    expect(k.controlStream("n1")).toBe("ac:ctl:n1");
    expect(k.replyChannel("n1")).toBe("ac:reply:n1");
  });

  it("builds the running set and channels from the segments the scripts splice in", () => {
    const k = new RedisKeys("p:");
    expect(k.running("n")).toBe(`p:${RUNNING_SET_SEGMENT}n`);
    expect(k.notifyChannel("e")).toBe(`p:${NOTIFY_CHANNEL_SEGMENT}e`);
  });

  it("puts every name under the prefix and an execution's keys in one hash slot (property)", () => {
    const id = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,20}$/);
    fc.assert(
      fc.property(fc.string({ maxLength: 8 }), id, id, (prefix, execId, node) => {
        const k = new RedisKeys(prefix);
        const names = [
          k.meta(execId),
          k.stream(execId),
          k.index,
          k.counter,
          k.running(node),
          k.notifyChannel(execId),
          k.alive(node),
          k.nodes,
          k.controlStream(node),
          k.replyChannel(node),
        ];
        for (const n of names) expect(n.startsWith(prefix)).toBe(true);
        // The hash tag is the first {...} after the prefix: the id itself.
        const tag = (key: string) => /\{([^}]*)\}/.exec(key.slice(prefix.length))?.[1];
        expect(tag(k.meta(execId))).toBe(execId);
        expect(tag(k.stream(execId))).toBe(execId);
        expect(k.meta(execId)).not.toBe(k.stream(execId));
        expect(k.notifyChannel(execId).slice(k.notifyChannelPrefix.length)).toBe(execId);
      }),
    );
  });

  it("keeps two prefixes apart", () => {
    expect(new RedisKeys("a:").meta("x")).not.toBe(new RedisKeys("b:").meta("x"));
  });
});
