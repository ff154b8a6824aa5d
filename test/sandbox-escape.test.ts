// The escape suite: real bubblewrap, real cgroups, real processes. Each test
// tries what an attacker's command would (read secrets, look at or signal
// host processes, write outside the workspace, reach the host's loopback,
// exhaust memory, processes or disk, outlive its execution) and checks that
// it fails and that the host is unaffected. Skips loudly when the host cannot
// confine (no bwrap, no user namespaces) and, per test, when a cgroup
// controller is missing; CI installs bubblewrap so nothing is skipped there.

import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Limits, NetworkPolicy, Sandbox, SpawnedExit } from "../src/sandbox/index.js";
import { createSandbox } from "../src/sandbox/index.js";
import { findHostProcesses } from "./support/host-procs.js";
import { confineSupport, sandboxBase } from "./support/sandbox-host.js";

const { host, canConfine } = await confineSupport("the sandbox escape suite");
const hasMemory = host.cgroup.controllers.includes("memory");
const hasPids = host.cgroup.controllers.includes("pids");
if (canConfine && !(hasMemory && hasPids)) {
  console.warn(`\n*** SKIPPING cgroup limit tests: ${host.cgroup.check.detail}\n`);
}

const BASE_ENV = { PATH: "/usr/local/bin:/usr/bin:/bin", LANG: "C.UTF-8", HOME: "/root" };

interface Ran extends SpawnedExit {
  out: string;
  verdict: Awaited<ReturnType<import("../src/sandbox/index.js").Prepared["afterExit"]>>;
}

