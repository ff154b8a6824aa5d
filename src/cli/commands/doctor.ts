// `agent-computer doctor [--confine …] [--network …] [--limit-* …]`: what
// this host can enforce (each check with what was found, and the fix when it
// is missing) and what `serve` with the same flags would enforce. It builds
// the very sandbox `serve` would (on a scratch workspace), so the prediction
// cannot drift from the server; exit code 1 when the flags cannot be met
// (`--confine required` on a host that cannot confine, a limit over its maximum).

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Command } from "commander";
import type { HostCheck } from "../../sandbox/types.js";
import { act, EXIT_ERROR } from "../options.js";
import { flushAndExit } from "../output.js";
import { addConfineFlags, type ConfineFlags, confineOptions } from "./confine-flags.js";

export function registerDoctor(program: Command): void {
  const cmd = program
    .command("doctor")
    .description("what this host can confine and limit, and what `serve` would enforce")
    .option("--json", "one JSON object instead of text");
  addConfineFlags(cmd).action(act(doctor));
}

interface DoctorFlags extends ConfineFlags {
  json?: boolean;
}

async function doctor(o: DoctorFlags): Promise<never> {
  const options = confineOptions(o);
  const { openNodeSandbox, confinementInfo, confinementLine } = await import(
    "../../host/confine.js"
  );
  const { probeHost } = await import("../../sandbox/probe.js");
  const host = await probeHost();
  const scratch = await mkdtemp(path.join(tmpdir(), "agent-computer-doctor-"));
  let serve: { ok: boolean; line: string; info?: unknown; error?: string };
  try {
    const { sandbox, mode, why } = await openNodeSandbox(
      scratch,
      { ...options, sandbox: { ...options.sandbox, host } },
      "memory",
      process.env,
    );
    serve = {
      ok: true,
      line: confinementLine(sandbox, mode, why),
      info: confinementInfo(sandbox, mode, why),
    };
    await sandbox.dispose();
  } catch (err) {
    serve = {
      ok: false,
      line: `serve would refuse to start: ${(err as Error).message}`,
      error: (err as Error).message,
    };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  if (o.json) {
    process.stdout.write(`${JSON.stringify({ host, serve }, null, 2)}\n`);
  } else {
    const lines: string[] = ["This host:"];
    const row = (name: string, c: HostCheck) => {
      lines.push(`  ${c.ok ? "ok  " : "MISSING"} ${name}: ${c.detail}`);
      if (!c.ok && c.fix) lines.push(`          fix: ${c.fix}`);
    };
    row("bubblewrap", host.bwrap);
    row("user namespaces", host.userNamespaces);
    row("setpriv (uid drop, parent-death signal)", host.setpriv);
    row("cgroups (memory, pids, cpu limits)", host.cgroup.check);
    row("rlimits", host.rlimits);
    row("network none", host.network.none);
    row("network host", host.network.host);
    row("network allow-list", host.network.allowList);
    lines.push("Modes:");
    for (const m of ["auto", "required", "off"] as const) {
      const v = host.verdict[m];
      lines.push(`  --confine ${m.padEnd(8)} ${v.ok ? "" : "REFUSED: "}${v.message}`);
    }
    lines.push("serve with these flags:");
    lines.push(`  ${serve.line}`);
    process.stdout.write(`${lines.join("\n")}\n`);
  }
  flushAndExit(serve.ok ? 0 : EXIT_ERROR);
  return new Promise<never>(() => {});
}
