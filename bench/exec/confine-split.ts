// Where a confined execution's start-up goes (`npm run bench:confine-split`):
// each step of the sandbox's chain timed on its own, spawn to exit, side by
// side with a raw spawn of `true` in the same run, then the whole cold chain,
// the cgroups' create/remove, and the warm hand-off (an already-spawned
// sandbox handed `true`). The figures that chose the warm pool's design
// (docs/benchmarks.md, docs/security.md). Needs a host that can confine.
// Usage: node .bench-out/bench/exec/confine-split.js [--n RUNS] [--gap MS]
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { ExecCgroup } from "../../src/sandbox/cgroups.js";
import { createSandbox, probeHost } from "../../src/sandbox/index.js";
import { numberOption } from "../support/args.js";
import { median } from "../support/stats.js";

const n = numberOption("n", 40);
const gap = numberOption("gap", 100);
const host = await probeHost();
if (!host.verdict.required.ok) {
  console.log(`SKIPPED, cannot confine here: ${host.verdict.required.message}`);
  process.exit(0);
}
const base = mkdtempSync(path.join(tmpdir(), "ac-split-"));
const { chmodSync, mkdirSync } = await import("node:fs");
chmodSync(base, 0o711);
const ws = path.join(base, "ws");
mkdirSync(ws);
const sandbox = await createSandbox({ workspace: ws, confine: "required" });
await sandbox.adopt(ws);
const ENV = { PATH: "/usr/bin:/bin" };

function run(file: string, args: string[], env: Record<string, string> = ENV): Promise<void> {
  return new Promise((resolve, reject) => {
    const c = spawn(file, args, {
      stdio: ["ignore", "pipe", "pipe"],
      env,
      cwd: ws,
      detached: true,
    });
    let err = "";
    c.stderr.on("data", (d) => {
      err += d;
    });
    c.on("error", reject);
    c.on("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`${file}: ${code} ${err}`)),
    );
  });
}

const rows: Array<[string, number]> = [];
async function time(label: string, once: () => Promise<unknown>): Promise<void> {
  for (let i = 0; i < 5; i++) await once();
  const each: number[] = [];
  for (let i = 0; i < n; i++) {
    if (gap > 0) await new Promise((r) => setTimeout(r, gap));
    const t0 = performance.now();
    await once();
    each.push(performance.now() - t0);
  }
  rows.push([label, median(each)]);
}

// The cold chain's pieces, from the sandbox's own recipe.
const cold = await sandbox.prepare({ argv: ["true"], cwd: ws, env: ENV });
await cold.dispose();
const bw = cold.args.indexOf(host.bwrap.path!);
const bwrapArgs = cold.args.slice(bw + 1, cold.args.lastIndexOf("--"));
const noNet = bwrapArgs.filter((a) => a !== "--unshare-net");
const id = sandbox.identity;
const drop = id
  ? ["--reuid", String(id.uid), "--regid", String(id.gid), "--clear-groups", "--"]
  : null;
const asSandboxUser = (file: string, args: string[]): [string, string[]] =>
  drop ? [host.setpriv.path!, [...drop, file, ...args]] : [file, args];
const bwrap = host.bwrap.path!;

await time("raw spawn of true", () => run("/bin/true", []));
await time("env --default-signal true", () =>
  run("/usr/bin/env", ["--default-signal", "--", "true"]),
);
await time("sh -c 'exec true' (the wrapper's shell)", () => run("/bin/sh", ["-c", "exec true"]));
if (host.setpriv.path) {
  await time("setpriv --pdeathsig true", () =>
    run(host.setpriv.path!, ["--pdeathsig=SIGKILL", "--", "/bin/true"]),
  );
}
await time("bwrap, user + pid namespaces, / bound", () =>
  run(
    ...asSandboxUser(bwrap, [
      "--unshare-user",
      "--unshare-pid",
      "--ro-bind",
      "/",
      "/",
      "/bin/true",
    ]),
  ),
);
await time("bwrap, the profile's flags, network none", () =>
  run(...asSandboxUser(bwrap, [...bwrapArgs, "--", "/bin/true"])),
);
await time("bwrap, the profile's flags, host network", () =>
  run(...asSandboxUser(bwrap, [...noNet, "--", "/bin/true"])),
);
const { version, parents } = host.cgroup;
await time("cgroups: create, write limits, remove", async () => {
  const cg = await ExecCgroup.create({ version, parents, missing: [] }, sandbox.defaults);
  await cg?.remove();
});
await time("whole cold chain (prepare, spawn, exit, dispose)", async () => {
  const p = await sandbox.prepare({ argv: ["true"], cwd: ws, env: ENV });
  await run(p.file, p.args, p.env);
  await p.dispose();
});
// The pool fills once a profile is asked for: ask, then let it fill.
await (await sandbox.prepare({ argv: ["true"], cwd: ws, env: ENV, warm: true })).dispose();
await new Promise((r) => setTimeout(r, 1000));
let misses = 0;
await time("warm hand-off (prepare from the pool, adopt, exit)", async () => {
  const p = await sandbox.prepare({ argv: ["true"], cwd: ws, env: ENV, warm: true });
  if (p.adopt) {
    const child = p.adopt("ignore");
    await new Promise((r) => child.on("exit", r));
  } else {
    misses++; // the pool had not refilled yet: cold (raise --gap)
    await run(p.file, p.args, p.env);
  }
  await p.dispose();
});

const raw = rows[0]![1];
console.log(
  `confinement split: p50 of ${n} runs each, ${gap} ms apart; the warm row took the cold path ${misses} times (of ${n + 5})`,
);
console.log("| step | p50 | added to a raw spawn |\n| --- | ---: | ---: |");
for (const [label, ms] of rows) {
  console.log(`| ${label} | ${ms.toFixed(2)} ms | ${(ms - raw).toFixed(2)} ms |`);
}
await sandbox.dispose();
rmSync(base, { recursive: true, force: true });
