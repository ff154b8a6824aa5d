// The ExecHandle contract: one suite that every ComputerApi implementation
// must pass, so code written against the in-process Computer works unchanged
// against ComputerClient over HTTP (and vice versa). Runs against real
// processes; the caller supplies how to build the API under test.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ComputerApi, ExecHandle } from "../../src/runtime/types.js";
import type { Chunk, ExecEvent, LoggedEvent } from "../../src/wire/types.js";

export interface ContractSubject {
  api: ComputerApi;
  close(): Promise<void>;
}

async function collect<V extends Chunk>(
  stream: ReadableStream<ExecEvent<V>>,
): Promise<ExecEvent<V>[]> {
  const out: ExecEvent<V>[] = [];
  const reader = stream.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return out;
    out.push(value);
  }
}

function logged<V extends Chunk>(events: ExecEvent<V>[]): LoggedEvent<V>[] {
  return events.filter((e): e is LoggedEvent<V> => e.name !== "heartbeat");
}

function bytesOf(events: ExecEvent[], name: "stdout" | "stderr"): Buffer {
  return Buffer.concat(
    events
      .filter((e) => e.name === name)
      .map((e) =>
        typeof e.value === "string" ? Buffer.from(e.value) : Buffer.from(e.value as Uint8Array),
      ),
  );
}

