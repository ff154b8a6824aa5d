// The sandbox's rules without a sandbox: limits (defaults, maxima, refusals),
// network policies (narrowing, allow-list matching), exit decoding and the
// reason a limit gives, the profile's flags, and the egress proxy on a host
// socket (HTTP and CONNECT, allowed and denied). Runs on any Linux host.

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  allowed,
  builtInMaxima,
  createSandbox,
  DEFAULT_LIMITS,
  narrowPolicy,
  startEgressProxy,
  verdictOf,
} from "../src/sandbox/index.js";
import { resolveLimits } from "../src/sandbox/limits.js";
import {
  bwrapArgs,
  FORWARDER_SOURCE,
  type ProfileInput,
  rlimitArgs,
} from "../src/sandbox/profile.js";

describe("limits", () => {
  const maxima = { ...builtInMaxima(), memoryBytes: 4 * 2 ** 30, pids: 1000 };
  it("fills defaults and accepts values up to the maxima", () => {
    expect(resolveLimits(DEFAULT_LIMITS, maxima, undefined)).toEqual(DEFAULT_LIMITS);
    expect(resolveLimits(DEFAULT_LIMITS, maxima, { pids: 1000 }).pids).toBe(1000);
  });
  it("refuses values above the maxima, unknown names and non-numbers with EINVAL", () => {
    expect(() => resolveLimits(DEFAULT_LIMITS, maxima, { pids: 1001 })).toThrow(
      /exceeds the maximum/,
    );
    expect(() => resolveLimits(DEFAULT_LIMITS, maxima, { bogus: 1 } as never)).toThrow(
      /unknown limit/,
    );
    expect(() => resolveLimits(DEFAULT_LIMITS, maxima, { memoryBytes: -1 })).toThrow(/positive/);
    try {
      resolveLimits(DEFAULT_LIMITS, maxima, { pids: 1001 });
    } catch (err) {
      expect((err as { code: string }).code).toBe("EINVAL");
    }
  });
  it("a bounded 'none'-able limit cannot be switched off", () => {
    const m = { ...maxima, cpus: 2 };
    expect(() => resolveLimits({ ...DEFAULT_LIMITS, cpus: 1 }, m, { cpus: 0 })).toThrow(
      /none exceeds/,
    );
    expect(resolveLimits({ ...DEFAULT_LIMITS, cpus: 1 }, m, { cpus: 1.5 }).cpus).toBe(1.5);
  });
  it("rlimits: file size, descriptors and core always; data and processes only without cgroups", () => {
    expect(rlimitArgs(DEFAULT_LIMITS, { memory: true, pids: true })).toEqual([
      "-f",
      String(DEFAULT_LIMITS.fileSizeBytes / 512),
      "-n",
      "4096",
      "-c",
      "0",
    ]);
    const floor = rlimitArgs(DEFAULT_LIMITS, { memory: false, pids: false }).join(" ");
    expect(floor).toContain(`-d ${DEFAULT_LIMITS.memoryBytes / 1024}`);
    expect(floor).toContain("-u 512");
  });
});

describe("network policy", () => {
  it("narrows, never widens", () => {
    expect(narrowPolicy("host", "none")).toBe("none");
    expect(narrowPolicy("host", { allow: ["a.test"] })).toEqual({ allow: ["a.test"] });
    expect(() => narrowPolicy("none", "host")).toThrow(/exceeds/);
    expect(() => narrowPolicy({ allow: ["a.test"] }, "host")).toThrow(/exceeds/);
    expect(
      narrowPolicy({ allow: ["*.example.com"] }, { allow: ["api.example.com", "other.test"] }),
    ).toEqual({
      allow: ["api.example.com"],
    });
    expect(() => narrowPolicy("host", { allow: ["bad name"] })).toThrow(/domain pattern/);
  });
  it("matches names exactly, subdomains by *., case and trailing dot ignored", () => {
    const list = ["allowed.test", "*.example.com"];
    expect(allowed(list, "allowed.test")).toBe(true);
    expect(allowed(list, "ALLOWED.test.")).toBe(true);
    expect(allowed(list, "sub.allowed.test")).toBe(false);
    expect(allowed(list, "api.example.com")).toBe(true);
    expect(allowed(list, "example.com")).toBe(false);
    expect(allowed(list, "evilexample.com")).toBe(false);
    expect(allowed(["*"], "anything.test")).toBe(true);
  });
});

describe("exit verdicts", () => {
  it("decodes bubblewrap's 128+N into the signal, only when confined", () => {
    expect(verdictOf({ code: 137, signal: null }, true, [])).toMatchObject({
      code: null,
      signal: "SIGKILL",
    });
    expect(verdictOf({ code: 137, signal: null }, false, [])).toMatchObject({
      code: 137,
      signal: null,
    });
  });
  it("names the limit: oom first, then file, cpu, pids (only when the command failed)", () => {
    expect(verdictOf({ code: 137, signal: null }, true, ["memory"])).toMatchObject({
      reason: "oom",
      limit: "memory",
    });
    expect(verdictOf({ code: null, signal: "SIGXFSZ" }, true, [])).toMatchObject({
      reason: "limit",
      limit: "file",
      hit: ["file"],
    });
    expect(verdictOf({ code: 2, signal: null }, true, ["pids"])).toMatchObject({
      reason: "limit",
      limit: "pids",
    });
    const survived = verdictOf({ code: 0, signal: null }, true, ["pids"]);
    expect(survived.reason).toBeUndefined();
    expect(survived.hit).toEqual(["pids"]);
  });
});

