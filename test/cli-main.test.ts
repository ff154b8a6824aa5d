// The `agent-computer` CLI as a real process (dist/cli/main.js) against a real
// server: exec's stdout/stderr bytes and exit code match running the command
// locally; `exec -i` forwards our stdin byte-exact and closes it at our EOF
// (without -i the command reads /dev/null); Ctrl-C forwards SIGINT;
// attach/ps/kill/logs; one clear line and a non-zero exit for an unreachable
// server, a bad token and an unknown id;
// `serve` prints its URL line and shuts down gracefully on SIGTERM (exit 0).

import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureDistBuilt } from "./support/dist.js";
import { type Harness, startServer } from "./support/server-harness.js";

const root = path.resolve(__dirname, "..");
const cli = path.join(root, "dist/cli/main.js");

let h: Harness;

interface Run {
  status: number | null;
  stdout: Buffer;
  stderr: string;
}

/**
 * Runs the CLI. `stdin.data` is piped to it, then its stdin is closed unless
 * `stdin.end` is false (left open, as a terminal or a slow producer would be).
 * Without `stdin` the CLI's stdin is an open, empty pipe.
 */
function run(
  args: string[],
  env: Record<string, string> = {},
  stdin?: { data: Uint8Array; end?: boolean },
): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, ...args], {
      env: { ...process.env, AGENT_COMPUTER_URL: h.url, AGENT_COMPUTER_TOKEN: h.token, ...env },
    });
    // EPIPE when the CLI exits before reading all we piped is expected, not a test failure.
    child.stdin.on("error", () => {});
    if (stdin) {
      child.stdin.write(stdin.data);
      if (stdin.end !== false) child.stdin.end();
    }
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (c) => out.push(c));
    child.stderr.on("data", (c) => err.push(c));
    child.on("close", (status) =>
      resolve({ status, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString() }),
    );
  });
}

beforeAll(async () => {
  ensureDistBuilt();
  h = await startServer();
}, 180_000);
afterAll(async () => {
  await h?.close();
});

describe("exec", () => {
  it("stdout, stderr and exit code match running the command locally", async () => {
    const script = "printf 'a\\000b\\377'; printf 'to-stderr' >&2; printf 'more\\n'; exit 3";
    const local = spawnSync("/bin/sh", ["-c", script], { cwd: h.workspace });
    const remote = await run(["exec", "--", script]);
    expect(remote.status).toBe(local.status);
    expect(remote.stdout.equals(local.stdout)).toBe(true);
    expect(remote.stderr).toBe(local.stderr.toString());
  });

  it("argv form and binary output are byte-exact", async () => {
    const data = randomBytes(3 * 1024 * 1024 + 17);
    writeFileSync(path.join(h.workspace, "blob.bin"), data);
    const remote = await run(["exec", "--", "cat", "blob.bin"]);
    expect(remote.status).toBe(0);
    expect(createHash("sha256").update(remote.stdout).digest("hex")).toBe(
      createHash("sha256").update(data).digest("hex"),
    );
  });

  it("--cwd and --env reach the command", async () => {
    await run(["exec", "--", "mkdir -p d1"]);
    const r = await run([
      "exec",
      "--cwd",
      "d1",
      "--env",
      "X=1=2",
      "--",
      'printf "%s %s" "$(basename "$PWD")" "$X"',
    ]);
    expect(r.stderr).toBe("");
    expect(r.stdout.toString()).toBe("d1 1=2");
  });

  it("Ctrl-C sends SIGINT to the remote command", async () => {
    const child: ChildProcess = spawn(
      process.execPath,
      [cli, "exec", "--", 'trap "echo got-int; exit 42" INT; echo ready; sleep 20 & wait'],
      { env: { ...process.env, AGENT_COMPUTER_URL: h.url, AGENT_COMPUTER_TOKEN: h.token } },
    );
    let out = "";
    await new Promise<void>((resolve) =>
      child.stdout!.on("data", (c) => {
        out += c;
        if (out.includes("ready")) resolve();
      }),
    );
    child.kill("SIGINT");
    const status = await new Promise((resolve) => child.on("close", resolve));
    expect(`${out}`).toContain("ready");
    expect(status).toBe(42);
  });

  it("--detach prints the id; attach replays it with the exit code; logs prints it; ps lists it", async () => {
    const d = await run(["exec", "--detach", "--", "echo detached-out; exit 5"]);
    expect(d.status).toBe(0);
    const id = d.stdout.toString().trim();
    const a = await run(["attach", id]);
    expect(a.stdout.toString()).toBe("detached-out\n");
    expect(a.status).toBe(5);
    const a2 = await run(["attach", id, "--after", "1"]);
    expect(a2.stdout.toString()).toBe("");
    expect(a2.status).toBe(5);
    const l = await run(["logs", id]);
    expect(l.stdout.toString()).toBe("detached-out\n");
    const ps = await run(["ps"]);
    expect(ps.stdout.toString()).toContain(id);
    const json = JSON.parse((await run(["ps", "--json"])).stdout.toString());
    expect(json.find((r: { id: string }) => r.id === id)).toMatchObject({
      state: "exited",
      exitCode: 5,
    });
  });

  it("kill ID ends a running command", async () => {
    const d = await run(["exec", "--detach", "--", "sleep 30"]);
    const id = d.stdout.toString().trim();
    expect((await run(["kill", id, "--signal", "SIGKILL"])).status).toBe(0);
    const a = await run(["attach", id]);
    expect(a.status).toBe(137);
  });
});

