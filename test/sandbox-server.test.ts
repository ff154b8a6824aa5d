// The escape suite through the real server: `agent-computer serve --confine
// required` as a child process (with a SQLite event log outside the
// workspace and its token both on its command line and in its environment),
// driven by the SDK exactly as an agent's client would. Each attempt must
// fail (or be bounded, with an honest exit reason) and the server must keep
// serving afterwards. Last, the server is SIGKILLed with confined commands
// running and warm sandboxes waiting for one, and nothing of them may
// survive it by more than a second.
// Skips loudly when the host cannot confine (see `agent-computer doctor`).

import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, statSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ComputerClient } from "../src/client/client.js";
import type { ExecOptions, ExecResult } from "../src/runtime/types.js";
import { WARM_INIT_ARGV } from "../src/sandbox/handoff.js";
import { ensureDistBuilt } from "./support/dist.js";
import { findHostProcesses } from "./support/host-procs.js";
import { listeningUrl } from "./support/proc-serve.js";
import { confineSupport, sandboxBase } from "./support/sandbox-host.js";

const { host, canConfine } = await confineSupport("the server escape suite");
const hasLimits =
  host.cgroup.controllers.includes("memory") && host.cgroup.controllers.includes("pids");

const root = path.resolve(__dirname, "..");
const cli = path.join(root, "dist/cli/main.js");
const TOKEN = `escape-${process.pid}-secret`;
/** In the command line of a warm sandbox's bubblewrap (the init it waits in). */
const WARM_INIT = WARM_INIT_ARGV[2]!;

interface Served {
  child: ChildProcess;
  url: string;
  client: ComputerClient;
  workspace: string;
  out: () => string;
}

