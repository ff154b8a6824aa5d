// The real browser the browser tests drive (playwright-core over the Debian
// `chromium` package that .ci/run installs), launched the same way everywhere:
// headless, no sandbox (CI runs as root), nothing that phones home. Tests
// skip loudly when the binary is missing rather than failing obscurely.

import { existsSync } from "node:fs";
import { type BrowserContext, chromium } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";

export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

/** True when Chromium is installed; otherwise warns once, naming `what` is skipped. */
export function haveChromium(what: string): boolean {
  if (existsSync(CHROMIUM)) return true;
  console.warn(
    `\n*** SKIPPING ${what}: ${CHROMIUM} not found. Install it with \`apt-get install chromium\` (.ci/run does). ***\n`,
  );
  return false;
}

/** A headless Chromium with its profile in `profile` (a fresh temporary folder). */
export function launchChromium(
  profile: string,
  viewport?: { width: number; height: number },
): Promise<BrowserContext> {
  return chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    ...(viewport ? { viewport } : {}),
  });
}