describe("exec -i forwards the CLI's stdin", () => {
  const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

  it("1 MiB of binary stdin comes back byte-exact through `cat`, exit 0", async () => {
    const data = randomBytes(1024 * 1024);
    const r = await run(["exec", "-i", "--", "cat"], {}, { data });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(r.stdout.length).toBe(data.length);
    expect(sha(r.stdout)).toBe(sha(data));
  });

  it("end of input reaches the command: `wc -c` counts every byte piped", async () => {
    const data = randomBytes(200_003);
    const r = await run(["exec", "-i", "--", "wc", "-c"], {}, { data });
    expect(r.status).toBe(0);
    expect(r.stdout.toString().trim()).toBe(String(data.length));
  });

  it("empty stdin still closes the command's stdin: `wc -c` prints 0", async () => {
    const r = await run(["exec", "-i", "--", "wc", "-c"], {}, { data: new Uint8Array(0) });
    expect(r.status).toBe(0);
    expect(r.stdout.toString().trim()).toBe("0");
  });

  it("a command that reads to end of input then exits 3 makes the CLI exit 3", async () => {
    // `cat` only returns at EOF, so the exit code proves the close reached it.
    const r = await run(
      ["exec", "-i", "--", "sh", "-c", "cat >/dev/null; exit 3"],
      {},
      { data: Buffer.from("some input\n") },
    );
    expect(r.stderr).toBe("");
    expect(r.status).toBe(3);
  });

  it("a command that stops reading early is not an error: its output, its code, silent stderr", async () => {
    // Like `head -c 10 <big` locally: the rest of the input is dropped, no
    // complaint about the closed pipe (the forwarder hits ECLOSED here).
    const data = randomBytes(3 * 1024 * 1024);
    const r = await run(["exec", "-i", "--", "head", "-c", "10"], {}, { data });
    expect(r.status).toBe(0);
    expect(r.stdout.equals(data.subarray(0, 10))).toBe(true);
    expect(r.stderr).toBe("");
  });

  it("the CLI exits with the command even while its own stdin stays open", async () => {
    const r = await run(
      ["exec", "-i", "--", "head", "-c", "3"],
      {},
      { data: Buffer.from("abcdef"), end: false },
    );
    expect(r.status).toBe(0);
    expect(r.stdout.toString()).toBe("abc");
  });

  it("without -i the command's stdin is /dev/null: `cat` ends at once with no output though the CLI's stdin has data and stays open", async () => {
    const r = await run(
      ["exec", "--", "cat"],
      {},
      { data: Buffer.from("not for the command\n"), end: false },
    );
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(r.stdout.length).toBe(0);
    const fd0 = await run(
      ["exec", "--", "readlink", "/proc/self/fd/0"],
      {},
      {
        data: Buffer.from("x"),
        end: false,
      },
    );
    expect(fd0.stdout.toString().trim()).toBe("/dev/null");
  });
});

