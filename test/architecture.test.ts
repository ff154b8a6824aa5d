// The import rule of docs/architecture.md, checked on every source file:
// a module imports only from its own layer or the layers below it, `wire/`
// and `aui/` use web standards only (no `node:` imports, so they run in
// browsers and workers), and production code never imports a
// devDependency. A change that breaks the rule fails here, not in review.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const src = path.join(root, "src");

/** Lowest first: each layer may import itself and those before it. */
const LAYERS = [
  "wire",
  "aui",
  "store",
  "sandbox",
  "runtime",
  "client",
  "agents",
  "server",
  "cluster",
  "host",
  "cli",
] as const;
const WEB_ONLY = new Set(["wire", "aui"]);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === "test-support" ? [] : sourceFiles(p);
    return e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") ? [p] : [];
  });
}

function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const specs: string[] = [];
  for (const m of text.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"/gms))
    specs.push(m[1]!);
  for (const m of text.matchAll(/^\s*import\s+"([^"]+)"/gm)) specs.push(m[1]!);
  for (const m of text.matchAll(/\bimport\(\s*"([^"]+)"\s*\)/g)) specs.push(m[1]!);
  return specs;
}

function layerOf(file: string): string | undefined {
  const top = path.relative(src, file).split(path.sep)[0]!;
  return (LAYERS as readonly string[]).includes(top) ? top : undefined;
}

const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as {
  devDependencies: Record<string, string>;
};
const devOnly = new Set(Object.keys(pkg.devDependencies));

describe("architecture", () => {
  const files = sourceFiles(src);

  it("finds the source tree", () => {
    expect(files.length).toBeGreaterThan(50);
  });

  it("imports only point down the layers", () => {
    const bad: string[] = [];
    for (const file of files) {
      const from = layerOf(file);
      if (!from) continue; // src/index.ts: the root entry re-exports lower layers
      for (const spec of importsOf(file)) {
        if (!spec.startsWith(".")) continue;
        const to = layerOf(path.resolve(path.dirname(file), spec));
        if (to && LAYERS.indexOf(to as never) > LAYERS.indexOf(from as never)) {
          bad.push(`${path.relative(root, file)} (${from}) imports ${spec} (${to})`);
        }
      }
    }
    expect(bad).toEqual([]);
  });

  it("wire/ and aui/ use web standards only", () => {
    const bad = files
      .filter((f) => WEB_ONLY.has(layerOf(f) ?? ""))
      .flatMap((f) =>
        importsOf(f)
          .filter((s) => s.startsWith("node:"))
          .map((s) => `${path.relative(root, f)} imports ${s}`),
      );
    expect(bad).toEqual([]);
  });

  it("production code imports no devDependency", () => {
    const bad = files.flatMap((f) =>
      importsOf(f)
        .filter((s) => !s.startsWith(".") && !s.startsWith("node:"))
        .map((s) => (s.startsWith("@") ? s.split("/").slice(0, 2).join("/") : s.split("/")[0]!))
        .filter(
          (name) => devOnly.has(name) && !(name === "ai" && f.endsWith(`agents${path.sep}ai.ts`)),
        )
        .map((name) => `${path.relative(root, f)} imports ${name}`),
    );
    expect(bad).toEqual([]);
  });
});