export function runExecHandleContract(name: string, setup: () => Promise<ContractSubject>): void {
  describe(`ExecHandle contract: ${name}`, () => {
    let subject: ContractSubject;
    let api: ComputerApi;
    beforeAll(async () => {
      subject = await setup();
      api = subject.api;
    });
    afterAll(async () => {
      await subject?.close();
    });

    it("streams stdout/stderr then exit, seq 1.. without gaps", async () => {
      const h = await api.exec("printf out; printf err >&2; exit 7");
      const events = logged(await collect(h.events({ heartbeats: false })));
      expect(events.map((e) => e.seq)).toEqual(events.map((_e, i) => i + 1));
      expect(events.at(-1)).toMatchObject({ id: h.id, name: "exit", value: 7, reason: "exited" });
      expect(bytesOf(events, "stdout").toString()).toBe("out");
      expect(bytesOf(events, "stderr").toString()).toBe("err");
    });

    it("b64 (default) is byte-exact, including NUL and invalid UTF-8", async () => {
      const h = await api.exec({ argv: ["printf", "\\000\\377\\376abc\\200"] });
      const events = await collect(h.events());
      const out = bytesOf(events, "stdout");
      expect([...out]).toEqual([0, 255, 254, 97, 98, 99, 128]);
      for (const e of events) if (e.name === "stdout") expect(e.value).toBeInstanceOf(Uint8Array);
    });

    it("utf8 encoding yields strings", async () => {
      const h = await api.exec("printf 'héllo ✓'", { encoding: "utf8" });
      const r = await h.result();
      expect(r.stdout).toBe("héllo ✓");
      expect(r.exitCode).toBe(0);
      expect(r.status).toBe("exited");
    });

    it("result() accumulates output and the exit status", async () => {
      const h = await api.exec("echo a; echo b >&2; exit 2");
      const r = await h.result();
      expect(Buffer.from(r.stdout as Uint8Array).toString()).toBe("a\n");
      expect(Buffer.from(r.stderr as Uint8Array).toString()).toBe("b\n");
      expect(r).toMatchObject({ id: h.id, status: "exited", exitCode: 2, truncated: false });
    });

    it("every events() call replays the same log; after=N starts at N+1", async () => {
      const h = await api.exec("for i in 1 2 3; do echo $i; sleep 0.02; done", {
        encoding: "utf8",
      });
      const a = logged(await collect(h.events()));
      const b = logged(await collect(h.events()));
      expect(b).toEqual(a);
      const c = logged(await collect(h.events({ after: 1 })));
      expect(c).toEqual(a.slice(1));
    });

    it('"tail" skips what already happened', async () => {
      const h = await api.exec("echo first; sleep 0.4; echo second", { encoding: "utf8" });
      // wait for the first line to be logged
      const first = h.events({ heartbeats: false }).getReader();
      expect((await first.read()).value).toMatchObject({ name: "stdout", value: "first\n" });
      await first.cancel();
      const tail = logged(await collect(h.events({ after: "tail", heartbeats: false })));
      expect(tail.map((e) => e.name)).toEqual(["stdout", "exit"]);
      expect(tail[0]).toMatchObject({ value: "second\n", seq: 2 });
    });

    it("subscribe() refuses a bad start before any event and streams a good one", async () => {
      const h = await api.exec("echo a; echo b", { encoding: "utf8" });
      await h.result();
      const { lastSeq } = await h.info();
      await expect(h.subscribe({ after: lastSeq + 5 })).rejects.toMatchObject({ code: "EINVAL" });
      await expect(h.subscribe({ after: -1 })).rejects.toMatchObject({ code: "EINVAL" });
      const events = logged(await collect(await h.subscribe({ after: lastSeq - 1 })));
      expect(events.map((e) => [e.seq, e.name])).toEqual([[lastSeq, "exit"]]);
    });

    it("info() reports the record", async () => {
      const h = await api.exec("exit 0", { cwd: "" });
      await h.result();
      const rec = await h.info();
      expect(rec).toMatchObject({ id: h.id, state: "exited", exitCode: 0, encoding: "b64" });
      expect(rec.lastSeq).toBeGreaterThanOrEqual(1);
    });

    it("kill() ends a running command with reason killed", async () => {
      const h = await api.exec("sleep 30");
      await h.kill("SIGKILL");
      const events = logged(await collect(h.events()));
      expect(events.at(-1)).toMatchObject({ name: "exit", reason: "killed", signal: "SIGKILL" });
      expect((await h.info()).state).toBe("killed");
      await h.kill(); // no-op once finished
    });

    it("stdin pipe: write() and end()", async () => {
      const h = await api.exec("cat", { stdin: "pipe", encoding: "utf8" });
      await h.write("one ");
      await h.write(new TextEncoder().encode("two"));
      await h.end();
      expect((await h.result()).stdout).toBe("one two");
    });

    it("stdin bytes, argv without a shell, cwd and env", async () => {
      const h = await api.exec(
        { argv: ["sh", "-c", 'cat; printf " $FOO"'] },
        {
          stdin: new Uint8Array([104, 105]),
          env: { FOO: "bar" },
          encoding: "utf8",
        },
      );
      expect((await h.result()).stdout).toBe("hi bar");
      const p = await api.exec("mkdir -p sub && cd sub && pwd", { encoding: "utf8" });
      await p.result();
      const w = await api.exec("pwd", { cwd: "sub", encoding: "utf8" });
      expect(String((await w.result()).stdout).trim()).toMatch(/\/sub$/);
    });

    it("get(), list(), dispose(); unknown ids are ENOENT", async () => {
      const h = await api.exec("true", { id: `contract-${Date.now()}` });
      await h.result();
      const again: ExecHandle = await api.get(h.id);
      expect((await again.info()).id).toBe(h.id);
      expect((await api.list()).some((r) => r.id === h.id)).toBe(true);
      await api.dispose(h.id);
      await expect(api.get(h.id)).rejects.toMatchObject({ code: "ENOENT" });
      await expect(api.get("no-such-id")).rejects.toMatchObject({ code: "ENOENT" });
    });

    it("a caller-given id that is still running is EEXEC_BUSY", async () => {
      const id = `busy-${Date.now()}`;
      const h = await api.exec("sleep 30", { id });
      await expect(api.exec("true", { id })).rejects.toMatchObject({ code: "EEXEC_BUSY" });
      await api.kill(id, "SIGKILL");
      await h.result();
    });

    it("an AbortSignal cancels an event stream with EABORTED", async () => {
      const h = await api.exec("sleep 30");
      const ac = new AbortController();
      const reader = h.events({ signal: ac.signal, heartbeats: false }).getReader();
      const pending = reader.read();
      setTimeout(() => ac.abort(), 50);
      await expect(pending).rejects.toMatchObject({ code: "EABORTED" });
      await h.kill("SIGKILL");
      await h.result();
    });
  });
}
