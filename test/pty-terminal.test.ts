// Pty executions end to end, on real pseudo-terminals: the in-process API,
// HTTP (POST /v1/execs with pty, /resize, /screen, /stdin) and the WebSocket
// (stdin and resize messages), a full-screen program, and the rule that a
// screen snapshot plus the events after it renders exactly what a full
// replay renders, resizes included (compared in @xterm/headless buffers).

import serializeAddon from "@xterm/addon-serialize";
import xtermHeadless from "@xterm/headless";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { ExecHandle, ExecRecord, ScreenSnapshot } from "../src/runtime/types.js";
import type { ExecEvent } from "../src/wire/types.js";
import { type Harness, startServer } from "./support/server-harness.js";

const { Terminal } = xtermHeadless;
type Term = InstanceType<typeof Terminal>;
void serializeAddon;

let h: Harness;
beforeAll(async () => {
  h = await startServer({ computer: { killGraceMs: 1000 } });
});
afterAll(async () => {
  await h?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Collects a handle's output as text, from `after`, until stopped. */
function collect(handle: ExecHandle, after = 0) {
  const ac = new AbortController();
  const out = { text: "", events: [] as ExecEvent[], done: false };
  const dec = new TextDecoder();
  void (async () => {
    try {
      const reader = handle.events({ after, heartbeats: false, signal: ac.signal }).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        out.events.push(value);
        if (value.name === "stdout" || value.name === "stderr") {
          out.text +=
            typeof value.value === "string"
              ? value.value
              : dec.decode(value.value, { stream: true });
        }
      }
    } catch {
      // aborted
    }
    out.done = true;
  })();
  return {
    out,
    stop: () => ac.abort(),
    async until(pattern: RegExp, ms = 10_000): Promise<string> {
      const end = Date.now() + ms;
      while (!pattern.test(plain(out.text))) {
        if (Date.now() > end)
          throw new Error(
            `timed out waiting for ${pattern}; got ${JSON.stringify(out.text.slice(-500))}`,
          );
        await sleep(20);
      }
      return plain(out.text);
    },
  };
}

/** Text without the terminal's control sequences (bracketed paste on/off and the like). */
function plain(text: string): string {
  return text.replace(/\x1b\[[?>=]?[0-9;]*[A-Za-z]/g, "");
}

/** A fresh interactive bash on a pty, without rc files, with a known prompt. */
async function shell(api: { exec: Harness["client"]["exec"] }, size = { cols: 80, rows: 24 }) {
  const handle = await api.exec(
    { argv: ["bash", "--norc", "--noprofile", "-i"] },
    { pty: size, env: { PS1: "$ ", HISTFILE: "/dev/null" } },
  );
  const c = collect(handle);
  await c.until(/\$ $/);
  return { handle, ...c };
}

/** Renders events (with the record's sizes applied where they fall) into a terminal. */
async function replay(
  term: Term,
  events: ExecEvent[],
  sizes: NonNullable<ExecRecord["pty"]>["sizes"],
  from: number,
): Promise<void> {
  const apply = async (seq: number) => {
    for (const s of sizes) {
      if (s.after < from || s.after > seq) continue;
      await new Promise<void>((r) => term.write("", r));
      if (term.cols !== s.cols || term.rows !== s.rows) term.resize(s.cols, s.rows);
    }
  };
  for (const ev of events) {
    if (ev.seq <= from) continue;
    if (ev.name !== "stdout" && ev.name !== "stderr") continue;
    await apply(ev.seq - 1);
    from = ev.seq - 1;
    term.write(ev.value as Uint8Array);
  }
  const last = events[events.length - 1]?.seq ?? 0;
  await apply(last);
  await new Promise<void>((r) => term.write("", r));
}

/** Everything a viewer sees: every line of the active buffer (scrollback too) and the cursor. */
function rendered(term: Term): string {
  const buf = term.buffer.active;
  const lines: string[] = [];
  for (let i = 0; i < buf.length; i++) lines.push(buf.getLine(i)?.translateToString(true) ?? "");
  while (lines.length && lines[lines.length - 1] === "") lines.pop();
  return `${buf.type} ${term.cols}x${term.rows} cursor ${buf.cursorX},${buf.cursorY}\n${lines.join("\n")}`;
}

async function fromSnapshot(snap: ScreenSnapshot): Promise<Term> {
  const term = new Terminal({
    cols: snap.cols,
    rows: snap.rows,
    scrollback: 1000,
    allowProposedApi: true,
  });
  await new Promise<void>((r) => term.write(snap.data, r));
  return term;
}

async function fullReplay(
  handle: ExecHandle,
): Promise<{ term: Term; events: ExecEvent[]; rec: ExecRecord }> {
  const rec = await handle.info();
  const events: ExecEvent[] = [];
  const reader = handle.events({ after: 0, heartbeats: false }).getReader();
  while (events.length === 0 || events[events.length - 1]!.seq < rec.lastSeq) {
    const { value, done } = await reader.read();
    if (done) break;
    events.push(value);
  }
  await reader.cancel();
  const first = rec.pty!.sizes[0]!;
  const term = new Terminal({
    cols: first.cols,
    rows: first.rows,
    scrollback: 1000,
    allowProposedApi: true,
  });
  await replay(term, events, rec.pty!.sizes, 0);
  return { term, events, rec };
}

describe("pty executions", () => {
  it("run on a terminal of the given size with TERM=xterm-256color (in-process)", async () => {
    const handle = await h.computer.exec(
      "stty size; tty; echo TERM=$TERM; test -t 0 && echo isatty",
      {
        pty: { cols: 97, rows: 31 },
        encoding: "utf8",
      },
    );
    const r = await handle.result();
    expect(r.stdout).toMatch(/^31 97\r\n\/dev\/pts\/\d+\r\nTERM=xterm-256color\r\nisatty\r\n$/);
    expect(r.exitCode).toBe(0);
    expect((await handle.info()).pty).toEqual({
      cols: 97,
      rows: 31,
      sizes: [{ after: 0, cols: 97, rows: 31 }],
    });
  });

  it("run on a terminal over HTTP (POST /v1/execs with pty)", async () => {
    const res = await fetch(`${h.url}/v1/execs`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.token}`, "content-type": "application/json" },
      body: JSON.stringify({
        command: "stty size; tty",
        pty: { cols: 120, rows: 40 },
        encoding: "utf8",
      }),
    });
    expect(res.status).toBe(201);
    const { id } = (await res.json()) as { id: string };
    const r = await (await h.client.get(id)).result();
    expect(r.stdout).toMatch(/^40 120\r\n\/dev\/pts\/\d+\r\n$/);
  });

  it("refuses bad sizes, resizing a non-pty execution, and a screen of one", async () => {
    const post = (path: string, body: unknown) =>
      fetch(`${h.url}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${h.token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const bad = await post("/v1/execs", { command: "true", pty: { cols: 0, rows: 10 } });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("EINVAL");
    const plain = await h.client.exec("sleep 5", { stdin: "pipe" });
    const r = await post(`/v1/execs/${plain.id}/resize`, { cols: 10, rows: 10 });
    expect(r.status).toBe(400);
    await expect(plain.screen()).rejects.toMatchObject({ code: "EINVAL" });
    await expect(
      h.client.exec("true", { pty: { cols: 10, rows: 10 }, stdin: "x" }),
    ).rejects.toMatchObject({
      code: "EINVAL",
    });
    await plain.kill("SIGKILL");
  });

  it("resize changes stty size and delivers SIGWINCH (SDK handle.resize)", async () => {
    const s = await shell(h.client);
    await s.handle.write("trap 'echo WINCH-$(stty size | tr \" \" x)' WINCH\r");
    // The prompt after the trap line (the first prompt also ends in "$ "): a
    // resize before bash ran the trap line would go unnoticed.
    await s.until(/WINCH\r?\n[\s\S]*\$ $/);
    await s.handle.resize({ cols: 132, rows: 43 });
    await s.handle.write("stty size\r");
    await s.until(/43 132/);
    // bash runs the trap when the next command line is read
    await s.handle.write("true\r");
    await s.until(/WINCH-43x132/);
    const info = await s.handle.info();
    expect(info.pty?.cols).toBe(132);
    expect(info.pty?.sizes.length).toBe(2);
    await s.handle.kill("SIGKILL");
    s.stop();
  });

  it("Ctrl-C (byte 0x03 on stdin) interrupts sleep and the shell lives on", async () => {
    const s = await shell(h.client);
    await s.handle.write("sleep 30; echo not-interrupted\r");
    await s.until(/sleep 30.*\r\n/);
    await sleep(300);
    const t0 = Date.now();
    await s.handle.write(new Uint8Array([3]));
    await s.until(/\^C/);
    await s.handle.write("echo alive-$((40+2))\r");
    await s.until(/alive-42/);
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(plain(s.out.text)).not.toContain("\nnot-interrupted");
    expect((await s.handle.info()).state).toBe("running");
    await s.handle.kill("SIGKILL");
    s.stop();
  });

  it("kill ends the whole session, jobs in their own process groups too", async () => {
    const s = await shell(h.client);
    await s.handle.write("sleep 300 & echo bg=$!\r");
    const text = await s.until(/bg=(\d+)/);
    const bg = Number(/bg=(\d+)/.exec(text)![1]);
    expect(alive(bg)).toBe(true);
    await s.handle.kill();
    const r = await s.handle.result();
    expect(r.status).toBe("killed");
    await waitUntil(() => !alive(bg));
    s.stop();
  });

  it("takes stdin and resize over the WebSocket, in order", async () => {
    const s = await shell(h.client);
    const ws = new WebSocket(`${h.url.replace("http", "ws")}/v1/ws`, {
      headers: { authorization: `Bearer ${h.token}` },
    });
    await new Promise((r, j) => {
      ws.once("open", r);
      ws.once("error", j);
    });
    const frames: string[] = [];
    ws.on("message", (d) => frames.push(String(d)));
    ws.send(JSON.stringify({ type: "resize", id: s.handle.id, cols: 61, rows: 17 }));
    for (const ch of "stty size\r")
      ws.send(JSON.stringify({ type: "stdin", id: s.handle.id, data: ch }));
    await s.until(/17 61/);
    ws.send(
      JSON.stringify({
        type: "stdin",
        id: s.handle.id,
        b64: Buffer.from("echo b64-ok\r").toString("base64"),
      }),
    );
    await s.until(/b64-ok/);
    ws.send(JSON.stringify({ type: "resize", id: s.handle.id, cols: 0, rows: 17 }));
    await waitUntil(() => frames.some((f) => f.includes('"EINVAL"')));
    ws.close();
    await s.handle.kill("SIGKILL");
    s.stop();
  });

  it("drives a full-screen program (vi) by keystrokes", async () => {
    const s = await shell(h.client);
    await s.handle.write("vi -u NONE -N /tmp/ac-pty-vi-$$.txt\r");
    await sleep(500);
    await s.handle.write("ihello from vi\x1b");
    await s.handle.write(":wq\r");
    await s.until(/written[\s\S]*\$ $/);
    await s.handle.write("cat /tmp/ac-pty-vi-$$.txt; rm /tmp/ac-pty-vi-$$.txt\r");
    await s.until(/\n\r?hello from vi\r\n/);
    await s.handle.kill("SIGKILL");
    s.stop();
  });

  it("a snapshot plus the events after it renders what a full replay renders, across resizes", async () => {
    const s = await shell(h.client);
    await s.handle.write(
      "for i in $(seq 1 60); do echo line-$i-$(printf '%*s' $i | tr ' ' x); done\r",
    );
    await s.until(/line-60-x+\r\n\$ $/);
    await s.handle.resize({ cols: 50, rows: 15 });
    await s.handle.write("less -S /etc/services\r");
    await sleep(500);
    await s.handle.write("  "); // page down twice
    await sleep(200);
    await s.handle.resize({ cols: 100, rows: 30 });
    await sleep(200);

    // A viewer joining now: snapshot, then the events after its seq.
    const snap = await s.handle.screen();
    expect(snap.cols).toBe(100);
    expect(snap.rows).toBe(30);
    expect(snap.partial).toBe(false);
    const viewer = await fromSnapshot(snap);

    // More happens after the snapshot, with another resize.
    await s.handle.write("q");
    await sleep(200);
    await s.handle.resize({ cols: 70, rows: 20 });
    await s.handle.write("printf 'after-\\x1b[1mbold\\x1b[0m\\n'\r");
    await s.until(/after-.*bold/);
    await sleep(200);

    const full = await fullReplay(s.handle);
    const rec = full.rec;
    await replay(viewer, full.events, rec.pty!.sizes, snap.seq);
    expect(rendered(viewer)).toEqual(rendered(full.term));
    // Also equal to the server's own view now.
    const later = await fromSnapshot(await s.handle.screen());
    expect(rendered(later)).toEqual(rendered(full.term));

    // Inside the full-screen program too (alternate buffer): snapshot-vs-replay at that point.
    const events = full.events.filter((e) => e.seq <= snap.seq);
    const first = rec.pty!.sizes[0]!;
    const partial = new Terminal({
      cols: first.cols,
      rows: first.rows,
      scrollback: 1000,
      allowProposedApi: true,
    });
    await replay(
      partial,
      events,
      rec.pty!.sizes.filter((z) => z.after <= snap.seq),
      0,
    );
    expect(rendered(await fromSnapshot(snap))).toEqual(rendered(partial));
    expect(rendered(partial)).toMatch(/^alternate 100x30/);
    await s.handle.kill("SIGKILL");
    s.stop();
  });

  it("merges a fast program's 4 KiB terminal reads into larger events, losing nothing", async () => {
    // 2 MiB of lines: the terminal turns each "\n" into "\r\n" (onlcr).
    const line = "the quick brown fox jumps over the lazy dog 0123456789\n";
    const lines = Math.ceil((2 * 1024 * 1024) / line.length);
    const handle = await h.computer.exec(
      // It exits right after its last write: the end must arrive too.
      `yes 'the quick brown fox jumps over the lazy dog 0123456789' | head -n ${lines}`,
      { pty: { cols: 80, rows: 24 } },
    );
    const events: ExecEvent[] = [];
    const reader = handle.events({ after: 0, heartbeats: false }).getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      events.push(value);
    }
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.at(-1)).toMatchObject({ name: "exit", value: 0 });
    const output = events.filter((e) => e.name === "stdout");
    const text = Buffer.concat(output.map((e) => e.value as Uint8Array)).toString("latin1");
    expect(text === line.replaceAll("\n", "\r\n").repeat(lines)).toBe(true);
    // One event per 4095-byte read would be ~560; merged reads make far fewer.
    expect(output.length).toBeLessThan(text.length / 4095 / 2);
  });

  it("reattaches mid-session from another client and sees what the first one sees", async () => {
    const s = await shell(h.client, { cols: 40, rows: 12 });
    await s.handle.write("echo first-client\r");
    await s.until(/first-client\r\n\$ $/);
    // Another client (its own HTTP connections) joins from the snapshot.
    const { ComputerClient } = await import("../src/client/client.js");
    const other = new ComputerClient({ url: h.url, token: h.token });
    const h2 = await other.get(s.handle.id);
    const snap = await h2.screen();
    const viewer = await fromSnapshot(snap);
    const c2 = collect(h2, snap.seq);
    await h2.write("echo from-second\r");
    await s.until(/from-second\r\n\$ $/);
    await c2.until(/from-second\r\n\$ $/);
    await h2.resize({ cols: 60, rows: 10 });
    await h2.write("echo after-resize\r");
    await c2.until(/after-resize\r\n\$ $/);
    await sleep(100);
    const rec = await h2.info();
    await replay(viewer, c2.out.events, rec.pty!.sizes, snap.seq);
    const full = await fullReplay(s.handle);
    expect(rendered(viewer)).toEqual(rendered(full.term));
    expect(rendered(viewer)).toContain("after-resize");
    // The first client's stream saw the same bytes after the snapshot.
    expect(s.out.text.endsWith(c2.out.text)).toBe(true);
    expect(c2.out.text.length).toBeGreaterThan(0);
    await s.handle.kill("SIGKILL");
    s.stop();
    c2.stop();
  });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitUntil(f: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error("timed out");
    await sleep(20);
  }
}
