// Sandbox latency micro-benchmark: spawn → exit of `true`, raw (argv spawned
// directly) against the same command through the sandbox (wrapper, cgroups,
// rlimits, bubblewrap), in one run, interleaved so drift on a shared machine
// hits both alike. Reports p50/p99 in milliseconds, plus prepare+dispose (the
// cgroup's creation and removal) separately. Needs `npm run build` first and a
// host where `doctor` says confinement works. Usage:
//   node bench/sandbox/latency.mjs [--n 200]
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const { createSandbox } = await import(path.resolve(here, "../../dist/sandbox/index.js"));
const args = process.argv.slice(2);
const n = Number(args[args.indexOf("--n") + 1] || 200) || 200;

const once = (file, argv, opts) =>
  new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const child = spawn(file, argv, { ...opts, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) reject(new Error(`exit ${code}`));
      else resolve(Number(process.hrtime.bigint() - t0) / 1e6);
    });
  });

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

const ws = mkdtempSync(path.join(tmpdir(), "ac-bench-sandbox-"));
const sandbox = await createSandbox({ workspace: ws, confine: "required" });
await sandbox.adopt(ws);
const env = { PATH: "/usr/bin:/bin", LANG: "C.UTF-8" };
const rows = { raw: [], sandbox: [], prepare: [] };
for (let i = 0; i < n + 10; i++) {
  const raw = await once("/bin/true", [], { cwd: ws, env });
  const t0 = process.hrtime.bigint();
  const p = await sandbox.prepare({ argv: ["/bin/true"], cwd: ws, env });
  const prepMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const boxed = await once(p.file, p.args, { cwd: p.cwd, env: p.env });
  const t1 = process.hrtime.bigint();
  await p.afterExit({ code: 0, signal: null });
  await p.dispose();
  const disposeMs = Number(process.hrtime.bigint() - t1) / 1e6;
  if (i < 10) continue; // warm-up
  rows.raw.push(raw);
  rows.sandbox.push(boxed);
  rows.prepare.push(prepMs + disposeMs);
}
await sandbox.dispose();
rmSync(ws, { recursive: true, force: true });
console.log(`sandbox latency: ${n} runs of \`true\`, node ${process.version}; ${sandbox.summary}`);
for (const [k, xs] of Object.entries(rows)) {
  console.log(
    `${k.padEnd(16)} p50 ${pct(xs, 50).toFixed(2).padStart(7)} ms   p99 ${pct(xs, 99).toFixed(2).padStart(7)} ms`,
  );
}
console.log(
  `added by the sandbox (spawn→exit, p50): ${(pct(rows.sandbox, 50) - pct(rows.raw, 50)).toFixed(2)} ms` +
    `, plus prepare+dispose ${pct(rows.prepare, 50).toFixed(2)} ms`,
);
