// The wire benchmark's peers at their current npm versions, installed on
// demand into .bench-peers/wire/ (not dependencies of this package: the
// shared node_modules stays as package.json pins it, and @cloudflare/sandbox
// pulls in Workers-only packages). `npm install --ignore-scripts` runs once;
// later runs reuse the install when the versions match. When it cannot be
// installed (offline), the benchmark falls back to the devDependency
// versions and says so.
//
// @cloudflare/sandbox cannot be imported under Node (its entry imports
// "cloudflare:workers" and bundler-style extensionless paths), so its
// `parseSSEStream` is taken from the installed package's own code: the
// function's source text is read from its dist chunk and evaluated with the
// package's own `parseSSEFrames` (a chunk without imports). Nothing of it is
// rewritten; if the package changes shape, the benchmark says it cannot find it.

import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
/** The repository root: this file runs from .bench-out/bench/wire/. */
const root = path.resolve(here, "../../..");
export const PEERS_DIR = path.join(root, ".bench-peers", "wire");

/** Peer packages and the versions compared (the newest on npm when this was written). */
export const WIRE_PEERS = {
  "eventsource-parser": "4.1.3",
  "@cloudflare/sandbox": "0.12.10",
} as const;
type Peer = keyof typeof WIRE_PEERS;

function installedVersion(name: string, dir = PEERS_DIR): string | undefined {
  const pkg = path.join(dir, "node_modules", ...name.split("/"), "package.json");
  if (!existsSync(pkg)) return undefined;
  return (JSON.parse(readFileSync(pkg, "utf8")) as { version: string }).version;
}

/** Installs the peers (once); undefined when ready, else why not. */
export function installWirePeers(): string | undefined {
  const missing = Object.entries(WIRE_PEERS).filter(([n, v]) => installedVersion(n) !== v);
  if (missing.length === 0) return undefined;
  mkdirSync(PEERS_DIR, { recursive: true });
  const specs = Object.entries(WIRE_PEERS).map(([n, v]) => `${n}@${v}`);
  console.log(`installing ${specs.join(" ")} into ${PEERS_DIR} (scripts off) ...`);
  const r = spawnSync(
    "npm",
    [
      "install",
      "--prefix",
      PEERS_DIR,
      "--ignore-scripts",
      "--no-save",
      "--no-audit",
      "--no-fund",
      "--loglevel=error",
      ...specs,
    ],
    { cwd: PEERS_DIR, encoding: "utf8", timeout: 5 * 60_000 },
  );
  const still = Object.entries(WIRE_PEERS).filter(([n, v]) => installedVersion(n) !== v);
  if (r.status !== 0 || still.length > 0) {
    const detail = (r.stderr || r.error?.message || "").trim().split("\n").slice(-3).join(" ");
    return `npm install failed (status ${r.status}): ${detail}`;
  }
  return undefined;
}

/** The installed peer's version, or undefined when it is not installed. */
export function peerVersion(name: Peer): string | undefined {
  const v = installedVersion(name);
  return v === WIRE_PEERS[name] ? v : undefined;
}

/** Imports a peer (or one of its subpaths) from .bench-peers/wire/. */
export async function importPeer<T>(name: Peer, subpath = ""): Promise<T> {
  const dir = path.join(PEERS_DIR, "node_modules", ...name.split("/"));
  const pkg = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as {
    exports?: Record<string, { import?: string; default?: string } | string>;
  };
  const entry = pkg.exports?.[`.${subpath}`];
  const file = typeof entry === "string" ? entry : (entry?.import ?? entry?.default);
  if (!file) throw new Error(`${name}${subpath}: no ESM entry`);
  return (await import(pathToFileURL(path.join(dir, file)).href)) as T;
}

export type ParseSSEStream = (
  stream: ReadableStream<Uint8Array>,
  signal?: AbortSignal,
) => AsyncGenerator<unknown>;

/** @cloudflare/sandbox's `parseSSEStream`, from the installed package's code (see the header). */
export async function cloudflareParseSSEStream(): Promise<ParseSSEStream> {
  const dist = path.join(PEERS_DIR, "node_modules", "@cloudflare", "sandbox", "dist");
  const files = readdirSync(dist).filter((f) => f.endsWith(".js"));
  let source: string | undefined;
  let frames: ((...args: unknown[]) => unknown) | undefined;
  for (const f of files) {
    const text = readFileSync(path.join(dist, f), "utf8");
    const start = text.indexOf("async function* parseSSEStream(");
    if (start >= 0 && source === undefined) {
      const end = text.indexOf("\n}\n", start);
      if (end > start) source = text.slice(start, end + 2);
    }
    const alias = /\bparseSSEFrames as (\w+)\b/.exec(text);
    if (alias && /function parseSSEFrames\(/.test(text)) {
      const mod = (await import(pathToFileURL(path.join(dist, f)).href)) as Record<string, unknown>;
      frames = mod[alias[1] as string] as typeof frames;
    }
  }
  if (!source || !frames) throw new Error(`parseSSEStream or parseSSEFrames not found in ${dist}`);
  return new Function("parseSSEFrames", `${source}\nreturn parseSSEStream;`)(
    frames,
  ) as ParseSSEStream;
}
