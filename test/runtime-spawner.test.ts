// Commands forked by the spawn helper (src/runtime/spawner.ts), not by the
// process that runs the Computer: the command's parent is the helper, its
// output and exit arrive whole however fast it ends, the helper's death
// kills what it started (and the next exec starts a new one), and the helper
// goes away with the Computer, or with its process however that dies.
// Commands starting together are spread over two helpers by default (one at a
// time they go to the same one); one helper's death takes only its commands.

import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import type { Socket } from "node:net";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { Computer } from "../src/index.js";
import { holdReads } from "../src/runtime/spawner.js";
import { computerFixture, eventually } from "./runtime-support.js";

const { ws, make, forget } = computerFixture();

function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return undefined;
  }
}

/** Alive and not a zombie. */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

describe("the spawn helper", () => {
  it("forks commands instead of this process: the command's parent is the helper", async () => {
    const c = make();
    const run = await c.exec("sleep 30");
    const info = await run.info();
    const helper = parentOf(info.pid!)!;
    expect(helper).not.toBe(process.pid);
    expect(parentOf(helper)).toBe(process.pid);
    await run.kill();
    expect((await run.result()).status).toBe("killed");
  });

  it("runs with an empty environment: none of this process's secrets", async () => {
    process.env.AC_SPAWNER_TEST_SECRET = "s3cret";
    try {
      const c = make();
      const run = await c.exec("sleep 30");
      const helper = parentOf((await run.info()).pid!)!;
      // Only what Node's IPC channel itself needs.
      const names = readFileSync(`/proc/${helper}/environ`, "latin1")
        .split("\0")
        .filter(Boolean)
        .map((e) => e.slice(0, e.indexOf("=")));
      expect(names.sort()).toEqual(["NODE_CHANNEL_FD", "NODE_CHANNEL_SERIALIZATION_MODE"]);
      await run.kill();
    } finally {
      delete process.env.AC_SPAWNER_TEST_SECRET;
    }
  });

  it("spreads commands over two helpers by default; a killed helper takes only its own commands", async () => {
    const c = make();
    // One at a time, commands always go to the same helper.
    const parents = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const r = await (await c.exec("echo $PPID")).result();
      parents.add(Buffer.from(r.stdout as Uint8Array).toString());
    }
    expect(parents.size).toBe(1);
    const runs = await Promise.all([c.exec("sleep 30"), c.exec("sleep 30")]);
    const pids = await Promise.all(runs.map(async (r) => (await r.info()).pid!));
    const helpers = pids.map((p) => parentOf(p)!);
    expect(new Set(helpers).size).toBe(2);
    for (const h of helpers) expect(parentOf(h)).toBe(process.pid);
    process.kill(helpers[0]!, "SIGKILL");
    expect((await runs[0]!.result()).status).toBe("killed");
    await new Promise((r) => setTimeout(r, 200));
    expect(running(pids[1]!)).toBe(true);
    expect((await runs[1]!.info()).state).toBe("running");
    await runs[1]!.kill();
    expect((await runs[1]!.result()).status).toBe("killed");
  });

  it("takes spawnHelpers from 1 to 16 and refuses anything else with EINVAL", async () => {
    const one = make({ spawnHelpers: 1 });
    const runs = await Promise.all([one.exec("sleep 30"), one.exec("sleep 30")]);
    const helpers = await Promise.all(runs.map(async (r) => parentOf((await r.info()).pid!)));
    expect(helpers[0]).toBe(helpers[1]);
    for (const r of runs) await r.kill();
    for (const bad of [0, 17, 1.5, Number.NaN]) {
      expect(() => new Computer({ workspace: ws.dir, spawnHelpers: bad })).toThrow(
        expect.objectContaining({ code: "EINVAL", message: expect.stringMatching(/spawnHelpers/) }),
      );
    }
  });

  it("holds a received pipe's reads until released: the bytes wait in the pipe, then arrive", async () => {
    // The output pipes arrive one message apart; each is held until both are
    // here, so early stdout cannot be consumed before stderr is even read.
    const child = spawn("/bin/sh", ["-c", "printf early; sleep 5"], { stdio: "pipe" });
    try {
      const release = holdReads(child.stdout as unknown as Socket);
      await new Promise((r) => setTimeout(r, 300));
      expect(child.stdout.readableLength).toBe(0);
      let arrived = false;
      const got = new Promise<string>((resolve) =>
        child.stdout.once("data", (d: Buffer) => {
          arrived = true;
          resolve(String(d));
        }),
      );
      await new Promise((r) => setTimeout(r, 100));
      expect(arrived).toBe(false); // a listener alone does not restart it
      release();
      expect(await got).toBe("early");
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("loses nothing of commands that write and exit before the runtime reads them", async () => {
    const c = make();
    const runs = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        c.exec(`printf 'out-${i}'; printf 'err-${i}' >&2; exit ${i % 7}`),
      ),
    );
    const results = await Promise.all(runs.map((r) => r.result()));
    results.forEach((r, i) => {
      expect(r.exitCode).toBe(i % 7);
      expect(Buffer.from(r.stdout as Uint8Array).toString()).toBe(`out-${i}`);
      expect(Buffer.from(r.stderr as Uint8Array).toString()).toBe(`err-${i}`);
    });
  });

  it("a program that cannot be started exits 127, also when many start at once", async () => {
    const c = make();
    const runs = await Promise.all(
      Array.from({ length: 40 }, () => c.exec({ argv: ["/nonexistent/prog"] })),
    );
    for (const r of await Promise.all(runs.map((x) => x.result()))) {
      expect(r.exitCode).toBe(127);
      expect(Buffer.from(r.stderr as Uint8Array).toString()).toMatch(/cannot run/);
    }
  });

  it("passes stdin, env and cwd through", async () => {
    const c = make();
    const run = await c.exec('read line; printf "%s|%s|%s" "$line" "$GREETING" "$(pwd)"', {
      stdin: "pipe",
      env: { GREETING: "hello" },
    });
    await run.write("typed\n");
    await run.end();
    const r = await run.result();
    expect(Buffer.from(r.stdout as Uint8Array).toString()).toMatch(/^typed\|hello\|\/.+$/);
  });

  it("a killed helper takes its commands with it; they end as killed and the next exec works", async () => {
    const c = make();
    const run = await c.exec("sleep 30");
    const pid = (await run.info()).pid!;
    const helper = parentOf(pid)!;
    process.kill(helper, "SIGKILL");
    const r = await run.result();
    expect(r.status).toBe("killed");
    expect(Buffer.from(r.stderr as Uint8Array).toString()).toMatch(
      /the process that started this command died/,
    );
    await eventually(() => !running(pid));
    const again = await (await c.exec("echo again")).result();
    expect(Buffer.from(again.stdout as Uint8Array).toString()).toBe("again\n");
  });

  it("a helper that dies before handing a command over: exec fails with EUNAVAILABLE and nothing of it runs", async () => {
    const c = make({ spawnHelpers: 1 });
    const first = await c.exec("sleep 30");
    const helper = parentOf((await first.info()).pid!)!;
    // Stopped, the helper cannot answer; killed, it never will.
    process.kill(helper, "SIGSTOP");
    const late = c.exec("sleep 0.3; touch started.flag");
    await new Promise((r) => setTimeout(r, 100));
    process.kill(helper, "SIGKILL");
    await expect(late).rejects.toMatchObject({ code: "EUNAVAILABLE" });
    expect((await first.result()).status).toBe("killed");
    await new Promise((r) => setTimeout(r, 600));
    expect(existsSync(path.join(ws.dir, "started.flag"))).toBe(false);
    expect((await c.list()).map((r) => r.command)).not.toContain("sleep 0.3; touch started.flag");
    const again = await (await c.exec("echo again")).result();
    expect(Buffer.from(again.stdout as Uint8Array).toString()).toBe("again\n");
  });

  it("goes away when the Computer is closed", async () => {
    const c = make();
    const run = await c.exec("true");
    await run.result();
    const other = await c.exec("sleep 30");
    const helper = parentOf((await other.info()).pid!)!;
    forget(c);
    await c.close();
    await eventually(() => !running(helper));
  });

  it("dies with its process, however it dies (kill -9), and kills the commands it started", async () => {
    const entry = path.resolve(__dirname, "../dist/index.js");
    const script = `
      const { Computer } = await import(${JSON.stringify(entry)});
      const c = new Computer({ workspace: ${JSON.stringify(ws.dir)} });
      const run = await c.exec("sleep 300");
      console.log(JSON.stringify({ pid: (await run.info()).pid }));
      setInterval(() => {}, 1000);
    `;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const line = await new Promise<string>((resolve, reject) => {
      let out = "";
      child.stdout!.on("data", (d) => {
        out += d;
        if (out.includes("\n")) resolve(out.trim());
      });
      child.once("exit", () => reject(new Error(`exited first: ${out}`)));
    });
    const { pid } = JSON.parse(line) as { pid: number };
    const helper = parentOf(pid)!;
    expect(parentOf(helper)).toBe(child.pid);
    child.kill("SIGKILL");
    await eventually(() => !running(helper) && !running(pid));
    expect([running(helper), running(pid)]).toEqual([false, false]);
  });

  it('spawns in this process with spawner: "inline", and refuses an unknown mode', async () => {
    const c = make({ spawner: "inline" });
    const run = await c.exec("sleep 30");
    expect(parentOf((await run.info()).pid!)).toBe(process.pid);
    await run.kill();
    await run.result();
    expect(() => new Computer({ workspace: ws.dir, spawner: "fork" as never })).toThrow(
      /spawner must be/,
    );
  });
});