describe("profile", () => {
  const input: ProfileInput = {
    bwrap: "/usr/bin/bwrap",
    serverPid: 1,
    setpriv: null,
    system: ["--ro-bind", "/usr", "/usr"],
    workspace: "/w",
    cwd: "/w/sub",
    hide: [{ path: "/usr/lib/node_modules/agent-computer", dir: true }],
    readOnly: [],
    dirs: ["/root"],
    network: "none",
    proxy: null,
    hostNetBinds: ["/run/systemd/resolve/stub-resolv.conf"],
    limits: DEFAULT_LIMITS,
    cgroupHas: { memory: true, pids: true },
    procsFiles: [],
    argv: ["true"],
  };
  it("unshares every namespace, drops capabilities, dies with its parent", () => {
    const a = bwrapArgs(input);
    for (const f of [
      "--unshare-user",
      "--unshare-pid",
      "--unshare-ipc",
      "--unshare-uts",
      "--unshare-net",
    ]) {
      expect(a).toContain(f);
    }
    expect(a).toContain("--die-with-parent");
    expect(a.join(" ")).toContain("--cap-drop ALL");
    expect(a.join(" ")).toContain("--bind /w /w");
    expect(a.join(" ")).toContain(`--size ${DEFAULT_LIMITS.tmpBytes} --tmpfs /tmp`);
    expect(a.join(" ")).toContain("--tmpfs /usr/lib/node_modules/agent-computer --remount-ro");
    expect(a.join(" ")).toContain("--chdir /w/sub");
    expect(a.join(" ")).not.toContain("stub-resolv");
  });
  it("shares the network only in host mode, with its resolv.conf", () => {
    const a = bwrapArgs({ ...input, network: "host" });
    expect(a).not.toContain("--unshare-net");
    expect(a.join(" ")).toContain("--ro-bind /run/systemd/resolve/stub-resolv.conf");
  });
});

describe("off mode", () => {
  it("spawns the argv untouched", async () => {
    const ws = mkdtempSync(path.join(tmpdir(), "ac-off-"));
    try {
      const sb = await createSandbox({ workspace: ws, confine: "off" });
      const p = await sb.prepare({ argv: ["echo", "hi"], cwd: ws, env: { A: "1" } });
      expect(p).toMatchObject({ file: "echo", args: ["hi"], env: { A: "1" }, confined: false });
      await expect(
        sb.prepare({ argv: ["true"], cwd: ws, env: {}, network: "none" }),
      ).rejects.toThrow(/needs confinement/);
      await expect(sb.prepare({ argv: ["true"], cwd: "/etc", env: {} })).rejects.toThrow(/outside/);
      await sb.dispose();
    } finally {
      rmSync(ws, { recursive: true, force: true });
    }
  });
});

describe("egress proxy", () => {
  let dir: string;
  let upstream: http.Server;
  let port: number;
  let proxy: Awaited<ReturnType<typeof startEgressProxy>>;
  let fwdPort: number;
  let forwarder: ReturnType<typeof spawn>;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "ac-proxy-"));
    upstream = http.createServer((req, res) =>
      res.end(`hello ${req.method} ${req.headers.host}\n`),
    );
    await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
    port = (upstream.address() as AddressInfo).port;
    proxy = await startEgressProxy({
      socketPath: path.join(dir, "egress.sock"),
      allow: ["allowed.test"],
      resolve: async (name) => {
        if (name.endsWith(".test")) return "127.0.0.1";
        throw new Error(`no such name ${name}`);
      },
    });
    // The forwarder the sandbox runs, here on the host's loopback.
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    fwdPort = (probe.address() as AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    forwarder = spawn(
      process.execPath,
      ["-e", FORWARDER_SOURCE, String(fwdPort), proxy.socketPath],
      {
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    await new Promise((r) => forwarder.stdout!.once("data", r));
  });

  afterAll(async () => {
    forwarder?.kill("SIGKILL");
    await proxy?.close();
    upstream?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const get = (name: string) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(
        {
          host: "127.0.0.1",
          port: fwdPort,
          path: `http://${name}:${port}/x`,
          headers: { host: `${name}:${port}` },
        },
        (res) => {
          let body = "";
          res.on("data", (c) => {
            body += c;
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on("error", reject);
      req.end();
    });

  it("forwards plain HTTP for an allowed name and refuses another with a one-line 403", async () => {
    expect(await get("allowed.test")).toEqual({
      status: 200,
      body: `hello GET allowed.test:${port}\n`,
    });
    const denied = await get("denied.test");
    expect(denied.status).toBe(403);
    expect(denied.body).toBe(
      "agent-computer sandbox: network access to denied.test is not allowed (not on the allow-list)\n",
    );
  });

  it("tunnels CONNECT for an allowed name and refuses another", async () => {
    const connect = (name: string) =>
      new Promise<string>((resolve) => {
        const s = net.connect(fwdPort, "127.0.0.1", () => {
          s.write(`CONNECT ${name}:${port} HTTP/1.1\r\nHost: ${name}:${port}\r\n\r\n`);
        });
        let text = "";
        s.on("data", (c) => {
          text += c;
          if (text.includes("Connection Established\r\n\r\n") && !text.includes("hello")) {
            s.write(`GET / HTTP/1.1\r\nHost: ${name}\r\nConnection: close\r\n\r\n`);
          }
        });
        s.on("close", () => resolve(text));
      });
    const ok = await connect("allowed.test");
    expect(ok).toMatch(/^HTTP\/1\.1 200 Connection Established/);
    expect(ok).toContain("hello GET allowed.test");
    const no = await connect("denied.test");
    expect(no).toMatch(/^HTTP\/1\.1 403 Forbidden/);
    expect(no).toContain("network access to denied.test is not allowed");
  });
});
