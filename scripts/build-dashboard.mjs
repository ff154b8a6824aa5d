// Builds the dashboard's browser files into dist/dashboard-assets/, the one
// folder the server serves under /assets/lib/ (src/server/dashboard-assets.ts).
// `npm run build` runs it after the Node build; the tests run it when the
// output is older than its sources (test/support/dist.ts).
//
// It compiles src/server/dashboard/app.ts with the DOM-only
// tsconfig.dashboard.json (tsc follows its imports, so the aui/ and wire/
// modules it uses land beside it at the same relative paths) and copies the
// folder's stylesheets. No bundler: browsers load the compiled ES modules by
// relative URL as they are.
//
// The output is built in a fresh folder and then swapped in, so the folder
// holds exactly what the page loads (a module the page stopped importing does
// not stay servable), and a server reading it (or a second build running at
// the same time, as parallel test workers do) never sees it half written.

import { execFileSync } from "node:child_process";
import { cpSync, readdirSync, renameSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const out = path.join(root, "dist/dashboard-assets");
const fresh = `${out}.${process.pid}.new`;
const old = `${out}.${process.pid}.old`;
const pageSrc = path.join(root, "src/server/dashboard");

rmSync(fresh, { recursive: true, force: true });
let failed = false;
try {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  execFileSync(process.execPath, [tsc, "-p", "tsconfig.dashboard.json", "--outDir", fresh], {
    cwd: root,
    stdio: "inherit",
  });
} catch {
  // tsc still emits on a type error: install what it wrote, then fail the build
  failed = true;
}
for (const name of readdirSync(pageSrc)) {
  if (name.endsWith(".css"))
    cpSync(path.join(pageSrc, name), path.join(fresh, "server/dashboard", name));
}
// Another build may install its copy between these two renames; retry once it has.
for (let attempt = 0; ; attempt++) {
  rmSync(old, { recursive: true, force: true });
  try {
    renameSync(out, old);
  } catch (err) {
    if (err.code !== "ENOENT") throw err;
  }
  try {
    renameSync(fresh, out);
    break;
  } catch (err) {
    if (attempt >= 5 || (err.code !== "ENOTEMPTY" && err.code !== "EEXIST")) throw err;
  }
}
rmSync(old, { recursive: true, force: true });
if (failed) process.exit(1);
