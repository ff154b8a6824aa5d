// The runtime's stream guarantees with real processes: process groups and
// grandchildren, timeouts, large outputs, many executions at once, resuming,
// truncation, backpressure and stalled subscribers, heartbeats.

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, existsSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { Computer, MemoryEventLog } from "../src/index.js";
import type { EventLog } from "../src/store/types.js";
import type { ExecEvent } from "../src/wire/types.js";
import {
  collect,
  collectUntilError,
  computerFixture,
  eventually,
  expectGapFree,
  logged,
  sleep,
  textOf,
} from "./runtime-support.js";

const { ws, make } = computerFixture();

/** Processes whose command line contains `marker` (from `ps`). */
function survivors(marker: string): string[] {
  const out = execFileSync("ps", ["-eo", "pid,pgid,args"], { encoding: "utf8" });
  return out.split("\n").filter((l) => l.includes(marker) && !l.includes("ps -eo"));
}

describe("process groups", () => {
  it("a timeout kills background grandchildren too, and keeps the output before it", async () => {
    const c = make();
    const run = await c.exec(
      "sleep 91.1 & sleep 91.2 & (sleep 91.3; echo never) & echo before; sleep 91.4",
      // Generous so "before" is out even on a loaded machine.
      { timeoutMs: 1500, encoding: "utf8" },
    );
    const evs = logged(await collect(run.events()));
    expect(textOf(evs)).toBe("before\n");
    expect(evs.at(-1)).toMatchObject({
      name: "exit",
      reason: "timeout",
      signal: "SIGTERM",
      value: 143,
    });
    expect((await run.info()).state).toBe("timeout");
    expect(survivors("sleep 91.")).toEqual([]);
    const res = await run.result();
    expect(res).toMatchObject({ status: "timeout", stdout: "before\n" });
  });

  it("grandchildren holding the pipes after the shell exits: drained briefly, then killed", async () => {
    const c = make({ drainMs: 1500 });
    // The quick grandchild finishes inside the drain window: its output is kept.
    const run = await c.exec("(sleep 0.05; echo quick) & (sleep 92.5; echo slow) & echo main", {
      encoding: "utf8",
    });
    const evs = logged(await collect(run.events()));
    expect(textOf(evs).split("\n").sort()).toEqual(["", "main", "quick"]);
    expect(evs.at(-1)).toMatchObject({ name: "exit", value: 0, reason: "exited" });
    expect(survivors("sleep 92.5")).toEqual([]);
  });

  it("kills background processes that do not hold the pipes when the command exits", async () => {
    const c = make();
    const run = await c.exec("sleep 93.5 >/dev/null 2>&1 & echo ok");
    await run.result();
    await eventually(() => survivors("sleep 93.5").length === 0, 2000);
  });
});

