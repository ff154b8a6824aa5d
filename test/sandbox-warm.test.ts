// Warm sandboxes (src/sandbox/warm-pool.ts) through the runtime, for real:
// an execution adopts a sandbox spawned ahead (its pid is one the pool
// spawned), and is confined exactly as a cold one (host processes, secrets,
// environment, directory, stdin, limits with their honest reason); a request
// the pool cannot serve (other limits, a pty) takes the cold path; unused
// sandboxes expire, and nothing is left after dispose. Skips loudly when the
// host cannot confine.

import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Computer } from "../src/index.js";
import { createSandbox, type Sandbox } from "../src/sandbox/index.js";
import { Watchdog } from "../src/sandbox/watchdog.js";
import { confineSupport, sandboxBase } from "./support/sandbox-host.js";

const { host, canConfine } = await confineSupport("the warm sandbox tests");
const hasPids = host.cgroup.controllers.includes("pids");

type Warm = Sandbox & { warmPids(): number[] };

const BASE_ENV = (ws: string) => ({ PATH: "/usr/bin:/bin", LANG: "C.UTF-8", HOME: ws });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Wait until the pool holds at least `n` sandboxes; returns their pids. */
async function warmed(sb: Warm, n = 1): Promise<number[]> {
  const deadline = Date.now() + 20_000;
  while (sb.warmPids().length < n && Date.now() < deadline) await sleep(20);
  expect(sb.warmPids().length).toBeGreaterThanOrEqual(n);
  return sb.warmPids();
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat[stat.lastIndexOf(")") + 2] !== "Z";
  } catch {
    return false;
  }
}

