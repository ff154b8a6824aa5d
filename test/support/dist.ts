// Tests that run the built package (the CLI as a child process, the SDK in a
// browser, servers in other processes) need dist/ to match src/, and so does
// the dashboard even from source (its browser code is only ever served from
// dist/dashboard-assets/). CI builds it in `npm ci` (prepare); locally the
// sources may have moved on since. This rebuilds what is stale (the Node
// build, the dashboard build, or both: the two steps of `npm run build`) and
// fails loudly if an output is still stale afterwards (tsc still emits when
// an unrelated file has a type error, so only a real miss fails here).

import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

const dashboardSrc = path.join(root, "src/server/dashboard");
const dashboardOut = path.join(root, "dist/dashboard-assets");

/** True when `out` is missing or older than `src`. */
function older(out: string, src: string): boolean {
  return !existsSync(out) || statSync(out).mtimeMs < statSync(src).mtimeMs;
}

/** The first source file under src/ whose Node build output is missing or older, if any. */
function staleOutput(dir = path.join(root, "src")): string | undefined {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      // not in the Node build (tsconfig.build.json): test helpers, the browser page
      if (e.name === "test-support" || p === dashboardSrc) continue;
      const found = staleOutput(p);
      if (found) return found;
    } else if (e.name.endsWith(".ts") && !e.name.endsWith(".test.ts")) {
      const out = path
        .join(root, "dist", path.relative(path.join(root, "src"), p))
        .replace(/\.ts$/, ".js");
      if (older(out, p)) return out;
    }
  }
  return undefined;
}

/**
 * The first dashboard output that is missing or older than its source: the
 * page's own .ts and .css files, and every module compiled beside them (the
 * aui/ and wire/ modules app.ts imports, found by what the last build wrote).
 */
function staleDashboard(): string | undefined {
  for (const name of readdirSync(dashboardSrc)) {
    if (!/\.(ts|css)$/.test(name)) continue;
    const out = path.join(dashboardOut, "server/dashboard", name.replace(/\.ts$/, ".js"));
    if (older(out, path.join(dashboardSrc, name))) return out;
  }
  if (!existsSync(dashboardOut)) return dashboardOut;
  for (const rel of readdirSync(dashboardOut, { recursive: true, encoding: "utf8" })) {
    if (!rel.endsWith(".js")) continue;
    const src = path.join(root, "src", rel.replace(/\.js$/, ".ts"));
    if (!existsSync(src) || older(path.join(dashboardOut, rel), src)) return rel;
  }
  return undefined;
}

function run(args: string[]): string {
  try {
    execFileSync(process.execPath, args, { cwd: root, encoding: "utf8" });
    return "";
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    return `${e.stdout ?? ""}${e.stderr ?? ""}` || String(err);
  }
}

/** Rebuilds dist/ when it is older than src/ (no-op when current). */
export function ensureDistBuilt(): void {
  let log = "";
  if (staleOutput() !== undefined)
    log += run([path.join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"]);
  const still = staleOutput();
  if (still) throw new Error(`dist is stale after building (${still}):\n${log}`);
  ensureDashboardBuilt();
}

/** Rebuilds dist/dashboard-assets/ alone when it is older than its sources (no-op when current). */
export function ensureDashboardBuilt(): void {
  if (staleDashboard() === undefined) return;
  const log = run([path.join(root, "scripts/build-dashboard.mjs")]);
  const still = staleDashboard();
  if (still) throw new Error(`dist/dashboard-assets is stale after building (${still}):\n${log}`);
}
