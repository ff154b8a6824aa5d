// Tests that run the built package (the CLI as a child process, the SDK in a
// browser, servers in other processes) need dist/ to match src/. CI builds it
// in `npm ci` (prepare); locally the sources may have moved on since. This
// rebuilds when any source file is newer than its output (or has none), and
// fails loudly if an output is still stale afterwards (tsc still emits when
// an unrelated file has a type error, so only a real miss fails here).

import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The first source file under src/ whose dist output is missing or older, if any. */
function staleOutput(dir = path.join(root, "src")): string | undefined {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name === "test-support") continue; // not built (tsconfig.build.json)
      const found = staleOutput(p);
      if (found) return found;
    } else if (e.name.endsWith(".ts") && !e.name.endsWith(".test.ts")) {
      const out = path
        .join(root, "dist", path.relative(path.join(root, "src"), p))
        .replace(/\.ts$/, ".js");
      if (!existsSync(out) || statSync(out).mtimeMs < statSync(p).mtimeMs) return out;
    }
  }
  return undefined;
}

/** Rebuilds dist/ when it is older than src/ (no-op when current). */
export function ensureDistBuilt(): void {
  if (staleOutput() === undefined) return;
  let log = "";
  try {
    execFileSync(
      process.execPath,
      [path.join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"],
      { cwd: root, encoding: "utf8" },
    );
  } catch (err) {
    log = String((err as { stdout?: string }).stdout ?? err);
  }
  const still = staleOutput();
  if (still) throw new Error(`dist is stale after building (${still}):\n${log}`);
}