describe.skipIf(!canConfine)("sandbox escape suite", () => {
  let base: string;
  let ws: string;
  let outside: string;
  let sandbox: Sandbox;
  let hostSleep: ChildProcess;
  const served: http.Server[] = [];

  /** Run a shell script in the sandbox; optionally act on the spawned child while it runs. */
  async function run(
    script: string,
    opts: {
      limits?: Partial<Limits>;
      network?: NetworkPolicy;
      sb?: Sandbox;
      during?: (c: ChildProcess) => void;
    } = {},
  ): Promise<Ran> {
    const sb = opts.sb ?? sandbox;
    const prepared = await sb.prepare({
      argv: ["/bin/sh", "-c", script],
      cwd: ws,
      env: { ...BASE_ENV, PWD: ws },
      ...(opts.limits ? { limits: opts.limits } : {}),
      ...(opts.network ? { network: opts.network } : {}),
    });
    try {
      const child = spawn(prepared.file, prepared.args, {
        cwd: prepared.cwd,
        env: prepared.env,
        detached: prepared.detached,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      child.stdout!.on("data", (c) => {
        out += c;
      });
      child.stderr!.on("data", (c) => {
        out += c;
      });
      opts.during?.(child);
      const status = await new Promise<SpawnedExit>((resolve) =>
        child.on("close", (code, signal) => resolve({ code, signal })),
      );
      const verdict = await prepared.afterExit(status);
      return { ...status, out, verdict };
    } finally {
      await prepared.dispose();
    }
  }

  /** Host processes whose command line starts with `marker` (`sleep 3017`: the sleep itself, not a shell naming it). */
  function hostProcesses(marker: string): number[] {
    return findHostProcesses((cmd) => cmd.startsWith(marker));
  }

  async function listen(handler: http.RequestListener): Promise<number> {
    const server = http.createServer(handler);
    served.push(server);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    return (server.address() as AddressInfo).port;
  }

  beforeAll(async () => {
    base = sandboxBase("ac-escape-");
    ws = path.join(base, "workspace");
    outside = path.join(base, "server");
    for (const d of [ws, outside]) {
      mkdirSync(d, { recursive: true });
    }
    // Stands for the server's files: its token and its event log, outside the workspace.
    writeFileSync(path.join(outside, "token"), "SECRET-TOKEN-123\n");
    writeFileSync(path.join(outside, "events.db"), "EVENT-LOG\n");
    sandbox = await createSandbox({
      workspace: ws,
      confine: "required",
      hide: ["/etc/hostname"],
      host,
      resolve: async (name) => {
        if (name.endsWith(".test")) return "127.0.0.1";
        throw new Error(`unknown test name ${name}`);
      },
    });
    await sandbox.adopt(ws);
    // A host process with secrets in its argv and environment (stands for the server).
    hostSleep = spawn("/bin/sh", ["-c", "sleep 600; : HOST-ARGV-SECRET"], {
      env: { ...process.env, HOST_ENV_SECRET: "HOST-ENV-SECRET" },
      stdio: "ignore",
    });
  });

  afterAll(async () => {
    hostSleep?.kill("SIGKILL");
    for (const s of served) s.close();
    await sandbox?.dispose();
    if (base) rmSync(base, { recursive: true, force: true });
  });

  it("runs as an unprivileged uid with a writable workspace at its own path", async () => {
    const r = await run("id -u; pwd; echo made > made.txt && echo wrote");
    expect(r.code).toBe(0);
    const [uid, cwd] = r.out.split("\n");
    expect(uid).toBe(String(sandbox.identity?.uid ?? process.getuid?.()));
    expect(uid).not.toBe("0");
    expect(cwd).toBe(ws);
    expect(readFileSync(path.join(ws, "made.txt"), "utf8")).toBe("made\n");
  });

  it("cannot read /etc/shadow", async () => {
    const r = await run("cat /etc/shadow; echo rc=$?");
    expect(r.out).toMatch(/rc=[1-9]/);
    expect(r.out).not.toMatch(/^root:/m);
  });

  it("cannot see the server's files, token or install directory, nor hidden paths", async () => {
    const pkg = path.resolve("package.json");
    const r = await run(
      `cat ${outside}/token ${outside}/events.db; ls ${base}; test -e ${pkg} && echo PKG-VISIBLE; cat /etc/hostname; echo done`,
    );
    expect(r.out).not.toContain("SECRET-TOKEN-123");
    expect(r.out).not.toContain("EVENT-LOG");
    expect(r.out).not.toContain("PKG-VISIBLE");
    // Compared as a whole line: a short hostname (e.g. "vm") can occur inside the random temp paths the errors print.
    const hostname = readFileSync("/etc/hostname", "utf8").trim();
    if (hostname) expect(r.out.split("\n")).not.toContain(hostname);
    expect(r.out).toContain("done");
  });

  it("cannot read a host process's /proc cmdline or environ", async () => {
    const pid = hostSleep.pid!;
    const r = await run(
      `cat /proc/${pid}/cmdline /proc/${pid}/environ /proc/${process.pid}/environ /proc/${process.pid}/cmdline; ` +
        "cat /proc/*/cmdline /proc/*/environ 2>/dev/null; echo done",
    );
    expect(r.out).toContain("done");
    expect(r.out).not.toContain("HOST-ARGV-SECRET");
    expect(r.out).not.toContain("HOST-ENV-SECRET");
    expect(r.out).not.toContain("vitest");
  });

  it("sees only its own processes", async () => {
    const r = await run(
      "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done; ls -d /proc/[0-9]* | wc -l",
    );
    expect(r.code).toBe(0);
    expect(r.out).not.toContain("sleep 600");
    expect(r.out).not.toContain("node");
    const count = Number(r.out.trim().split("\n").pop());
    expect(count).toBeLessThanOrEqual(5); // bwrap's init, sh, ps/ls, wc
  });

  it("cannot write outside the workspace", async () => {
    const r = await run(
      `touch /usr/x; touch /etc/x; mkdir -p ${outside}/evil; echo x > ${outside}/token; ` +
        `echo private > /tmp/escape-marker; echo rc=$?`,
    );
    expect(r.out).toContain("rc=0"); // the private /tmp is writable…
    expect(existsSync("/tmp/escape-marker")).toBe(false); // …and is not the host's
    expect(existsSync("/usr/x") || existsSync("/etc/x")).toBe(false);
    expect(existsSync(path.join(outside, "evil"))).toBe(false);
    expect(readFileSync(path.join(outside, "token"), "utf8")).toBe("SECRET-TOKEN-123\n");
  });

  it("cannot signal a host process", async () => {
    const pid = hostSleep.pid!;
    const r = await run(
      `kill -9 ${pid}; echo rc=$?; kill -9 ${process.pid}; kill -9 -1; echo after`,
    );
    expect(r.out).toMatch(/rc=[1-9]/);
    expect(r.out).toContain("after");
    expect(hostSleep.exitCode).toBeNull();
    expect(hostSleep.signalCode).toBeNull();
    expect(() => process.kill(pid, 0)).not.toThrow();
  });

  it("cannot reach a loopback server on the host with network none", async () => {
    let hits = 0;
    const port = await listen((_req, res) => {
      hits++;
      res.end("reached\n");
    });
    const r = await run(
      `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && printf "GET / HTTP/1.0\\r\\n\\r\\n" >&3 && cat <&3'; echo rc=$?`,
    );
    expect(r.out).toMatch(/rc=[1-9]/);
    expect(r.out).not.toContain("reached");
    expect(hits).toBe(0);
  });

  it("egress proxy: an allow-listed name passes, another gets a clear 403", async () => {
    const port = await listen((req, res) => res.end(`hello from ${req.headers.host}\n`));
    const sb = await createSandbox({
      workspace: ws,
      confine: "required",
      host,
      network: { allow: ["allowed.test"] },
      resolve: async (name) => {
        if (name.endsWith(".test")) return "127.0.0.1";
        throw new Error(`unknown test name ${name}`);
      },
    });
    try {
      const get = (name: string) =>
        `exec 3<>/dev/tcp/127.0.0.1/3128; printf "GET http://${name}:${port}/ HTTP/1.1\\r\\nHost: ${name}:${port}\\r\\nConnection: close\\r\\n\\r\\n" >&3; cat <&3`;
      const connect = (name: string) =>
        `exec 3<>/dev/tcp/127.0.0.1/3128; printf "CONNECT ${name}:${port} HTTP/1.1\\r\\nHost: ${name}:${port}\\r\\n\\r\\n" >&3; ` +
        `head -n 2 <&3; printf "GET / HTTP/1.1\\r\\nHost: ${name}\\r\\nConnection: close\\r\\n\\r\\n" >&3; cat <&3`;
      const r = await run(
        `echo "proxy=$HTTP_PROXY"; bash -c '${get("allowed.test")}'; echo ===; bash -c '${get("denied.test")}'; ` +
          `echo ===; bash -c '${connect("allowed.test")}'; echo ===; bash -c '${connect("denied.test")}'`,
        { sb },
      );
      const [allowedGet, deniedGet, allowedConnect, deniedConnect] = r.out.split("===\n");
      expect(allowedGet).toContain("proxy=http://127.0.0.1:3128");
      expect(allowedGet).toContain("200 OK");
      expect(allowedGet).toContain(`hello from allowed.test:${port}`);
      expect(deniedGet).toContain("403 Forbidden");
      expect(deniedGet).toContain("network access to denied.test is not allowed");
      expect(allowedConnect).toContain("200 Connection Established");
      expect(allowedConnect).toContain("hello from allowed.test");
      expect(deniedConnect).toContain("403 Forbidden");
      expect(deniedConnect).not.toContain("hello");
      // The proxy is the only way out: the host's loopback stays unreachable directly.
      const direct = await run(`bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port}'; echo rc=$?`, { sb });
      expect(direct.out).toMatch(/rc=[1-9]/);
    } finally {
      await sb.dispose();
    }
  });

  it.skipIf(!hasPids)(
    "a fork bomb is bounded by the pids limit and the host survives",
    async () => {
      const r = await run(
        "i=0; while [ $i -lt 400 ]; do sleep 5 & i=$((i+1)); done; echo spawned-all",
        { limits: { pids: 32 } },
      );
      expect(r.out).not.toContain("spawned-all");
      expect(r.verdict.hit).toContain("pids");
      expect(r.verdict).toMatchObject({ reason: "limit", limit: "pids" });
      // The host still forks fine.
      const ok = await new Promise<number | null>((resolve) =>
        spawn("true").on("close", (code) => resolve(code)),
      );
      expect(ok).toBe(0);
    },
  );

  it.skipIf(!hasMemory)("a memory hog ends with reason oom", async () => {
    // tail keeps the current (newline-free) line in memory: it grows until killed.
    const r = await run("head -c 1000000000 /dev/zero | tail; echo after=$?", {
      limits: { memoryBytes: 64 * 1024 * 1024 },
    });
    expect(r.verdict).toMatchObject({ reason: "oom", limit: "memory" });
  });

  it("a 10 GB file is stopped by the file size limit with reason limit/file", async () => {
    const r = await run("exec head -c 10G /dev/zero > big.bin", {
      limits: { fileSizeBytes: 1024 * 1024 },
    });
    expect(r.verdict).toMatchObject({ reason: "limit", limit: "file", signal: "SIGXFSZ" });
    expect(statSync(path.join(ws, "big.bin")).size).toBeLessThanOrEqual(1024 * 1024);
    rmSync(path.join(ws, "big.bin"));
  });

  it("a setsid daemon dies with the execution", async () => {
    const r = await run("setsid sleep 3017 </dev/null >/dev/null 2>&1 & sleep 0.2; echo started");
    expect(r.out).toContain("started");
    await new Promise((res) => setTimeout(res, 200));
    expect(hostProcesses("sleep 3017")).toEqual([]);
  });

  it("SIGTERM to the group reaches the command; SIGKILL of the group leaves nothing", async () => {
    const term = await run("trap 'echo got-term; exit 0' TERM; echo ready; sleep 300 & wait", {
      during: (child) => {
        child.stdout!.once("data", () => process.kill(-child.pid!, "SIGTERM"));
      },
    });
    expect(term.out).toContain("got-term");
    expect(term.verdict).toMatchObject({ code: 0, signal: null });

    const killed = await run(
      "setsid sleep 3018 </dev/null >/dev/null 2>&1 & echo ready; sleep 3019",
      {
        during: (child) => {
          child.stdout!.once("data", () => process.kill(-child.pid!, "SIGKILL"));
        },
      },
    );
    expect(killed.signal).toBe("SIGKILL");
    await new Promise((res) => setTimeout(res, 200));
    expect(hostProcesses("sleep 3018")).toEqual([]);
    expect(hostProcesses("sleep 3019")).toEqual([]);
  });

  it("SIGKILL of the parent leaves no survivor within 1 s (die-with-parent)", async () => {
    const prepared = await sandbox.prepare({
      argv: ["/bin/sh", "-c", "setsid sleep 3020 </dev/null >/dev/null 2>&1 & sleep 3021"],
      cwd: ws,
      env: { ...BASE_ENV },
    });
    try {
      const parentScript = `
        const { spawn } = require("node:child_process");
        const p = JSON.parse(process.argv[1]);
        // The recipe names the process expected to spawn it: this one, here.
        p.args[p.args.indexOf("agent-computer-sandbox") + 1] = String(process.pid);
        const c = spawn(p.file, p.args, { cwd: p.cwd, env: p.env, detached: true, stdio: "ignore" });
        process.stdout.write(String(c.pid) + "\\n");
        setInterval(() => {}, 1000);`;
      const parent = spawn(process.execPath, ["-e", parentScript, JSON.stringify(prepared)], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      await new Promise<void>((resolve) => parent.stdout!.once("data", () => resolve()));
      // Wait until the command inside runs.
      const running = () => hostProcesses("sleep 3020").length + hostProcesses("sleep 3021").length;
      for (let i = 0; i < 150 && running() < 2; i++) {
        await new Promise((res) => setTimeout(res, 20));
      }
      expect(running()).toBe(2);
      parent.kill("SIGKILL");
      const t0 = Date.now();
      while (Date.now() - t0 < 1000) {
        if (hostProcesses("sleep 302").length === 0) break;
        await new Promise((res) => setTimeout(res, 20));
      }
      expect(hostProcesses("sleep 3020")).toEqual([]);
      expect(hostProcesses("sleep 3021")).toEqual([]);
    } finally {
      await prepared.dispose();
    }
  });
});
