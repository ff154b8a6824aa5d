// The dashboard's static files, served as they are on disk:
// - `/assets/lib/<path>`: the page's compiled ES modules, their source maps
//   and its stylesheet, from dist/dashboard-assets/ (written by `npm run
//   build`, scripts/build-dashboard.mjs). That folder holds only what the
//   page loads (app.js and the aui/ and wire/ modules it imports, compiled
//   for the DOM), so it is the allow-list: nothing else under dist/ or src/
//   is reachable, whatever the path says.
// - `/assets/xterm.js`, `/assets/xterm.css`, `/assets/addon-fit.js`: the
//   terminal library and its fit addon (sizes a pty terminal to its pane),
//   from their packages (runtime dependencies).
// Nothing is compiled per request: a server run from source (the tests) serves
// the same built folder, so the tests rebuild it when stale
// (test/support/dist.ts).
//
// Caching: the URLs carry no version, so the page's own files are `no-cache`
// with an ETag (a browser revalidates and gets a 304 until the next build);
// xterm, pinned by the lockfile, may be cached for an hour.

import { readFile, stat } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createRequire } from "node:module";
import path from "node:path";
import { ComputerError } from "../wire/errors.js";

const requireHere = createRequire(import.meta.url);

/**
 * `<package>/dist/dashboard-assets`, found through the package's own name so
 * it is the same whether this module runs from src/ or dist/.
 */
const BUILT_DIR = path.join(
  path.dirname(requireHere.resolve("agent-computer/package.json")),
  "dist/dashboard-assets",
);

/** The page's entry module inside the built folder (what the shell loads). */
export const APP_MODULE = "server/dashboard/app.js";

/** Folders and names only (no dots, so no `..`), ending in a served extension. */
const BUILT_PATH_RE = /^(?:[\w-]+\/)*[\w-]+\.(?:js|js\.map|css)$/;

const CONTENT_TYPES: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".css": "text/css; charset=utf-8",
};

function xtermFile(rel: string): string {
  return path.join(path.dirname(requireHere.resolve("@xterm/xterm/package.json")), rel);
}

/** True once `npm run build` has written the page's code. */
export async function assetsBuilt(): Promise<boolean> {
  return stat(path.join(BUILT_DIR, APP_MODULE)).then(
    (s) => s.isFile(),
    () => false,
  );
}

/** Answers `/assets/<rel>`; throws ENOENT (404) for anything not served. */
export async function serveAsset(
  req: IncomingMessage,
  res: ServerResponse,
  rel: string,
): Promise<void> {
  if (rel === "xterm.js")
    return sendFile(req, res, xtermFile("lib/xterm.js"), "public, max-age=3600");
  if (rel === "addon-fit.js") {
    const file = path.join(
      path.dirname(requireHere.resolve("@xterm/addon-fit/package.json")),
      "lib/addon-fit.js",
    );
    return sendFile(req, res, file, "public, max-age=3600");
  }
  if (rel === "xterm.css")
    return sendFile(req, res, xtermFile("css/xterm.css"), "public, max-age=3600");
  const built = rel.startsWith("lib/") ? rel.slice(4) : "";
  if (!BUILT_PATH_RE.test(built)) throw new ComputerError("ENOENT", "no such asset");
  return sendFile(req, res, path.join(BUILT_DIR, built), "no-cache");
}

async function sendFile(
  req: IncomingMessage,
  res: ServerResponse,
  file: string,
  cacheControl: string,
): Promise<void> {
  const info = await stat(file).catch(() => undefined);
  if (!info?.isFile()) throw new ComputerError("ENOENT", "no such asset");
  const etag = `W/"${info.size.toString(36)}-${Math.floor(info.mtimeMs).toString(36)}"`;
  res.setHeader("cache-control", cacheControl);
  res.setHeader("etag", etag);
  res.setHeader("x-content-type-options", "nosniff");
  if (req.headers["if-none-match"] === etag) {
    res.statusCode = 304;
    res.end();
    return;
  }
  const body = await readFile(file);
  res.statusCode = 200;
  res.setHeader("content-type", CONTENT_TYPES[path.extname(file)] ?? "application/octet-stream");
  res.setHeader("content-length", body.length);
  res.end(body);
}
