// The subscribe prologue without sockets: where an HTTP stream starts
// (Last-Event-ID wins over ?after=), the subscriber limit, that a refused
// start (handle.subscribe rejecting) takes no slot, and that a slot is given
// back exactly once.

import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import type { EventsOptions, ExecHandle } from "../../runtime/types.js";
import { ComputerError } from "../../wire/errors.js";
import type { ExecEvent } from "../../wire/types.js";
import { DEFAULT_LIMITS, type ServerDeps } from "../deps.js";
import { createMetrics } from "../metrics.js";
import { FrameEncoders } from "./encode-cache.js";
import { afterOfRequest, openSubscription } from "./subscribe.js";

const req = (headers: Record<string, string> = {}) => ({ headers }) as unknown as IncomingMessage;
const url = (query = "") => new URL(`http://localhost/v1/execs/r1/events${query}`);

describe("afterOfRequest", () => {
  it("reads ?after=, absent is 0, tail is tail", () => {
    expect(afterOfRequest(req(), url())).toBe(0);
    expect(afterOfRequest(req(), url("?after="))).toBe(0);
    expect(afterOfRequest(req(), url("?after=41"))).toBe(41);
    expect(afterOfRequest(req(), url("?after=tail"))).toBe("tail");
  });

  it("Last-Event-ID wins over ?after=", () => {
    expect(afterOfRequest(req({ "last-event-id": " 7 " }), url("?after=3"))).toBe(7);
    expect(afterOfRequest(req({ "last-event-id": "" }), url("?after=3"))).toBe(3);
  });

  it("refuses malformed positions with EINVAL naming the source", () => {
    expect(() => afterOfRequest(req(), url("?after=-1"))).toThrow(
      expect.objectContaining({ code: "EINVAL", message: expect.stringMatching(/^after /) }),
    );
    expect(() => afterOfRequest(req({ "last-event-id": "x1" }), url())).toThrow(
      expect.objectContaining({
        code: "EINVAL",
        message: expect.stringMatching(/^Last-Event-ID /),
      }),
    );
  });
});

function depsWith(limits: Partial<ServerDeps["limits"]> = {}, heartbeats = true): ServerDeps {
  return {
    computer: undefined as unknown as ServerDeps["computer"],
    workspace: "/nonexistent",
    metrics: createMetrics(),
    limits: { ...DEFAULT_LIMITS, ...limits },
    encoders: new FrameEncoders(),
    heartbeats,
    subscriptions: { count: 0 },
    isClosing: () => false,
  };
}

/** A handle whose subscribe() records its options, or rejects with `refuse`. */
function fakeHandle(refuse?: ComputerError): ExecHandle & { seen: EventsOptions[] } {
  const seen: EventsOptions[] = [];
  const events = () => new ReadableStream<ExecEvent>({ start: (c) => c.close() });
  return {
    id: "r1",
    seen,
    events,
    subscribe: async (options = {}) => {
      seen.push(options);
      if (refuse) throw refuse;
      return events();
    },
    result: () => Promise.reject(new ComputerError("ENOENT", "n/a")),
    info: () => Promise.reject(new ComputerError("ENOENT", "n/a")),
    kill: async () => {},
    write: async () => {},
    end: async () => {},
    resize: async () => {},
    screen: () => Promise.reject(new ComputerError("EINVAL", "n/a")),
  };
}

const open = (deps: ServerDeps, handle: ExecHandle, heartbeats = true) =>
  openSubscription(deps, handle, {
    after: 3,
    heartbeats,
    signal: new AbortController().signal,
    transport: "ndjson",
  });

describe("openSubscription", () => {
  it("opens with the start position and holds one slot until released, once", async () => {
    const deps = depsWith();
    const handle = fakeHandle();
    const sub = await open(deps, handle);
    expect(handle.seen[0]).toMatchObject({ after: 3, heartbeats: true });
    expect(deps.subscriptions.count).toBe(1);
    sub.release();
    sub.release();
    expect(deps.subscriptions.count).toBe(0);
  });

  it("refuses past maxSubscribers with ELIMIT, before asking the handle", async () => {
    const deps = depsWith({ maxSubscribers: 1 });
    const handle = fakeHandle();
    await open(deps, handle);
    await expect(open(deps, handle)).rejects.toMatchObject({ code: "ELIMIT", status: 429 });
    expect(handle.seen.length).toBe(1);
    expect(deps.subscriptions.count).toBe(1);
  });

  it("a refused start takes no slot and keeps the handle's error", async () => {
    const deps = depsWith();
    const refusal = new ComputerError("ELOG_TRUNCATED", "dropped", { earliestSeq: 9 });
    await expect(open(deps, fakeHandle(refusal))).rejects.toBe(refusal);
    expect(deps.subscriptions.count).toBe(0);
  });

  it("heartbeats only when both the server and the subscriber want them", async () => {
    const off = fakeHandle();
    (await open(depsWith({}, false), off)).release();
    expect(off.seen[0]?.heartbeats).toBe(false);
    const declined = fakeHandle();
    (await open(depsWith(), declined, false)).release();
    expect(declined.seen[0]?.heartbeats).toBe(false);
  });
});
