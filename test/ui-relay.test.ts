// The A@UI relay through real sockets (the channel's own rules, compaction
// and bounds, are tested beside it in src/server/relay/channel.test.ts): each
// transport feeding a real runtime (in a happy-dom Window), reconnects
// that neither repeat nor skip, late pages seeing the same state, UI events
// back to the agent (resumable), and auth.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Window } from "happy-dom";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type AAtUITransport, connectAAtUI, type WebSocketCtor } from "../src/aui/connect.js";
import { type AAtUIComponent, createAAtUIRuntime, relayWidgetId } from "../src/aui/runtime.js";
import type { Manifest, UiEvent } from "../src/aui/types.js";
import { UiClient } from "../src/client/ui.js";
import { Auth } from "../src/server/http/auth.js";
import { Router } from "../src/server/http/router.js";
import type { UiRelay } from "../src/server/relay/registry.js";
import { registerUiRoutes } from "../src/server/relay/routes.js";

const TOKEN = "t0ken-for-tests-0123";
let server: Server;
/** Pages connect to a second listener on the same router, so a "network drop" can cut them alone. */
let pageServer: Server;
let base: string;
let pageBase: string;
/** Upgraded sockets leave the http server's books: cut them ourselves. */
const pageSockets = new Set<import("node:stream").Duplex>();
function cutPages() {
  pageServer.closeAllConnections();
  for (const s of pageSockets) s.destroy();
  pageSockets.clear();
}
let relay: UiRelay;
beforeAll(async () => {
  const router = new Router({ auth: new Auth({ token: TOKEN }) });
  relay = registerUiRoutes(router, { limits: { heartbeatMs: 200 } });
  server = createServer(router.handle);
  server.on("upgrade", router.handleUpgrade);
  pageServer = createServer(router.handle);
  pageServer.on("upgrade", router.handleUpgrade);
  pageServer.on("upgrade", (_req, socket) => pageSockets.add(socket));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  await new Promise<void>((r) => pageServer.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  pageBase = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}`;
});

afterAll(async () => {
  relay.close();
  server.closeAllConnections();
  pageServer.closeAllConnections();
  await new Promise((r) => server.close(r));
  await new Promise((r) => pageServer.close(r));
});

const manifest: Manifest = {
  specVersion: "1.0",
  library: "test",
  components: [
    {
      name: "Label",
      description: "text",
      params: { type: "object" },
      events: [{ name: "click" }],
      lifecycle: { render: true, update: true, destroy: true },
    },
  ],
};

/** A page: a happy-dom document, a runtime with relay ids, and a log of dispatched positions. */
function page(transport: AAtUITransport, channel: string, token: string = TOKEN) {
  const window = new Window();
  const root = window.document.createElement("main") as unknown as HTMLElement;
  window.document.body.append(root as never);
  const positions: number[] = [];
  const emits: ((e: { type: string; payload?: unknown }) => void)[] = [];
  const Label: AAtUIComponent = {
    mount(el, props, emit) {
      emits.push(emit);
      el.textContent = String(props.text);
      return {
        update(p) {
          el.textContent = String(p.text);
        },
        destroy() {},
      };
    },
  };
  let conn: ReturnType<typeof connectAAtUI> | undefined;
  const errors: unknown[] = [];
  const rt = createAAtUIRuntime({
    manifest,
    components: { Label },
    mountTarget: root,
    createWidgetId: relayWidgetId,
    onEvent: (e: UiEvent) => void conn?.send(e),
    onError: (e) => errors.push(e),
  });
  const dispatch = rt.dispatch;
  rt.dispatch = (c, meta) => {
    if (typeof meta?.position === "number") positions.push(meta.position);
    return dispatch(c, meta);
  };
  const ac = new AbortController();
  const states: string[] = [];
  conn = connectAAtUI(`${pageBase}/v1/ui/${channel}`, rt, {
    transport,
    token: token || undefined,
    signal: ac.signal,
    WebSocket: WebSocket as unknown as WebSocketCtor,
    pollWaitMs: 2000,
    onState: (s) => states.push(s),
  });
  const text = () =>
    [...root.querySelectorAll("[data-widget-id]")]
      .map((el) => `${el.getAttribute("data-widget-id")}=${el.textContent}`)
      .join(",");
  return { rt, root, conn, positions, emits, errors, states, text, close: () => ac.abort() };
}

async function until(cond: () => boolean, what: string, ms = 10_000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe.each(["sse", "websocket", "poll"] as const)("over %s", (transport) => {
  it("render/update/destroy reach the DOM; a later page shows the same state; events flow back", async () => {
    const channel = `flow-${transport}`;
    const ui = new UiClient({ url: base, token: TOKEN, channel });
    const p1 = page(transport, channel);
    await until(() => p1.states.includes("open"), "open");
    const a = await ui.render("Label", { text: "hello" });
    const b = await ui.render("Label", { text: "other" });
    await ui.update(a.widgetId, { text: "hello, world" });
    await until(
      () => p1.text() === `${a.widgetId}=hello, world,${b.widgetId}=other`,
      "render+update",
    );
    await ui.destroy(b.widgetId);
    await until(() => p1.text() === `${a.widgetId}=hello, world`, "destroy");

    const p2 = page(transport, channel);
    await until(() => p2.text() === p1.text(), "late page state");

    p1.emits[0]!({ type: "Label:click", payload: { n: 1 } });
    const seen: UiEvent[] = [];
    const ac = new AbortController();
    for await (const ev of ui.events({ signal: ac.signal, waitMs: 1000 })) {
      seen.push(ev);
      if (ev.type === "Label:click") break;
    }
    expect(seen.filter((e) => e.type === "aui:widget-ready").map((e) => e.widgetId)).toContain(
      a.widgetId,
    );
    expect(seen.at(-1)).toMatchObject({
      type: "Label:click",
      widgetId: a.widgetId,
      payload: { n: 1 },
    });
    // resumable: after the last seq we saw, only newer events come
    const last = (seen.at(-1) as UiEvent & { seq: number }).seq;
    p1.emits[0]!({ type: "Label:click", payload: { n: 2 } });
    for await (const ev of ui.events({ after: last, waitMs: 1000 })) {
      expect(ev.seq).toBeGreaterThan(last); // resumed: nothing at or before `last` again
      if (ev.type !== "Label:click") continue; // e.g. the late page's widget-ready
      expect(ev).toMatchObject({ type: "Label:click", payload: { n: 2 } });
      break;
    }
    expect(p1.errors).toEqual([]);
    p1.close();
    p2.close();
    await p1.conn.closed;
  });

  it("reconnects after the connection is cut and neither repeats nor skips a command", async () => {
    const channel = `resume-${transport}`;
    const ui = new UiClient({ url: base, token: TOKEN, channel });
    const p = page(transport, channel);
    await until(() => p.states.includes("open"), "open");
    const { widgetId } = await ui.render("Label", { text: "0" });
    for (let i = 1; i <= 60; i++) {
      await ui.update(widgetId, { text: String(i) });
      if (i % 15 === 0) {
        await until(() => p.conn.cursor === i + 1, `cursor ${i + 1}`);
        cutPages(); // cut every page's stream/socket mid-flight
      }
    }
    await until(() => p.text() === `${widgetId}=60`, "final state");
    // every position dispatched once, in order, none missing (the channel had no compaction gaps live)
    expect(p.positions).toEqual(Array.from({ length: 61 }, (_, i) => i + 1));
    expect(p.states.filter((s) => s === "reconnecting").length).toBeGreaterThanOrEqual(1);
    p.close();
  });

  it("without a token the page is refused and says why", async () => {
    const p = page(transport, "secret", "");
    const state = await p.conn.closed;
    expect(state).toBe("unauthorized");
  });
});

describe("relay HTTP", () => {
  it("cuts an SSE page whose replay alone overflows its buffer bound, and forgets its subscription", async () => {
    const router = new Router({ auth: new Auth({ token: TOKEN }) });
    const r = registerUiRoutes(router, { limits: { maxSubscriberBuffer: 1024 } });
    const s = createServer(router.handle);
    await new Promise<void>((done) => s.listen(0, "127.0.0.1", done));
    try {
      const big = "x".repeat(64 * 1024);
      for (let i = 0; i < 100; i++)
        r.publish("big", { type: "render", component: "Label", params: { text: big } });
      const port = (s.address() as AddressInfo).port;
      const res = await fetch(`http://127.0.0.1:${port}/v1/ui/big/stream`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(res.status).toBe(200);
      await expect(res.text()).rejects.toThrow(); // cut, not ended
      expect(r.channel("big").subscriberCount).toBe(0);
    } finally {
      r.close();
      s.closeAllConnections();
      await new Promise((done) => s.close(done));
    }
  });

  it("answers 400 with the reason for an invalid command and 401 without token", async () => {
    const r = await fetch(`${base}/v1/ui/x/commands`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ type: "render", component: "" }),
    });
    expect(r.status).toBe(400);
    expect((await r.json()).error.code).toBe("EINVAL");
    const u = await fetch(`${base}/v1/ui/x/stream`);
    expect(u.status).toBe(401);
  });

  it("a resume from a cursor the channel no longer holds is 410, and the page starts over from the snapshot", async () => {
    const r = await fetch(`${base}/v1/ui/x/poll?after=999`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(r.status).toBe(410);
    expect((await r.json()).error.code).toBe("ELOG_TRUNCATED");
    const ui = new UiClient({ url: base, token: TOKEN, channel: "restart" });
    const { widgetId } = await ui.render("Label", { text: "snap" });
    const window = new Window();
    const root = window.document.createElement("div") as unknown as HTMLElement;
    const rt = createAAtUIRuntime({
      manifest,
      components: {
        Label: {
          mount(el, p) {
            el.textContent = String(p.text);
            return { update() {}, destroy() {} };
          },
        },
      },
      mountTarget: root,
      createWidgetId: relayWidgetId,
      onEvent: () => {},
    });
    const ac = new AbortController();
    connectAAtUI(`${base}/v1/ui/restart`, rt, {
      transport: "poll",
      token: TOKEN,
      after: 500,
      signal: ac.signal,
    });
    await until(() => rt.widgets().has(widgetId), "snapshot after 410");
    ac.abort();
  });
});