async function serve(workspace: string, extra: string[]): Promise<Served> {
  const child = spawn(
    process.execPath,
    [
      cli,
      "serve",
      "--port",
      "0",
      "--workspace",
      workspace,
      "--token",
      TOKEN,
      "--confine",
      "required",
      "--quiet",
      ...extra,
    ],
    {
      env: { ...process.env, AGENT_COMPUTER_TOKEN: TOKEN },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  child.stderr!.on("data", (d) => {
    out += d;
  });
  child.stdout!.on("data", (d) => {
    out += d;
  });
  const url = await listeningUrl(child, "serve", () => out);
  return {
    child,
    url,
    workspace,
    client: new ComputerClient({ url, token: TOKEN }),
    out: () => out,
  };
}

/** Host processes whose command line contains `marker`. */
function hostProcesses(marker: string): number[] {
  return findHostProcesses((cmd) => cmd.includes(marker));
}

describe.skipIf(!canConfine)("escape attempts through `serve --confine required`", () => {
  let base: string;
  let logDir: string;
  let server: Served;
  let loopback: http.Server;
  let loopbackPort: number;

  const run = async (
    command: string,
    options: ExecOptions = {},
  ): Promise<ExecResult<string> & { state: string }> => {
    const h = await server.client.exec(command, {
      encoding: "utf8",
      timeoutMs: 30_000,
      ...options,
    });
    const r = (await h.result()) as ExecResult<string>;
    if (process.env.AC_TEST_DEBUG) console.log(JSON.stringify(r));
    return { ...r, state: (await h.info()).state };
  };
  const stillServing = async () => {
    const r = await run("echo alive");
    expect(r.stdout).toBe("alive\n");
  };

  beforeAll(async () => {
    ensureDistBuilt();
    base = sandboxBase("ac-sandbox-server-");
    logDir = path.join(base, "log");
    mkdirSync(logDir);
    const workspace = path.join(base, "ws");
    server = await serve(workspace, [
      "--log",
      `sqlite:${path.join(logDir, "events.db")}`,
      "--limit-pids",
      "512:4096",
    ]);
    loopback = http.createServer((_req, res) => res.end("host loopback reached"));
    await new Promise<void>((r) => loopback.listen(0, "127.0.0.1", r));
    loopbackPort = (loopback.address() as AddressInfo).port;
  }, 60_000);

  afterAll(async () => {
    server?.child.kill("SIGTERM");
    await new Promise((r) => server?.child.once("exit", r));
    loopback?.close();
    rmSync(base, { recursive: true, force: true });
  });

  it("shows the confinement in the startup line and GET /v1/info (behind the token)", async () => {
    expect(server.out()).toMatch(/agent-computer confinement: confined/);
    const info = (await (
      await fetch(`${server.url}/v1/info`, { headers: { authorization: `Bearer ${TOKEN}` } })
    ).json()) as { confinement: { mode: string; confined: boolean; network: string } };
    expect(info.confinement).toMatchObject({ mode: "required", confined: true, network: "none" });
    expect((await fetch(`${server.url}/v1/info`)).status).toBe(401);
  });

  it("cannot read /etc/shadow", async () => {
    const r = await run("cat /etc/shadow; echo rc=$?");
    const real = readFileSync("/etc/shadow", "utf8").split("\n")[0]!;
    expect(r.stdout).not.toContain(real);
    expect(r.stdout).toMatch(/rc=[1-9]/);
    await stillServing();
  });

  it("cannot read the server's files, its event log or its token", async () => {
    const r = await run(
      [
        `cat ${cli} | head -c 100`,
        `ls ${logDir}`,
        `cat ${path.join(logDir, "events.db")} | head -c 100`,
        "env",
        `cat /proc/${server.child.pid}/cmdline /proc/${server.child.pid}/environ`,
        "cat /proc/*/cmdline /proc/*/environ",
        "cat /proc/1/cmdline /proc/1/environ",
        "echo done",
      ].join("; "),
    );
    expect(r.stdout).toContain("done");
    expect(r.stdout + r.stderr).not.toContain(TOKEN);
    expect(r.stdout).not.toContain("SQLite format");
    expect(r.stdout).not.toContain("#!/usr/bin/env node");
    await stillServing();
  });

  it("cannot write outside the workspace; its /tmp is private; the workspace is writable", async () => {
    const marker = `ac-escape-${process.pid}`;
    const r = await run(
      `echo x > /etc/${marker}; echo x > ${base}/${marker}; echo x > /tmp/${marker} && echo tmp-ok; echo x > ws-file && echo ws-ok`,
    );
    expect(r.stdout).toContain("tmp-ok");
    expect(r.stdout).toContain("ws-ok");
    expect(existsSync(`/etc/${marker}`)).toBe(false);
    expect(existsSync(`${base}/${marker}`)).toBe(false);
    expect(existsSync(`/tmp/${marker}`)).toBe(false);
    expect(readFileSync(path.join(server.workspace, "ws-file"), "utf8")).toBe("x\n");
  });

  it("a file uploaded through the files API stays writable by commands", async () => {
    await server.client.files.write("sub/dir/up.txt", "from the API\n");
    const r = await run("echo appended >> sub/dir/up.txt && touch sub/dir/new && echo ok");
    expect(r.stdout).toBe("ok\n");
    expect(readFileSync(path.join(server.workspace, "sub/dir/up.txt"), "utf8")).toBe(
      "from the API\nappended\n",
    );
  });

  it("cannot see host processes nor signal the server", async () => {
    const pid = server.child.pid!;
    const r = await run(
      `ls /proc | grep -c '^[0-9]*$'; kill -9 ${pid}; kill -9 -1; echo rc=$?; ls /proc/${pid} 2>&1 | head -1`,
    );
    const visible = Number(r.stdout.split("\n")[0]);
    expect(visible).toBeLessThan(10);
    expect(server.child.exitCode).toBeNull();
    await stillServing();
  });

  it("cannot reach a host loopback server with network none; host network only when the server allows it", async () => {
    const probe = `node -e "require('http').get('http://127.0.0.1:${loopbackPort}/',r=>r.on('data',d=>process.stdout.write(d))).on('error',e=>console.log('refused',e.code))"`;
    const r = await run(probe);
    expect(r.stdout).not.toContain("host loopback reached");
    expect(r.stdout).toContain("refused");
    await expect(server.client.exec("true", { network: "host" })).rejects.toMatchObject({
      code: "EFORBIDDEN",
    });
  });

  it("refuses limits over the maximum with 400 EINVAL", async () => {
    await expect(server.client.exec("true", { limits: { pids: 1_000_000 } })).rejects.toMatchObject(
      { code: "EINVAL", status: 400 },
    );
    await expect(
      server.client.exec("true", { limits: { nonsense: 1 } as never }),
    ).rejects.toMatchObject({ code: "EINVAL", status: 400 });
  });

  it.skipIf(!hasLimits)(
    "a fork bomb is bounded by the pids limit",
    async () => {
      const r = await run("f() { f | f & }; f; sleep 2; echo survived", {
        limits: { pids: 64 },
        timeoutMs: 20_000,
      });
      expect(["exited", "limit", "killed"]).toContain(r.state);
      await stillServing();
      expect(hostProcesses("f | f").length).toBe(0);
    },
    60_000,
  );

  it.skipIf(!hasLimits)(
    "a memory hog ends with reason oom, its output kept",
    async () => {
      const r = await run(
        `echo before; node -e "const a=[]; for(;;) a.push(Buffer.alloc(1<<20, 1))"`,
        { limits: { memoryBytes: 96 * 1024 * 1024 } },
      );
      expect(r.state).toBe("oom");
      expect(r.stdout).toBe("before\n");
      expect(r.stderr).toContain("[limit=memory]");
      await stillServing();
    },
    60_000,
  );

  it("a 10 GB file is stopped by the file size limit (reason limit, file)", async () => {
    const r = await run("echo before; head -c 10G /dev/zero > huge", {
      limits: { fileSizeBytes: 1024 * 1024 },
    });
    expect(r.state).toBe("limit");
    expect(r.signal).toBe("SIGXFSZ");
    expect(r.stdout).toBe("before\n");
    expect(r.stderr).toContain("[limit=file]");
    expect(statSync(path.join(server.workspace, "huge")).size).toBeLessThanOrEqual(1024 * 1024);
    await stillServing();
  }, 60_000);

  it("a setsid daemon dies with its execution", async () => {
    const marker = 31_000 + (process.pid % 1000);
    const r = await run(`setsid sh -c 'sleep ${marker}' </dev/null >/dev/null 2>&1 & echo started`);
    expect(r.stdout).toBe("started\n");
    const deadline = Date.now() + 2000;
    while (hostProcesses(`sleep ${marker}`).length > 0 && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 50));
    }
    expect(hostProcesses(`sleep ${marker}`)).toEqual([]);
  });
});

