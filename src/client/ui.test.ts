// UiClient.events() over a scripted fetch: the resume loop's budget and
// policies as the UI client applies them (the relay end to end is covered by
// test/ui-relay.test.ts).

import { describe, expect, it } from "vitest";
import { UiClient } from "./ui.js";

type Answer = Response | Error;

function client(script: Answer[], resume = { maxRetries: 2, initialDelayMs: 1, maxDelayMs: 2 }) {
  const urls: string[] = [];
  const f = (async (input: RequestInfo | URL) => {
    urls.push(String(input).replace(/^.*\/v1\/ui\/c/, ""));
    const a = script.shift() ?? new TypeError("fetch failed");
    if (a instanceof Error) throw a;
    return a;
  }) as typeof fetch;
  return { ui: new UiClient({ url: "http://relay.test", channel: "c", fetch: f, resume }), urls };
}

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
const ev = (seq: number) => ({ type: "X:click", widgetId: "w1", seq });

async function collect(it: AsyncIterable<{ seq: number }>) {
  const seqs: number[] = [];
  try {
    for await (const e of it) seqs.push(e.seq);
    return { seqs, error: undefined };
  } catch (error) {
    return { seqs, error };
  }
}

describe("UiClient.events", () => {
  it("stops after maxRetries consecutive failures instead of retrying forever", async () => {
    const { ui, urls } = client([json(200, { events: [ev(1)], cursor: 1, done: false })]);
    const r = await collect(ui.events({ waitMs: 10 }));
    expect(r.seqs).toEqual([1]);
    expect(r.error).toMatchObject({ code: "ENETWORK" });
    expect(urls).toEqual([
      "/events?after=0&wait=10",
      "/events?after=1&wait=10", // fails, then 2 retries
      "/events?after=1&wait=10",
      "/events?after=1&wait=10",
    ]);
  });

  it("resumes after the last seq, retries a shutting-down server, and ends when the channel is done", async () => {
    const { ui, urls } = client([
      json(200, { events: [ev(1), ev(2)], cursor: 2, done: false }),
      json(503, { error: { code: "EUNAVAILABLE", message: "shutting down" } }),
      json(200, { events: [ev(2), ev(3)], cursor: 3, done: false }), // an overlap is dropped
      json(200, { events: [], cursor: 3, done: true }),
    ]);
    expect(await collect(ui.events({ waitMs: 10 }))).toEqual({ seqs: [1, 2, 3], error: undefined });
    expect(urls.at(-1)).toBe("/events?after=3&wait=10");
  });

  it("pins 'tail' once, surfaces truncation with earliestSeq, and ends quietly when aborted", async () => {
    const t = client([
      json(200, { events: [], cursor: 7, done: false }),
      json(410, { error: { code: "ELOG_TRUNCATED", message: "dropped", earliestSeq: 9 } }),
    ]);
    const r = await collect(t.ui.events({ after: "tail", waitMs: 10 }));
    expect(t.urls).toEqual(["/events?after=tail", "/events?after=7&wait=10"]);
    expect(r.error).toMatchObject({ code: "ELOG_TRUNCATED", earliestSeq: 9 });

    const a = client([]);
    expect(await collect(a.ui.events({ signal: AbortSignal.abort() }))).toEqual({
      seqs: [],
      error: undefined,
    });
  });
});
