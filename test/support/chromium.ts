// The real browser the browser tests drive (playwright-core over the Debian
// `chromium` package that .ci/run installs), launched the same way everywhere:
// headless, no sandbox (CI runs as root), nothing that phones home. Tests
// skip loudly when the binary is missing rather than failing obscurely.

import { existsSync } from "node:fs";

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
