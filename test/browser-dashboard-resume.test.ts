// The dashboard's terminals resume in a real browser: while a command prints,
// the page's shared WebSocket (/v1/ws) is cut three times; each terminal's
// resume loop reopens it and resumes after its last seq, so the terminal shows
// every line exactly once, in order, and the exit. Skips loudly without
// Chromium, like test/browser-dashboard.test.ts.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Duplex } from "node:stream";
import { describe, expect, it } from "vitest";
import { haveChromium, launchChromium } from "./support/chromium.js";
import { startServer } from "./support/server-harness.js";

describe.skipIf(!haveChromium("browser tests"))("dashboard terminals in Chromium", () => {
  it("resume after their WebSocket is cut: every line once, in order, then the exit", async () => {
    const profile = mkdtempSync(join(tmpdir(), "ac-chromium-"));
    const h = await startServer();
    // Upgraded sockets leave the http server's books: keep them to cut them.
    const sockets = new Set<Duplex>();
    h.server.httpServer.on("upgrade", (req, socket) => {
      if (req.url?.startsWith("/v1/ws")) sockets.add(socket);
    });
    const context = await launchChromium(profile);
    try {
      const page = await context.newPage();
      await page.goto(`${h.url}/?token=${h.token}`);
      await page.locator("#conn[data-state=open]").waitFor();
      // 12 lines fit the terminal's 15 rows, so what the page shows is the
      // whole output, read from xterm's rendered rows as a person sees them.
      const LINES = 12;
      const handle = await h.client.exec(
        `for i in $(seq 1 ${LINES}); do echo line-$i; sleep 0.3; done`,
        { encoding: "utf8" },
      );
      const text = () =>
        page.evaluate(
          (id) =>
            [...(document.querySelector(`.term[data-exec-id="${id}"] .xterm-rows`)?.children ?? [])]
              .map((row) => (row.textContent ?? "").replace(/\u00a0/g, " ").trimEnd())
              .join("\n"),
          handle.id,
        );
      await expect.poll(text, { timeout: 20_000 }).toContain("line-2\n");
      let cuts = 0;
      for (let k = 0; k < 3; k++) {
        cuts += sockets.size;
        for (const s of sockets) s.destroy();
        sockets.clear();
        await new Promise((r) => setTimeout(r, 600));
      }
      expect(cuts).toBeGreaterThanOrEqual(3);
      await expect.poll(text, { timeout: 30_000 }).toContain("exited with code 0");
      const lines = (await text()).split(/\r?\n/).filter((l) => l.startsWith("line-"));
      expect(lines).toEqual(Array.from({ length: LINES }, (_, i) => `line-${i + 1}`));
    } finally {
      await context.close();
      await h.close();
      rmSync(profile, { recursive: true, force: true });
    }
  }, 90_000);
});
