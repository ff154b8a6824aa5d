// The dashboard and the A@UI runtime in a real browser: Debian's Chromium
// driven by playwright-core, against a real server and real processes.
// One browser for the whole file (launching one costs seconds on 2 cores).
// Skips loudly when /usr/bin/chromium is missing (`apt-get install chromium`;
// .ci/run installs it). The page is watched as a user would: through the DOM
// it renders (data-* attributes, xterm's rows) and the network, with no hook
// into its code; the page's code is the built one (dist/dashboard-assets/),
// rebuilt here when stale.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UiClient } from "../src/client/ui.js";
import type { ComputerServer } from "../src/server/app.js";
import { haveChromium, launchChromium } from "./support/chromium.js";
import { ensureDashboardBuilt } from "./support/dist.js";
import { type Harness, startServer } from "./support/server-harness.js";

const haveChromiumHere = haveChromium("browser tests");

let server: ComputerServer;
let base: string;
let token: string;
let context: BrowserContext;
let harness: Harness | undefined;
let profile: string;
let probeMounted = false;

async function api(path: string, init: RequestInit = {}) {
  const res = await fetch(`${base}${path}`, {
    ...init,
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      ...(init.headers ?? {}),
    },
  });
  const body = res.status === 204 ? undefined : await res.json();
  if (!res.ok) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

/**
 * Waits until the terminal of `execId` shows text matching `pattern`. Only the
 * rows on screen are in the DOM (older ones scroll away), so patterns match
 * "this much output has arrived", not one early line.
 */