describe.skipIf(!canConfine)("warm sandboxes", () => {
  let base: string;
  let ws: string;
  let sandbox: Warm;
  let computer: Computer;

  beforeAll(async () => {
    base = sandboxBase("ac-warm-");
    ws = path.join(base, "ws");
    mkdirSync(path.join(ws, "sub"), { recursive: true });
    sandbox = (await createSandbox({
      workspace: ws,
      confine: "required",
      defaults: { pids: 64 },
    })) as Warm;
    await sandbox.adopt(ws);
    computer = new Computer({ workspace: ws, sandbox, killGraceMs: 300, env: BASE_ENV(ws) });
    // The first execution asks for the profile; the pool fills behind it.
    await (await computer.exec("true")).result();
  }, 60_000);

  afterAll(async () => {
    await computer?.close();
    await sandbox?.dispose();
    rmSync(base, { recursive: true, force: true });
  });

  const run = async (command: string, options: Parameters<Computer["exec"]>[1] = {}) => {
    const h = await computer.exec(command, { encoding: "utf8", ...options });
    const pid = (await h.info()).pid;
    const r = await h.result();
    return { ...r, pid, stdout: r.stdout as string, stderr: r.stderr as string };
  };

  it("an execution adopts a sandbox the pool spawned, and is confined like a cold one", async () => {
    const pool = await warmed(sandbox);
    const r = await run(
      "ls /proc | grep -c '^[0-9]*$'; cat /etc/shadow 2>&1 | head -1; id -u; pwd; " +
        "tr '\\0' '\\n' </proc/$$/environ | cut -d= -f1 | LC_ALL=C sort | tr '\\n' ' '; exit 3",
      { cwd: "sub", env: { EXTRA: "x y" } },
    );
    expect(pool).toContain(r.pid);
    expect(r.exitCode).toBe(3);
    const [procs, shadow, uid, cwd, names] = r.stdout.split("\n");
    expect(Number(procs)).toBeLessThan(10); // its own PID namespace
    expect(shadow).toMatch(/Permission denied|No such file/);
    if (process.getuid?.() === 0) expect(uid).not.toBe("0");
    expect(cwd).toBe(path.join(ws, "sub"));
    // Exactly the execution's environment, with its marker.
    expect(names!.trim().split(" ")).toEqual(
      [
        ...Object.keys(BASE_ENV(ws)),
        "AGENT_COMPUTER_EXEC_ID",
        "AGENT_COMPUTER_EXEC_KEY",
        "EXTRA",
        "PWD",
      ].sort(),
    );
  });

  it("stdin: given bytes, a pipe written later, or none (reads end of file)", async () => {
    let pool = await warmed(sandbox);
    const given = await run("cat; echo .", { stdin: "given\n" });
    expect(pool).toContain(given.pid);
    expect(given.stdout).toBe("given\n.\n");

    pool = await warmed(sandbox);
    const h = await computer.exec("read line; echo got:$line", { stdin: "pipe", encoding: "utf8" });
    expect(pool).toContain((await h.info()).pid);
    await h.write("typed\n");
    expect((await h.result()).stdout).toBe("got:typed\n");

    pool = await warmed(sandbox);
    const none = await run("cat; echo eof");
    expect(pool).toContain(none.pid);
    expect(none.stdout).toBe("eof\n");
  });

  it("a kill reaches the command; the exit is reported as killed", async () => {
    const pool = await warmed(sandbox);
    const h = await computer.exec("echo up; sleep 30", { encoding: "utf8" });
    expect(pool).toContain((await h.info()).pid);
    await sleep(200);
    await computer.kill(h.id);
    const r = await h.result();
    expect(r.status).toBe("killed");
  });

  it.skipIf(!hasPids)("a fork bomb in a warm sandbox ends with reason limit (pids)", async () => {
    const pool = await warmed(sandbox);
    const r = await run(
      "i=0; while [ $i -lt 400 ]; do sleep 5 & i=$((i+1)); done; echo spawned-all",
    );
    expect(pool).toContain(r.pid);
    expect(r.stdout).not.toContain("spawned-all");
    expect(r.status).toBe("limit");
    expect(r.stderr).toContain("[limit=pids]");
  });

  it("other limits or a pty take the cold path", async () => {
    const pool = await warmed(sandbox);
    const limited = await run("echo cold", { limits: { pids: 100 } });
    expect(limited.stdout).toBe("cold\n");
    expect(pool).not.toContain(limited.pid);
    const pty = await run("echo tty", { pty: { cols: 80, rows: 24 } });
    expect(pool).not.toContain(pty.pid);
  });

  it("unused sandboxes expire, and dispose leaves nothing running", async () => {
    const sb = (await createSandbox({
      workspace: ws,
      confine: "required",
      warm: { size: 2, idleMs: 400 },
    })) as Warm;
    const c = new Computer({ workspace: ws, sandbox: sb });
    try {
      await (await c.exec("true")).result();
      const first = await warmed(sb, 2);
      await sleep(1500);
      expect(sb.warmPids()).toEqual([]);
      for (const pid of first) expect(alive(pid)).toBe(false);
      // Asked for again, the pool refills; dispose kills what it holds.
      await (await c.exec("true")).result();
      const second = await warmed(sb, 1);
      await c.close();
      await sb.dispose();
      for (const pid of second) expect(alive(pid)).toBe(false);
    } finally {
      await c.close();
      await sb.dispose();
    }
  }, 30_000);

  it("warm: { size: 0 } turns the pool off", async () => {
    const sb = (await createSandbox({
      workspace: ws,
      confine: "required",
      warm: { size: 0 },
    })) as Warm;
    const c = new Computer({ workspace: ws, sandbox: sb });
    try {
      await (await c.exec("true")).result();
      await sleep(300);
      expect(sb.warmPids()).toEqual([]);
    } finally {
      await c.close();
      await sb.dispose();
    }
  });

  it.skipIf(!hasPids)(
    "the watchdog kills what is left in the sandbox's cgroups once the server is gone",
    async () => {
      const parents = Object.values(host.cgroup.parents);
      const prefix = `xwatch${process.pid}-`;
      const dir = path.join(host.cgroup.parents.pids!, `${prefix}1`);
      mkdirSync(dir);
      const left = spawn("sleep", ["30"], { detached: true, stdio: "ignore" });
      writeFileSync(path.join(dir, "cgroup.procs"), String(left.pid));
      const other = path.join(host.cgroup.parents.pids!, `xother${process.pid}`);
      mkdirSync(other); // another sandbox's: not the watchdog's business
      const dog = new Watchdog(prefix, parents);
      try {
        await sleep(200);
        expect(alive(left.pid!)).toBe(true);
        // What the kernel does when the server dies: the watchdog's pipe ends.
        dog.close();
        const deadline = Date.now() + 1000;
        while ((alive(left.pid!) || existsSync(dir)) && Date.now() < deadline) await sleep(20);
        expect(alive(left.pid!)).toBe(false);
        expect(existsSync(dir)).toBe(false);
        expect(existsSync(other)).toBe(true);
      } finally {
        left.kill("SIGKILL");
        rmdirSync(other);
        await sleep(50);
        if (existsSync(dir)) rmdirSync(dir);
      }
    },
  );
});
