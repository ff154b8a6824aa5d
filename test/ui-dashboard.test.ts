// The dashboard's server side without a browser: the token handshake on `/`,
// the asset routes (the built page files only, with their caching headers),
// and the driver that publishes the computer's state to the `dashboard`
// channel and turns UI events into kills and execs. The browser suite covers
// the page itself. The page's code is served from dist/dashboard-assets/
// even when the server runs from source, so the suite builds it when stale.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UiClient } from "../src/client/ui.js";
import type { ComputerServer } from "../src/server/app.js";
import { ensureDashboardBuilt } from "./support/dist.js";
import { type Harness, startServer } from "./support/server-harness.js";

let harness: Harness;
let server: ComputerServer;
let base: string;
let token: string;

beforeAll(async () => {
  ensureDashboardBuilt();
  harness = await startServer();
  ({ server, url: base, token } = harness);
}, 120_000);

afterAll(() => harness?.close());

interface State {
  component: string;
  params: Record<string, unknown>;
}

/** The dashboard channel's current state, as a page would rebuild it from a fresh poll. */
async function dashboardState(): Promise<Map<string, State>> {
  const res = await fetch(`${base}/v1/ui/dashboard/poll?after=0`, {
    headers: { authorization: `Bearer ${token}` },
  });
  const body = (await res.json()) as { commands: Record<string, unknown>[]; positions: number[] };
  const widgets = new Map<string, State>();
  body.commands.forEach((c, i) => {
    if (c.type === "render")
      widgets.set(`w${body.positions[i]}`, {
        component: c.component as string,
        params: { ...(c.params as object) },
      });
    else if (c.type === "update") {
      const w = widgets.get(c.widgetId as string);
      if (w) Object.assign(w.params, c.params);
    } else widgets.delete(c.widgetId as string);
  });
  return widgets;
}

async function until<T>(fn: () => Promise<T | undefined>, what: string): Promise<T> {
  const end = Date.now() + 15_000;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe("dashboard routes", () => {
  it("serves the shell openly, trades ?token= for a cookie, and refuses a wrong token with an explanation", async () => {
    const open = await fetch(`${base}/`);
    expect(open.status).toBe(200);
    expect(open.headers.get("content-security-policy")).toContain("script-src 'self'");
    const html = await open.text();
    expect(html).toContain("/assets/lib/server/dashboard/app.js");
    expect(html).not.toContain(token);

    const login = await fetch(`${base}/?token=${token}&transport=poll`, { redirect: "manual" });
    expect(login.status).toBe(303);
    expect(login.headers.get("location")).toBe("/?transport=poll");
    const cookie = login.headers.get("set-cookie")!;
    expect(cookie).toMatch(/HttpOnly/i);
    // the cookie alone now opens the data routes
    const withCookie = await fetch(`${base}/v1/ui/dashboard/poll?after=0`, {
      headers: { cookie: cookie.split(";")[0]! },
    });
    expect(withCookie.status).toBe(200);

    const bad = await fetch(`${base}/?token=nope`, { redirect: "manual" });
    expect(bad.status).toBe(401);
    expect(await bad.text()).toMatch(/token/);
    expect((await fetch(`${base}/v1/ui/dashboard/poll?after=0`)).status).toBe(401);
  });

  it("serves xterm and the page's modules, and nothing outside the whitelist", async () => {
    for (const path of [
      "/assets/xterm.js",
      "/assets/xterm.css",
      "/assets/lib/server/dashboard/app.css",
      "/assets/lib/aui/runtime.js",
      "/assets/lib/aui/connect.js",
      "/assets/lib/wire/sse.js",
      "/assets/lib/server/dashboard/app.js",
    ]) {
      const r = await fetch(`${base}${path}`);
      expect(r.status, path).toBe(200);
      expect(r.headers.get("content-type"), path).toMatch(
        path.endsWith(".css") ? /^text\/css/ : /^text\/javascript/,
      );
      const text = await r.text();
      expect(text.length, path).toBeGreaterThan(100);
      if (path.endsWith(".js")) expect(text, path).not.toMatch(/^\s*import type|: string\)/m); // plain JS
    }
    for (const path of [
      "/assets/lib/server/server.js",
      "/assets/lib/server/dashboard.js",
      "/assets/lib/aui/../server/auth.js",
      "/assets/lib/%2e%2e/package.json",
      "/assets/lib/%2e%2e/server/server.js",
      "/assets/package.json",
      "/assets/lib/runtime/computer.js",
      "/assets/lib/server/dashboard/app.ts",
    ]) {
      const r = await fetch(`${base}${path}`);
      expect(r.status, path).toBe(404);
    }
  });

  it("lets a browser keep the page's modules and revalidate them", async () => {
    const first = await fetch(`${base}/assets/lib/server/dashboard/app.js`);
    expect(first.headers.get("cache-control")).toBe("no-cache");
    const etag = first.headers.get("etag")!;
    expect(etag).toBeTruthy();
    const again = await fetch(`${base}/assets/lib/server/dashboard/app.js`, {
      headers: { "if-none-match": etag },
    });
    expect(again.status).toBe(304);
    expect(await again.text()).toBe("");
  });
});

describe("dashboard driver", () => {
  it("publishes executions as widgets and turns kill/run UI events into actions", async () => {
    const handle = await server.computer.exec("sleep 30");
    const term = await until(async () => {
      for (const [id, w] of await dashboardState()) {
        if (
          w.component === "Terminal" &&
          w.params.execId === handle.id &&
          w.params.state === "running"
        )
          return id;
      }
      return undefined;
    }, "a running Terminal widget");
    const table = [...(await dashboardState()).values()].find((w) => w.component === "ExecTable")!;
    expect(table.params.rows).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          id: handle.id,
          command: "sleep 30",
          state: "running",
          exitCode: null,
        }),
      ]),
    );

    const ui = new UiClient({ url: base, token, channel: "dashboard" });
    await ui.sendEvent({
      type: "Terminal:kill",
      widgetId: term,
      payload: { id: handle.id },
      timestamp: Date.now(),
    });
    const result = await handle.result();
    expect(result.status).toBe("killed");
    await until(
      async () =>
        (await dashboardState()).get(term)?.params.state === "killed" ? true : undefined,
      "killed state",
    );

    const form = [...(await dashboardState()).entries()].find(
      ([, w]) => w.component === "RunForm",
    )![0];
    await ui.sendEvent({
      type: "RunForm:run",
      widgetId: form,
      payload: { command: "echo from-form" },
      timestamp: Date.now(),
    });
    const ran = await until(
      async () => (await server.computer.list()).find((r) => r.command === "echo from-form"),
      "form exec",
    );
    expect(ran).toBeDefined();
    await ui.sendEvent({
      type: "RunForm:run",
      widgetId: form,
      payload: { command: "   " },
      timestamp: Date.now(),
    });
    await until(
      async () => ((await dashboardState()).get(form)?.params.error ? true : undefined),
      "form error",
    );
  });
});