describe("volume and concurrency", () => {
  it("moves 100 MiB of random bytes intact (SHA-256)", async () => {
    const file = path.join(ws.dir, "big.bin");
    execFileSync("sh", ["-c", `head -c 104857600 /dev/urandom > '${file}'`]);
    const want = createHash("sha256");
    for await (const chunk of createReadStream(file)) want.update(chunk as Buffer);
    const c = make();
    const run = await c.exec("cat big.bin");
    const got = createHash("sha256");
    let bytes = 0;
    let seq = 0;
    const reader = run.events().getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      if (value.name === "heartbeat") continue;
      expect(value.seq).toBe(++seq);
      if (value.name === "stdout") {
        got.update(value.value as Uint8Array);
        bytes += (value.value as Uint8Array).byteLength;
      }
    }
    expect(bytes).toBe(104857600);
    expect(got.digest("hex")).toBe(want.digest("hex"));
  });

  it("three live readers of a fast command each get every byte, and never share a buffer", async () => {
    const file = path.join(ws.dir, "mid.bin");
    execFileSync("sh", ["-c", `head -c 33554432 /dev/urandom > '${file}'`]);
    const want = createHash("sha256");
    for await (const chunk of createReadStream(file)) want.update(chunk as Buffer);
    const wantHex = want.digest("hex");
    const c = make();
    const run = await c.exec("cat mid.bin", { awaitReader: true });
    const owners = new Map<ArrayBufferLike, number>();
    const readOne = async (who: number) => {
      const got = createHash("sha256");
      let seq = 0;
      const reader = run.events().getReader();
      for (;;) {
        const { value: ev, done } = await reader.read();
        if (done) break;
        if (ev.name === "heartbeat") continue;
        expect(ev.seq).toBe(++seq);
        if (ev.name !== "stdout") continue;
        const v = ev.value as Uint8Array;
        got.update(v);
        const owner = owners.get(v.buffer);
        if (owner !== undefined && owner !== who)
          throw new Error(`readers ${owner} and ${who} share a buffer`);
        owners.set(v.buffer, who);
        v.fill(0); // what one reader does to its bytes no other reader sees
      }
      return got.digest("hex");
    };
    expect(await Promise.all([readOne(1), readOne(2), readOne(3)])).toEqual([
      wantHex,
      wantHex,
      wantHex,
    ]);
  });

  it("runs 200 executions at once, each with its own output", async () => {
    const c = make();
    const runs = await Promise.all(
      Array.from({ length: 200 }, (_, i) => c.exec(`printf 'run-%s' ${i}; sleep 0.2; printf '!'`)),
    );
    const results = await Promise.all(runs.map((r) => r.result()));
    results.forEach((r, i) => {
      expect(r.exitCode).toBe(0);
      expect(Buffer.from(r.stdout as Uint8Array).toString()).toBe(`run-${i}!`);
    });
  });
});

describe("resume and truncation", () => {
  it("reattaching with after: N yields exactly N+1..end", async () => {
    const c = make();
    const run = await c.exec("for i in $(seq 1 40); do echo line$i; sleep 0.01; done", {
      encoding: "utf8",
    });
    const first = run.events({ heartbeats: false }).getReader();
    const head: ExecEvent[] = [];
    while (head.length < 5) head.push((await first.read()).value!);
    await first.cancel();
    const n = head.at(-1)!.seq;
    const tail = logged(await collect((await c.get(run.id)).events({ after: n })));
    expect(tail[0]!.seq).toBe(n + 1);
    expectGapFree(tail, n + 1);
    expect(tail.at(-1)!.name).toBe("exit");
    const all = textOf([...head, ...tail]);
    expect(all).toBe(Array.from({ length: 40 }, (_, i) => `line${i + 1}\n`).join(""));
    // "tail" after exit: nothing more to come.
    expect(await collect(run.events({ after: "tail" }))).toEqual([]);
  });

  it("resuming before the earliest retained seq fails with ELOG_TRUNCATED and earliestSeq", async () => {
    const c = make({ logMaxBytes: 256 * 1024, spill: { spillMaxBytes: 0 } }); // the ring alone
    const run = await c.exec("head -c 2000000 /dev/zero");
    // Nobody is attached: detached history past the cap is dropped.
    await eventually(async () => (await run.info()).state !== "running");
    const res = await run.result();
    expect(res.truncated).toBe(true);
    const info = await run.info();
    expect(info.earliestSeq).toBeGreaterThan(1);
    const { error } = await collectUntilError(run.events({ after: 0 }));
    expect(error).toMatchObject({ code: "ELOG_TRUNCATED", earliestSeq: info.earliestSeq });
    // subscribe() refuses the same start before opening a stream.
    await expect(run.subscribe({ after: 0 })).rejects.toMatchObject({
      code: "ELOG_TRUNCATED",
      earliestSeq: info.earliestSeq,
    });
    const rest = logged(await collect(run.events({ after: info.earliestSeq - 1 })));
    expectGapFree(rest, info.earliestSeq);
    expect(rest.at(-1)!.name).toBe("exit");
    const { error: bad } = await collectUntilError(run.events({ after: info.lastSeq + 5 }));
    expect(bad).toMatchObject({ code: "EINVAL" });
  });
});