describe("attach when the log's ring dropped the start", () => {
  it("warns once on stderr, prints the retained tail, exits with the code", async () => {
    // Spill off: the drop must happen in the ring itself.
    const small = await startServer({
      computer: { logMaxBytes: 4096, spill: { spillMaxBytes: 0 } },
    });
    try {
      const env = { AGENT_COMPUTER_URL: small.url, AGENT_COMPUTER_TOKEN: small.token };
      // The last line comes apart (after a pause) so that it is its own small
      // event: on a loaded machine the 299 lines before it can be read as one
      // event larger than the 4 KiB ring, which the ring then drops whole.
      const handle = await small.client.exec(
        "for i in $(seq 1 299); do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxx; done; sleep 0.1; echo line-300-xxxxxxxxxxxxxxxxxxxxxxxx; exit 4",
      );
      await handle.result();
      const r = await run(["attach", handle.id], env);
      expect(r.status).toBe(4);
      expect(r.stderr).toMatch(/was dropped by the server's log; continuing/);
      expect(r.stdout.toString()).toMatch(/line-300-x+\n$/);
    } finally {
      await small.close();
    }
  });
});

describe("failures are one clear line and a non-zero exit", () => {
  it("unreachable server", async () => {
    const r = await run(["ps"], { AGENT_COMPUTER_URL: "http://127.0.0.1:1" });
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(/cannot reach/);
  });

  it("bad token", async () => {
    const r = await run(["exec", "--", "true"], { AGENT_COMPUTER_TOKEN: "wrong" });
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(/unauthorized/);
  });

  it("unknown id", async () => {
    for (const args of [
      ["attach", "nope"],
      ["kill", "nope"],
      ["logs", "nope"],
    ]) {
      const r = await run(args);
      expect(r.status, args.join(" ")).toBe(1);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stderr).toMatch(/no such execution/);
    }
  });
});

describe("serve", () => {
  it("prints one URL line with the token, serves, and exits 0 on SIGTERM after killing running commands", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "ac-serve-"));
    const child = spawn(
      process.execPath,
      [cli, "serve", "--port", "0", "--workspace", path.join(dir, "ws"), "--quiet"],
      {
        env: { ...process.env, AGENT_COMPUTER_TOKEN: "serve-token-0123456789" },
      },
    );
    let out = "";
    child.stdout.on("data", (c) => (out += c));
    const line = await new Promise<string>((resolve) => {
      const check = () => {
        const m = /agent-computer listening: (\S+)/.exec(out);
        if (m) resolve(m[1]!);
      };
      child.stdout.on("data", check);
    });
    const url = new URL(line);
    expect(url.searchParams.get("token")).toBe("serve-token-0123456789");
    const base = `${url.protocol}//${url.host}`;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const r = await fetch(`${base}/v1/execs`, {
      method: "POST",
      headers: {
        authorization: "Bearer serve-token-0123456789",
        "content-type": "application/json",
      },
      body: JSON.stringify({ command: "sleep 30" }),
    });
    const { id } = await r.json();
    const events = await fetch(`${base}/v1/execs/${id}/events`, {
      headers: { authorization: "Bearer serve-token-0123456789" },
    });
    const text = events.text();
    child.kill("SIGTERM");
    const status = await new Promise((resolve) => child.on("close", resolve));
    expect(status).toBe(0);
    const last = (await text).trim().split("\n").at(-1)!;
    expect(JSON.parse(last)).toMatchObject({ name: "exit", reason: "killed" });
    expect(out).toMatch(/"msg":"exec exit"/);
  });

  it("refuses a spawn-helper count outside 1..16 with a message that says so, before listening", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "ac-serve-"));
    for (const n of ["0", "17"]) {
      const child = spawn(process.execPath, [
        cli,
        "serve",
        "--port",
        "0",
        "--workspace",
        path.join(dir, "ws"),
        "--spawn-helpers",
        n,
      ]);
      let out = "";
      let err = "";
      child.stdout.on("data", (c) => (out += c));
      child.stderr.on("data", (c) => (err += c));
      const status = await new Promise((resolve) => child.on("close", resolve));
      expect(status, n).not.toBe(0);
      expect(err, n).toMatch(/--spawn-helpers must be an integer from 1 to 16/);
      expect(out, n).not.toMatch(/listening/);
    }
  });
});
