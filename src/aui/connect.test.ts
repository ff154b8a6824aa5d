// connectAAtUI's policies over a scripted fetch (poll transport): what a page
// reports, which state it shows, and how it resumes. The transports against a
// real relay are covered by test/ui-relay.test.ts.

import { describe, expect, it } from "vitest";
import { type ConnectionState, connectAAtUI, type TransportError } from "./connect.js";
import type { AAtUIRuntime } from "./runtime.js";

type Answer = Response | Error | "hang";

/** A fetch answering poll requests from a script (then hanging until aborted); records the URLs. */
function scriptedFetch(script: Answer[]) {
  const urls: string[] = [];
  const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
    urls.push(String(input).replace(/^.*\/v1\/ui\/c/, ""));
    const a = script.shift() ?? "hang";
    if (a instanceof Error) throw a;
    if (a === "hang")
      return new Promise<Response>((_r, reject) =>
        init?.signal?.addEventListener("abort", () => reject(new Error("aborted")), {
          once: true,
        }),
      );
    return a;
  }) as typeof fetch;
  return { f, urls };
}

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
const render = { type: "render", component: "X", params: {} };

function fakeRuntime() {
  const log: string[] = [];
  const rt = {
    dispatch(_c: unknown, meta?: { position?: number }) {
      log.push(`dispatch ${meta?.position}`);
      return undefined;
    },
    reset() {
      log.push("reset");
    },
  } as unknown as AAtUIRuntime;
  return { rt, log };
}

async function until(cond: () => boolean) {
  const end = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 5));
  }
}

function connect(script: Answer[], after?: number) {
  const { f, urls } = scriptedFetch(script);
  const { rt, log } = fakeRuntime();
  const states: ConnectionState[] = [];
  const errors: TransportError[] = [];
  const conn = connectAAtUI("http://relay.test/v1/ui/c", rt, {
    transport: "poll",
    fetch: f,
    after,
    minRetryMs: 1,
    maxRetryMs: 2,
    onState: (s) => states.push(s),
    onError: (e) => errors.push(e),
  });
  return { conn, urls, log, states, errors };
}

describe("connectAAtUI", () => {
  it("410: resets the runtime and replays the channel from 0, without an error or a reconnecting state", async () => {
    const c = connect(
      [
        json(410, { error: { code: "ELOG_TRUNCATED", message: "gone", earliestSeq: 0 } }),
        json(200, { commands: [render], positions: [1], cursor: 1, done: false }),
      ],
      5,
    );
    await until(() => c.conn.cursor === 1);
    expect(c.log).toEqual(["reset", "dispatch 1"]);
    expect(c.urls.slice(0, 3)).toEqual([
      "/poll?after=5&wait=0",
      "/poll?after=0&wait=0",
      "/poll?after=1&wait=25000",
    ]);
    expect(c.states).toEqual(["open"]);
    expect(c.errors).toEqual([]);
    c.conn.close();
    expect(await c.conn.closed).toBe("closed");
  });

  it("401 is final: state unauthorized with the server's reason and status", async () => {
    const c = connect([json(401, { error: { code: "EUNAUTHORIZED", message: "bad token" } })]);
    expect(await c.conn.closed).toBe("unauthorized");
    expect(c.errors).toEqual([
      { source: "transport", code: "EUNAUTHORIZED", message: "bad token", status: 401 },
    ]);
    expect(c.urls).toHaveLength(1);
  });

  it("other failures are reported (with a status only when one was received) and retried", async () => {
    const c = connect([
      new TypeError("fetch failed"),
      new Response("<html>bad gateway</html>", { status: 502 }),
      json(200, { commands: [render], positions: [1], cursor: 1, done: true }),
    ]);
    expect(await c.conn.closed).toBe("done");
    expect(c.errors).toEqual([
      { source: "transport", code: "ENETWORK", message: "fetch failed" },
      { source: "transport", code: "ENETWORK", message: "HTTP 502", status: 502 },
    ]);
    expect(c.states).toEqual(["reconnecting", "open", "done"]);
    expect(c.log).toEqual(["dispatch 1"]);
  });
});