describe("backpressure", () => {
  const expected = (n: number) => Array.from({ length: n }, (_, i) => `${i + 1}\n`).join("");

  it("a slow subscriber pauses the child instead of losing output", async () => {
    // 6.9 MB of output through a 1 MiB ring: only possible without loss if the child waits.
    const c = make({ logMaxBytes: 1024 * 1024, spill: { spillMaxBytes: 0 } }); // the ring alone
    const run = await c.exec("seq 1 1000000");
    const reader = run.events({ heartbeats: false }).getReader();
    const parts: Uint8Array[] = [];
    let seq = 0;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      expect(value.seq).toBe(++seq);
      if (value.name === "stdout") parts.push(value.value as Uint8Array);
      await sleep(5);
    }
    expect(Buffer.concat(parts).toString()).toBe(expected(1_000_000));
    // The history itself is a ring: a replay from 0 after the fact is truncated.
    const { error } = await collectUntilError(run.events({ after: 0 }));
    expect(error).toMatchObject({ code: "ELOG_TRUNCATED" });
  });

  it("pauses by the event log's stated capacity: a small ring handed in ready-made loses nothing", async () => {
    // The computer did not open this log, so it knows the ring only from
    // capacityBytes; pausing at half of a default 16 MiB ring would let the
    // slow reader fall out of this 512 KiB one (ELOG_TRUNCATED).
    const eventLog = new MemoryEventLog({ logMaxBytes: 512 * 1024, spillMaxBytes: 0 });
    expect(eventLog.capacityBytes).toBe(512 * 1024);
    const c = make({ eventLog });
    const run = await c.exec("seq 1 400000");
    const reader = run.events({ heartbeats: false }).getReader();
    const parts: Uint8Array[] = [];
    let seq = 0;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      expect(value.seq).toBe(++seq);
      if (value.name === "stdout") parts.push(value.value as Uint8Array);
      await sleep(2);
    }
    expect(Buffer.concat(parts).toString()).toBe(expected(400_000));
    // The ring did drop events: only the pause kept the reader within it.
    expect((await run.info()).earliestSeq).toBeGreaterThan(1);
  });

  it("refuses an event log that does not state its capacity", async () => {
    // E.g. a plain-JS log: without capacityBytes the backpressure cannot work.
    const unstated = new Proxy(new MemoryEventLog(), {
      get: (target, key) => (key === "capacityBytes" ? undefined : Reflect.get(target, key)),
    });
    const c = make({ eventLog: unstated });
    await expect(c.exec("true")).rejects.toMatchObject({ code: "EINVAL" });
  });

  it("a stalled subscriber is cut off with ELAGGING; the others are unaffected", async () => {
    const c = make({ logMaxBytes: 1024 * 1024, stallMs: 1000 });
    const run = await c.exec("seq 1 1000000");
    const stalled = run.events({ heartbeats: false }).getReader();
    await stalled.read(); // reads one event, then nothing
    const healthy = logged(await collect(run.events({ heartbeats: false })));
    expectGapFree(healthy);
    expect(textOf(healthy)).toBe(expected(1_000_000));
    expect(healthy.at(-1)).toMatchObject({ name: "exit", value: 0 });
    await expect(stalled.read()).rejects.toMatchObject({ code: "ELAGGING" });
  });

  it("a log that falls behind pauses the child instead of buffering its output without bound", async () => {
    // A real memory log behind a gate that holds every append, as a stalled
    // Redis would: the runtime may hold at most maxUnflushedBytes, so the child
    // must block on write instead of finishing.
    const inner = new MemoryEventLog({ logMaxBytes: 64 * 1024 * 1024 });
    let open!: () => void;
    const gate = new Promise<void>((r) => {
      open = r;
    });
    const slow: EventLog = {
      capacityBytes: inner.capacityBytes,
      create: (r) => inner.create(r),
      append: async (id, evs) => {
        await gate;
        return inner.append(id, evs);
      },
      read: (id, after, o) => inner.read(id, after, o),
      waitFor: (id, after, sig) => inner.waitFor(id, after, sig),
      get: (id) => inner.get(id),
      list: () => inner.list(),
      update: (id, patch) => inner.update(id, patch),
      dispose: (id) => inner.dispose(id),
      close: () => inner.close(),
    };
    const c = make({ eventLog: slow, maxUnflushedBytes: 1024 * 1024 });
    const size = 8 * 1024 * 1024;
    const run = await c.exec(`head -c ${size} /dev/zero; touch finished.flag`);
    await sleep(700);
    expect(existsSync(path.join(ws.dir, "finished.flag"))).toBe(false);
    open();
    const res = await run.result();
    expect(res).toMatchObject({ status: "exited", exitCode: 0, truncated: false });
    expect((res.stdout as Uint8Array).byteLength).toBe(size);
    expect(existsSync(path.join(ws.dir, "finished.flag"))).toBe(true);
  });
});