async function waitForScreen(page: Page, execId: string, pattern: RegExp): Promise<void> {
  await page.waitForFunction(
    ([id, source]) =>
      new RegExp(source!).test(
        document.querySelector(`.term[data-exec-id="${id}"] .xterm-rows`)?.textContent ?? "",
      ),
    [execId, pattern.source],
  );
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe.skipIf(!haveChromiumHere)("dashboard in Chromium", () => {
  beforeAll(async () => {
    ensureDashboardBuilt();
    profile = mkdtempSync(join(tmpdir(), "ac-chromium-"));
    harness = await startServer();
    ({ server, url: base, token } = harness);
    context = await launchChromium(profile, { width: 1280, height: 860 });
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await harness?.close();
    rmSync(profile, { recursive: true, force: true });
  });

  it("without the token the page gets nothing and says why", async () => {
    await context.clearCookies();
    const page = await context.newPage();
    const dataResponses: number[] = [];
    page.on("response", (r) => {
      if (r.url().includes("/v1/")) dataResponses.push(r.status());
    });
    await page.goto(`${base}/`);
    await page.locator("#notice:not([hidden])").waitFor();
    expect(await page.locator("#notice").textContent()).toMatch(/token/i);
    expect(await page.locator("#conn").getAttribute("data-state")).toBe("unauthorized");
    expect(await page.locator("#app > *").count()).toBe(0);
    expect(dataResponses.length).toBeGreaterThan(0);
    expect(dataResponses.every((s) => s === 401)).toBe(true);
    // a wrong token is refused with the same explanation
    const bad = await page.goto(`${base}/?token=wrong`);
    expect(bad?.status()).toBe(401);
    expect(await page.locator("#notice").textContent()).toMatch(/token/i);
    await page.close();
  });

  it("shows a command's coloured output live, kills it with a click, and runs one from the form", async () => {
    const page = await context.newPage();
    await page.goto(server.loginUrl);
    expect(new URL(page.url()).search).toBe(""); // token left the address bar (cookie now)
    await page.locator('#conn[data-state="open"]').waitFor();
    await page.locator('[data-component="RunForm"] input').waitFor();

    // Several commands running at once: the page must stay live with all of them
    // (a browser allows only 6 connections per host; terminals share one socket).
    const background: string[] = [];
    for (let n = 0; n < 7; n++) {
      const r = (await api("/v1/execs", {
        method: "POST",
        body: JSON.stringify({
          command: `for i in $(seq 1 200); do echo bg${n} tick $i; sleep 0.3; done`,
        }),
      })) as { id: string };
      background.push(r.id);
    }
    const script =
      "for i in $(seq 1 40); do printf '\\033[32mline %s ✓ grün\\033[0m \\033[1;31mred\\033[0m\\n' $i; sleep 0.25; done";
    const { id } = (await api("/v1/execs", {
      method: "POST",
      body: JSON.stringify({ command: script }),
    })) as { id: string };
    const term = page.locator(`.term[data-exec-id="${id}"]`);
    await term.waitFor();
    // lines arrive while it is still running (line 3 or later on screen)
    await waitForScreen(page, id, /line ([3-9]|\d{2,}) ✓ grün/);
    expect(await term.locator(".badge").getAttribute("data-state")).toBe("running");
    const rec = (await api(`/v1/execs/${id}`)) as { state: string; pid: number };
    expect(rec.state).toBe("running");
    // xterm rendered it as a terminal: green (ANSI 32 -> palette 2) and the Unicode text
    await term.locator(".xterm-rows span.xterm-fg-2").first().waitFor();
    // (only the visible rows are in the DOM; on a slow machine line 1 may have scrolled away)
    expect(await term.locator(".xterm-rows").textContent()).toMatch(/line \d+ ✓ grün/);
    // the execution list has it too
    const row = page.locator(`[data-component="ExecTable"] tr[data-exec-id="${id}"]`);
    await expect.poll(() => row.locator(".badge").getAttribute("data-state")).toBe("running");
    mkdirSync("artifacts", { recursive: true });
    await page.screenshot({ path: "artifacts/dashboard.png", fullPage: true });

    await term.locator('button[data-action="kill"]').click();
    await term.locator('.badge[data-state="killed"]').waitFor();
    await row.locator('.badge[data-state="killed"]').waitFor();
    const after = (await api(`/v1/execs/${id}`)) as { state: string };
    expect(after.state).toBe("killed");
    expect(alive(rec.pid)).toBe(false);
    expect(await term.locator('button[data-action="kill"]').isHidden()).toBe(true);

    // every background terminal streams too (tick 2 or later on screen)
    for (const [n, bgId] of background.entries()) {
      await waitForScreen(page, bgId, new RegExp(`bg${n} tick ([2-9]|\\d{2,})`));
    }
    for (const bgId of background)
      await api(`/v1/execs/${bgId}/kill`, { method: "POST", body: "{}" });

    // the form runs a command
    await page
      .locator('[data-component="RunForm"] input')
      .fill("printf 'from the form\\n'; printf '\\000\\001bin\\377ary\\n'");
    await page.locator('[data-component="RunForm"] input').press("Enter");
    const formTerm = page.locator(".term", { hasText: "from the form" });
    await formTerm.locator('.badge[data-state="exited"]').waitFor();
    // binary output shows as visible control pictures
    await formTerm.locator(".xterm-rows", { hasText: "␀␁bin" }).waitFor();
    await page.screenshot({ path: "artifacts/dashboard-after-kill.png", fullPage: true });
    await page.close();
  });

  describe.each(["sse", "websocket", "poll"] as const)("runtime over %s", (transport) => {
    beforeAll(async () => {
      // signed in as after opening the printed URL (the cookie), independent of test order
      await context.addCookies([{ name: server.router.auth.cookieName, value: token, url: base }]);
      if (!probeMounted) {
        probeMounted = true;
        server.router.get(
          "/probe/:channel/:transport",
          (_req, res, params) => {
            res.setHeader("content-type", "text/html; charset=utf-8");
            res.end(probeHtml(params.channel!, params.transport!));
          },
          { public: true },
        );
      }
    });
    it("render/update/destroy reach the DOM, and a page opened later shows the same state", async () => {
      const channel = `probe-${transport}`;
      const ui = new UiClient({ url: base, token, channel });
      const open = async () => {
        const page = await context.newPage();
        // Served by the real server (a routed page would be "public" to Chromium's
        // local-network checks and could not open a WebSocket to loopback).
        await page.goto(`${base}/probe/${channel}/${transport}`);
        await page.waitForFunction(
          () => (globalThis as { probeState?: string }).probeState === "open",
        );
        return page;
      };
      const text = (page: Page) => page.locator("#app").evaluate((el) => el.innerHTML);
      const p1 = await open();
      const a = await ui.render("Label", { text: "alpha" });
      const b = await ui.render("Label", { text: "beta" });
      await ui.update(a.widgetId, { text: "alpha 2" });
      await p1.locator(`[data-widget-id="${a.widgetId}"]`, { hasText: "alpha 2" }).waitFor();
      await p1.locator(`[data-widget-id="${b.widgetId}"]`, { hasText: "beta" }).waitFor();
      await ui.destroy(b.widgetId);
      await p1.locator(`[data-widget-id="${b.widgetId}"]`).waitFor({ state: "detached" });
      // a click in the page comes back to the agent as a UI event
      await p1.locator(`[data-widget-id="${a.widgetId}"] button`).click();
      for await (const ev of ui.events({ waitMs: 2000 })) {
        if (ev.type === "Label:click") {
          expect(ev).toMatchObject({ widgetId: a.widgetId, payload: { text: "alpha 2" } });
          break;
        }
      }
      const p2 = await open();
      await p2.locator(`[data-widget-id="${a.widgetId}"]`, { hasText: "alpha 2" }).waitFor();
      expect(await text(p2)).toBe(await text(p1));
      await p1.close();
      await p2.close();
    });
  });
});

/** A minimal page on the server's origin using the served runtime modules. */
function probeHtml(channel: string, transport: string): string {
  return `<!doctype html><meta charset="utf-8"><main id="app"></main>
<script type="module">
import { createAAtUIRuntime, relayWidgetId } from "/assets/lib/aui/runtime.js";
import { connectAAtUI } from "/assets/lib/aui/connect.js";
const manifest = { specVersion: "1.0", library: "probe", components: [
  { name: "Label", description: "text", params: { type: "object" }, events: [{ name: "click" }],
    lifecycle: { render: true, update: true, destroy: true } } ] };
const Label = { mount(el, props, emit) {
  const span = document.createElement("span"); const btn = document.createElement("button");
  btn.textContent = "click"; el.append(span, btn);
  let current = props;
  btn.onclick = () => emit({ type: "Label:click", payload: { text: current.text } });
  span.textContent = props.text;
  return { update(p) { current = p; span.textContent = p.text; }, destroy() {} };
} };
let conn;
const rt = createAAtUIRuntime({ manifest, components: { Label }, mountTarget: "#app",
  createWidgetId: relayWidgetId, onEvent: (e) => conn.send(e) });
conn = connectAAtUI("/v1/ui/${channel}", rt, { transport: "${transport}",
  onState: (s) => { globalThis.probeState = s; } });
</script>`;
}
