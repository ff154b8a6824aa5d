// The dashboard's interactive terminals in a real browser (Debian's Chromium
// through playwright-core, the built page from dist/dashboard-assets/): "New
// terminal" opens a shell on a pty, typing and Ctrl-C reach it, the pty takes
// the pane's size, and a reload or a second page reattaches to the same live
// terminal from its screen snapshot. A non-pty execution stays read-only.
// Skips loudly when /usr/bin/chromium is missing.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { haveChromium, launchChromium } from "./support/chromium.js";
import { ensureDashboardBuilt } from "./support/dist.js";
import { type Harness, startServer } from "./support/server-harness.js";

const haveChromiumHere = haveChromium("dashboard terminal tests");

let harness: Harness;
let context: BrowserContext;
let profile: string;

function screenText(page: Page, execId: string): Promise<string> {
  return page
    .locator(`.term[data-exec-id="${execId}"] .xterm-rows`)
    .textContent()
    .then((t) => t ?? "");
}

async function waitForScreen(page: Page, execId: string, pattern: RegExp): Promise<void> {
  await page.waitForFunction(
    ([id, source]) =>
      new RegExp(source!).test(
        document.querySelector(`.term[data-exec-id="${id}"] .xterm-rows`)?.textContent ?? "",
      ),
    [execId, pattern.source],
    { timeout: 20_000 },
  );
}

describe.skipIf(!haveChromiumHere)("dashboard terminals in Chromium", () => {
  beforeAll(async () => {
    ensureDashboardBuilt();
    profile = mkdtempSync(join(tmpdir(), "ac-chromium-pty-"));
    harness = await startServer({
      computer: {
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", SHELL: "/bin/bash", PS1: "pty$ " },
      },
    });
    context = await launchChromium(profile, { width: 1280, height: 900 });
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await harness?.close();
    rmSync(profile, { recursive: true, force: true });
  });

  it("opens a shell with New terminal; typing, Ctrl-C and resize reach it; a reload reattaches", async () => {
    const page = await context.newPage();
    await page.goto(harness.server.loginUrl);
    await page.locator('#conn[data-state="open"]').waitFor();
    await page.locator('[data-component="RunForm"] [data-action="terminal"]').click();
    const term = page.locator('.term[data-pty="true"]');
    await term.waitFor();
    const execId = (await term.getAttribute("data-exec-id"))!;
    await waitForScreen(page, execId, /[$#]/);

    await term.locator(".xterm").click();
    await page.keyboard.type("echo typed-$((6*7))");
    await page.keyboard.press("Enter");
    await waitForScreen(page, execId, /typed-42/);

    // Ctrl-C interrupts the foreground job; the shell lives on.
    await page.keyboard.type("sleep 30; echo not-interrupted");
    await page.keyboard.press("Enter");
    await page.waitForTimeout(500);
    await page.keyboard.press("Control+c");
    await page.keyboard.type("echo alive-$((40+2))");
    await page.keyboard.press("Enter");
    await waitForScreen(page, execId, /alive-42/);
    expect(await screenText(page, execId)).not.toMatch(/\$ not-interrupted|^not-interrupted/m);

    // Paste goes in as typed text.
    await page.evaluate(() => {
      const ta = document.querySelector(".term[data-pty] textarea") as HTMLTextAreaElement;
      const dt = new DataTransfer();
      dt.setData("text/plain", "echo pasted-ok");
      ta.dispatchEvent(new ClipboardEvent("paste", { clipboardData: dt, bubbles: true }));
    });
    // (bash's bracketed paste inserts the text; Enter runs it)
    await page.keyboard.press("Enter");
    await waitForScreen(page, execId, /pasted-ok.*pasted-ok/);

    // The pty has the pane's size (addon-fit), not the initial 100x24.
    const rec = (await (await harness.client.get(execId)).info()).pty!;
    const xtermSize = await page.evaluate(() => {
      const rows = document.querySelectorAll(".term[data-pty] .xterm-rows > div").length;
      return rows;
    });
    expect(rec.rows).toBe(xtermSize);
    expect(`${rec.cols}x${rec.rows}`).not.toBe("100x24");
    await page.keyboard.type("stty size");
    await page.keyboard.press("Enter");
    await waitForScreen(page, execId, new RegExp(`${rec.rows} ${rec.cols}`));

    // A reload and a second page reattach to the same live shell, from the snapshot.
    await page.reload();
    await page.locator('#conn[data-state="open"]').waitFor();
    await waitForScreen(page, execId, /alive-42/);
    const second = await context.newPage();
    await second.goto(`${new URL(harness.server.loginUrl).origin}/`);
    await waitForScreen(second, execId, /alive-42/);
    await page.locator(`.term[data-exec-id="${execId}"] .xterm`).click();
    await page.keyboard.type("echo again-$((1+1))");
    await page.keyboard.press("Enter");
    await waitForScreen(page, execId, /again-2/);
    await waitForScreen(second, execId, /again-2/);
    expect((await (await harness.client.get(execId)).info()).state).toBe("running");
    await (await harness.client.get(execId)).kill("SIGKILL");
    await second.close();
    await page.close();
  });

  it("keeps non-pty executions read-only", async () => {
    const handle = await harness.client.exec("echo read-only; sleep 20", { stdin: "pipe" });
    const page = await context.newPage();
    const sent: string[] = [];
    page.on("websocket", (ws) => ws.on("framesent", (f) => sent.push(String(f.payload))));
    await page.goto(harness.server.loginUrl);
    const term = page.locator(`.term[data-exec-id="${handle.id}"]`);
    await term.waitFor();
    await waitForScreen(page, handle.id, /read-only/);
    expect(await term.getAttribute("data-pty")).toBeNull();
    await term.locator(".xterm").click();
    await page.keyboard.type("typed-into-a-viewer");
    await page.waitForTimeout(300);
    expect(await screenText(page, handle.id)).not.toContain("typed-into-a-viewer");
    expect(sent.filter((m) => m.includes(handle.id) && /"(stdin|resize)"/.test(m))).toEqual([]);
    await handle.kill("SIGKILL");
    await page.close();
  });
});