describe("heartbeats", () => {
  it("go to live subscribers with the latest logged seq and are never replayed", async () => {
    const c = make({ heartbeatMs: 80 });
    const run = await c.exec("echo a; sleep 0.5; echo b", { encoding: "utf8" });
    const live = await collect(run.events());
    const beats = live.filter((e) => e.name === "heartbeat");
    expect(beats.length).toBeGreaterThan(0);
    // Each heartbeat carries the seq of the latest logged event before it (a watermark).
    let watermark = 0;
    for (const e of live) {
      if (e.name !== "heartbeat") watermark = e.seq;
      else {
        expect(e.seq).toBe(watermark);
        expect(e.value).toMatchObject({ pid: expect.any(Number), elapsedMs: expect.any(Number) });
      }
    }
    expectGapFree(live);
    const replay = await collect(run.events());
    expect(replay.some((e) => e.name === "heartbeat")).toBe(false);
    const quiet = await collect((await c.exec("sleep 0.3")).events({ heartbeats: false }));
    expect(quiet.map((e) => e.name)).toEqual(["exit"]);
  });
});

describe("SQLite log", () => {
  it("streams, replays and returns results the same as the memory log", async () => {
    const c = make({ eventLog: { sqlite: path.join(ws.dir, "log-s.db") } });
    const run = await c.exec("seq 1 200000", { encoding: "utf8" });
    const want = Array.from({ length: 200000 }, (_, i) => `${i + 1}\n`).join("");
    const live = logged(await collect(run.events()));
    expectGapFree(live);
    expect(textOf(live)).toBe(want);
    // After exit the events come from the file, not the in-memory tail.
    expect(textOf(logged(await collect(run.events())))).toBe(want);
    expect((await run.result()).stdout).toBe(want);
  });

  it("replays finished executions after a restart and closes running ones as lost", async () => {
    const db = path.join(ws.dir, "log.db");
    const a = make({ eventLog: { sqlite: db } });
    const done = await a.exec("echo kept; echo err >&2", { id: "done", encoding: "utf8" });
    await done.result();
    const running = await a.exec("echo partial; sleep 30", { id: "running" });
    await collect(running.events(), 1);
    // A second computer on the same file sees what a restart after a crash sees.
    const b = new Computer({ workspace: ws.dir, eventLog: `sqlite:${db}` });
    const list = await b.list();
    expect(list.map((r) => [r.id, r.state])).toEqual([
      ["done", "exited"],
      ["running", "lost"],
    ]);
    const replay = logged(await collect((await b.get("done")).events()));
    expect(textOf(replay)).toBe("kept\n");
    expect(textOf(replay, "stderr")).toBe("err\n");
    const lost = logged(await collect((await b.get("running")).events()));
    expect(lost.at(-1)).toMatchObject({ name: "exit", reason: "lost" });
    const res = await (await b.get("running")).result();
    expect(res).toMatchObject({ status: "lost", exitCode: null });
    await b.close();
  });
});