describe.skipIf(!canConfine)("kill -9 of the server with confined commands running", () => {
  it("leaves no survivor: every sandbox dies with the server", async () => {
    ensureDistBuilt();
    const base = sandboxBase("ac-sandbox-kill9-");
    const server = await serve(path.join(base, "ws"), []);
    const marker = 32_000 + (process.pid % 1000);
    try {
      await server.client.exec(`sleep ${marker}`);
      await server.client.exec(`setsid sh -c 'sleep ${marker}' & sleep ${marker}`);
      await server.client.exec(`sh -c 'trap "" TERM HUP; sleep ${marker}'`);
      const deadline = Date.now() + 5000;
      // Running means the four `sleep`s themselves run (the sandboxes' own
      // processes carry the marker in their argv from the first exec on; a
      // sandbox killed while still starting is the watchdog's case, tested
      // in sandbox-warm.test.ts).
      const sleeping = () => findHostProcesses((cmd) => cmd.startsWith(`sleep ${marker}`)).length;
      while (sleeping() < 4 && Date.now() < deadline) {
        await new Promise((res) => setTimeout(res, 50));
      }
      expect(sleeping()).toBe(4);
      // Warm sandboxes (spawned ahead, waiting for a command) die with the server too.
      const warm = () => {
        const ofThisServer = new Set(hostProcesses(base));
        return hostProcesses(WARM_INIT).filter((p) => ofThisServer.has(p));
      };
      while (warm().length < 1 && Date.now() < deadline + 10_000) {
        await new Promise((res) => setTimeout(res, 50));
      }
      expect(warm().length).toBeGreaterThanOrEqual(1);
      server.child.kill("SIGKILL");
      await new Promise((res) => server.child.once("exit", res));
      // The sandboxes die with the server (parent-death signal, then the PID
      // namespace's end; the watchdog for one still starting up): well under
      // 1 s on a quiet machine. Under a fully loaded CI box their teardown
      // has taken longer, so the bound here is 10 s; a sandbox nothing kills
      // would survive it forever.
      const killedAt = Date.now();
      const remaining = () => [
        ...new Set([...hostProcesses(`sleep ${marker}`), ...hostProcesses(base)]),
      ];
      let left = remaining();
      while (left.length > 0 && Date.now() - killedAt < 10_000) {
        await new Promise((res) => setTimeout(res, 20));
        left = remaining();
      }
      // What each survivor is (state, parent, namespace pids), for the failure message.
      const described = left.map((p) => {
        try {
          return `${p} ${readFileSync(`/proc/${p}/status`, "utf8")
            .split("\n")
            .filter((l) => /^(State|PPid|Uid|NSpid)/.test(l))
            .join(" ")} ${readFileSync(`/proc/${p}/cmdline`, "utf8").replace(/\0/g, " ")}`;
        } catch {
          return `${p} (gone)`;
        }
      });
      for (const p of left) {
        try {
          process.kill(p, "SIGKILL");
        } catch {
          // gone meanwhile
        }
      }
      expect(described).toEqual([]);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  }, 60_000);
});

describe("agent-computer doctor", () => {
  const doctor = (args: string[]) => {
    try {
      const out = execFileSync(process.execPath, [cli, "doctor", ...args], { encoding: "utf8" });
      return { code: 0, out };
    } catch (err) {
      const e = err as { status: number; stdout: string };
      return { code: e.status, out: e.stdout };
    }
  };
  it("says what the host can enforce and what serve would, with the flags given", () => {
    ensureDistBuilt();
    const r = doctor(["--network", "none"]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/bubblewrap/);
    expect(r.out).toMatch(/cgroups/);
    expect(r.out).toMatch(/serve with these flags:/);
    if (canConfine) expect(r.out).toMatch(/confinement: confined/);
    else expect(r.out).toMatch(/NOT confined/);
  }, 30_000);
  it("exits non-zero when the flags cannot be met", () => {
    const required = doctor(["--confine", "required"]);
    expect(required.code).toBe(canConfine ? 0 : 1);
    const impossible = doctor(["--limit-memory", "1000T"]);
    expect(impossible.code).toBe(1);
    expect(impossible.out).toMatch(/refuse to start/);
  }, 30_000);
});