describe("ending a channel vs shutting down", () => {
  it.each(["sse", "websocket", "poll"] as const)(
    "over %s: DELETE ends pages with [DONE]; a relay shutdown makes them reconnect",
    async (transport) => {
      const ui = new UiClient({ url: base, token: TOKEN, channel: `end-${transport}` });
      await ui.render("Label", { text: "x" });
      const p = page(transport, `end-${transport}`);
      await until(() => p.states.includes("open"), "open");
      await ui.closeChannel();
      expect(await p.conn.closed).toBe("done");

      // a separate relay+server, shut down under a connected page
      const router = new Router({ auth: new Auth({ token: TOKEN }) });
      const r2 = registerUiRoutes(router);
      const s2 = createServer(router.handle);
      s2.on("upgrade", router.handleUpgrade);
      await new Promise<void>((r) => s2.listen(0, "127.0.0.1", r));
      const url2 = `http://127.0.0.1:${(s2.address() as AddressInfo).port}/v1/ui/c`;
      r2.publish("c", { type: "render", component: "Label", params: { text: "y" } });
      const window = new Window();
      const root = window.document.createElement("div") as unknown as HTMLElement;
      const rt = createAAtUIRuntime({
        manifest,
        components: {
          Label: {
            mount() {
              return { update() {}, destroy() {} };
            },
          },
        },
        mountTarget: root,
        createWidgetId: relayWidgetId,
        onEvent: () => {},
      });
      const states: string[] = [];
      const ac = new AbortController();
      const conn = connectAAtUI(url2, rt, {
        transport,
        token: TOKEN,
        signal: ac.signal,
        WebSocket: WebSocket as unknown as WebSocketCtor,
        pollWaitMs: 2000,
        onState: (s) => states.push(s),
      });
      await until(() => rt.widgets().size === 1, "state from the second relay");
      // what server.close() does: the relay first, then the listener goes away
      r2.close();
      const closed = new Promise((r) => s2.close(r));
      s2.closeAllConnections();
      await closed;
      await until(() => states.includes("reconnecting"), "reconnecting after shutdown");
      expect(states).not.toContain("done");
      ac.abort();
      await conn.closed;
    },
  );
});
