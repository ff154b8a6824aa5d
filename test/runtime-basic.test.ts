// The runtime with real processes: output, ordering, stdin, encodings, exit
// codes, kill, cwd confinement and the error codes of the API.
import { mkdirSync, symlinkSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Computer } from "../src/index.js";
import type { ExitEvent } from "../src/wire/types.js";
import { codeOf, collect, expectGapFree, logged, tempDir, textOf } from "./runtime-support.js";

let ws: ReturnType<typeof tempDir>;
let computer: Computer;

beforeEach(() => {
  ws = tempDir();
  computer = new Computer({ workspace: ws.dir, killGraceMs: 500 });
});
afterEach(async () => {
  await computer.close();
  ws.cleanup();
});

describe("Computer: running commands", () => {
  it("runs printf and streams its bytes then exit", async () => {
    const run = await computer.exec("printf 'hello\\nworld'");
    const evs = logged(await collect(run.events()));
    expect(textOf(evs)).toBe("hello\nworld");
    expect(evs[0]!.value).toBeInstanceOf(Uint8Array);
    const exit = evs.at(-1) as ExitEvent;
    expect(exit).toMatchObject({ name: "exit", value: 0, reason: "exited" });
    expectGapFree(evs);
    const res = await run.result();
    expect(res).toMatchObject({ id: run.id, status: "exited", exitCode: 0, truncated: false });
    expect(new TextDecoder().decode(res.stdout as Uint8Array)).toBe("hello\nworld");
  });

  it("runs an argv without a shell and reports a missing program as exit 127", async () => {
    const run = await computer.exec({ argv: ["printf", "%s-%s", "a b", "$HOME"] });
    expect(textOf(await collect(run.events()))).toBe("a b-$HOME");
    const bad = await computer.exec({ argv: ["/nonexistent/prog"] });
    const res = await bad.result();
    expect(res.exitCode).toBe(127);
    expect(new TextDecoder().decode(res.stderr as Uint8Array)).toMatch(/cannot run/);
  });

  it("reports exit codes and numbers stdout and stderr in one gap-free order", async () => {
    const run = await computer.exec(
      "for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; sleep 0.01; done; exit 3",
      { encoding: "utf8" },
    );
    const evs = logged(await collect(run.events()));
    expectGapFree(evs);
    expect(textOf(evs, "stdout")).toBe("out1\nout2\nout3\nout4\nout5\n");
    expect(textOf(evs, "stderr")).toBe("err1\nerr2\nerr3\nerr4\nerr5\n");
    // With sleeps between writes, the read order is the write order.
    const order = evs.filter((e) => e.name !== "exit").map((e) => `${e.name}:${e.value}`);
    expect(order.join("")).toContain("stdout:out1\nstderr:err1\nstdout:out2\n");
    expect(evs.at(-1)).toMatchObject({ name: "exit", value: 3 });
    expect((await run.info()).state).toBe("exited");
  });

  it("feeds stdin from a string, and from write()/end() with stdin: pipe", async () => {
    const a = await computer.exec("cat", { stdin: "from string\n", encoding: "utf8" });
    expect((await a.result()).stdout).toBe("from string\n");
    const b = await computer.exec("cat; echo done", { stdin: "pipe", encoding: "utf8" });
    await b.write("line 1\n");
    await b.write(new TextEncoder().encode("line 2\n"));
    await b.end();
    const res = await b.result();
    expect(res.stdout).toBe("line 1\nline 2\ndone\n");
    expect(await codeOf(b.write("late"))).toBe("ECLOSED");
    const c = await computer.exec("true");
    await c.result();
    expect(await codeOf(computer.exec("cat", { stdin: "pipe" }).then((h) => h.end()))).toBe(
      undefined,
    );
  });

  it("pipes yes | head -c through unchanged", async () => {
    const run = await computer.exec("yes | head -c 1000000");
    const res = await run.result();
    const out = res.stdout as Uint8Array;
    expect(out.byteLength).toBe(1_000_000);
    expect(Buffer.from(out).toString()).toBe("y\n".repeat(500_000));
  });

  it("never splits a character in utf8 mode, even across a pause between writes", async () => {
    // "é" is C3 A9: write the first byte, pause, then the second.
    const run = await computer.exec(
      "printf 'a\\303'; sleep 0.3; printf '\\251b'; printf '\\377\\n'",
      {
        encoding: "utf8",
      },
    );
    const evs = logged(await collect(run.events()));
    const texts = evs.filter((e) => e.name === "stdout").map((e) => e.value as string);
    expect(texts.join("")).toBe("aéb\uFFFD\n");
    for (const t of texts) expect(t).not.toContain("\uFFFD\uFFFD");
    expect(texts[0]).toBe("a");
  });

  it("kills the process group with a signal and records reason killed", async () => {
    const run = await computer.exec("echo started; sleep 30");
    const reader = run.events().getReader();
    expect((await reader.read()).value).toMatchObject({ name: "stdout" });
    await run.kill();
    const rest: unknown[] = [];
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest.push(value);
    }
    expect(rest.at(-1)).toMatchObject({
      name: "exit",
      value: 143,
      signal: "SIGTERM",
      reason: "killed",
    });
    expect((await run.info()).state).toBe("killed");
    await run.kill(); // finished: no-op
  });

  it("confines cwd to the workspace, symlinks included (EINVAL)", async () => {
    mkdirSync(path.join(ws.dir, "sub"));
    symlinkSync("/tmp", path.join(ws.dir, "out"));
    const run = await computer.exec("pwd", { cwd: "sub", encoding: "utf8" });
    expect((await run.result()).stdout).toMatch(/\/sub\n$/);
    expect((await run.info()).cwd).toBe("sub");
    expect(await codeOf(computer.exec("pwd", { cwd: "../" }))).toBe("EINVAL");
    expect(await codeOf(computer.exec("pwd", { cwd: "out" }))).toBe("EINVAL");
    expect(await codeOf(computer.exec("pwd", { cwd: "missing" }))).toBe("EINVAL");
  });

  it("overlays env on the documented base environment", async () => {
    // A secret in the server's environment must not reach commands.
    process.env.SECRET_TOKEN = "leak";
    const c = new Computer({ workspace: ws.dir });
    delete process.env.SECRET_TOKEN;
    const run = await c.exec('echo "$FOO|$PATH|$AGENT_COMPUTER_EXEC_ID|$SECRET_TOKEN"', {
      env: { FOO: "bar" },
      encoding: "utf8",
      id: "env-1",
    });
    const out = (await run.result()).stdout as string;
    await c.close();
    const [foo, p, id, secret] = out.trim().split("|");
    expect(foo).toBe("bar");
    expect(p).toContain("/bin");
    expect(id).toBe("env-1");
    expect(secret).toBe("");
    expect(await codeOf(computer.exec("true", { env: { "A=B": "x" } }))).toBe("EINVAL");
  });

  it("answers with error codes: ENOENT, EEXEC_BUSY, EINVAL, ELIMIT", async () => {
    expect(await codeOf(computer.get("nope"))).toBe("ENOENT");
    expect(await codeOf(computer.kill("nope"))).toBe("ENOENT");
    const run = await computer.exec("sleep 30", { id: "busy" });
    expect(await codeOf(computer.exec("true", { id: "busy" }))).toBe("EEXEC_BUSY");
    expect(await codeOf(computer.exec("true", { id: "bad id!" }))).toBe("EINVAL");
    expect(await codeOf(computer.exec(""))).toBe("EINVAL");
    expect(await codeOf(computer.exec("true", { timeoutMs: -1 }))).toBe("EINVAL");
    expect(await codeOf(run.kill("SIGNOPE"))).toBe("EINVAL");
    await run.kill("SIGKILL");
    await run.result();
    // A finished id can be reused.
    const again = await computer.exec("true", { id: "busy" });
    expect((await again.result()).exitCode).toBe(0);
    const small = new Computer({ workspace: ws.dir, maxConcurrent: 1 });
    const s1 = await small.exec("sleep 30");
    expect(await codeOf(small.exec("true"))).toBe("ELIMIT");
    await s1.kill("SIGKILL");
    await small.close();
  });

  it("lists, gets and disposes executions; get works for finished ones", async () => {
    const run = await computer.exec("echo x", { id: "listed" });
    await run.result();
    expect((await computer.list()).map((r) => r.id)).toContain("listed");
    const h = await computer.get("listed");
    expect(textOf(await collect(h.events()))).toBe("x\n");
    await computer.dispose("listed");
    expect(await codeOf(computer.get("listed"))).toBe("ENOENT");
    expect(await codeOf(computer.dispose("listed"))).toBe("ENOENT");
  });

  it("bounds result() to the last resultMaxBytes of each stream and says so", async () => {
    const c = new Computer({ workspace: ws.dir, resultMaxBytes: 1000 });
    const run = await c.exec("seq 1 10000; echo tail >&2", { encoding: "utf8" });
    const res = await run.result();
    const full = Array.from({ length: 10000 }, (_, i) => `${i + 1}\n`).join("");
    expect(res.stdout).toBe(full.slice(-1000));
    expect(res.stderr).toBe("tail\n");
    expect(res.truncated).toBe(true);
    await c.close();
  });

  it("calls observer hooks and close() kills what still runs", async () => {
    const started: string[] = [];
    const finished: string[] = [];
    const c = new Computer({
      workspace: ws.dir,
      observer: {
        started: (r) => started.push(r.id),
        finished: (r) => finished.push(`${r.id}:${r.state}`),
      },
    });
    const run = await c.exec("sleep 30", { id: "obs" });
    expect(started).toEqual(["obs"]);
    const evs = collect(run.events());
    await c.close();
    expect(logged(await evs).at(-1)).toMatchObject({ name: "exit", reason: "killed" });
    expect(finished).toEqual(["obs:killed"]);
    expect(await codeOf(c.exec("true"))).toBe("ECLOSED");
  });
});
