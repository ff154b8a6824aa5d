// What the confined-execution suites share: whether this host can confine
// (each suite skips, saying why, when it cannot), and a temp directory the
// sandbox's uid can traverse to reach a workspace inside it.

import { chmodSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { probeHost } from "../../src/sandbox/index.js";
import type { HostReport } from "../../src/sandbox/types.js";

/** The host's report and whether `confine: "required"` works; warns once when `suite` will be skipped. */
export async function confineSupport(
  suite: string,
): Promise<{ host: HostReport; canConfine: boolean }> {
  const host = await probeHost();
  const canConfine = host.verdict.required.ok;
  if (!canConfine) {
    console.warn(
      `\n*** SKIPPING ${suite}: ${host.verdict.required.message}\n` +
        `*** fix: ${host.bwrap.fix ?? host.userNamespaces.fix ?? host.setpriv.fix ?? ""}\n`,
    );
  }
  return { host, canConfine };
}

/**
 * A fresh temp directory (`prefix` + random) made traversable (0711): mkdtemp
 * makes it 0700, and commands run as another uid when the tests run as root.
 */
export function sandboxBase(prefix: string): string {
  const base = mkdtempSync(path.join(tmpdir(), prefix));
  chmodSync(base, 0o711);
  return base;
}
