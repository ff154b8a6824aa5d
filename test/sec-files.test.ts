// The files API under attack from inside the workspace (real server, real
// sockets, real processes racing it): hard links to outside files, a command
// flipping a path between a directory and a symlink to outside while GET and
// PUT run (thousands of rounds, 0 escapes), a FIFO swapped in for a file, a
// file growing during its download, a file deleted between stat and open,
// and paged directory listings.

import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { link, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { Agent, request as httpRequest } from "node:http";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startServer } from "./support/server-harness.js";

let h: Harness;
let outside: string;
const agent = new Agent({ keepAlive: true, maxSockets: 8 });

beforeAll(async () => {
  h = await startServer();
  outside = await mkdtemp(path.join(tmpdir(), "ac-outside-"));
});
afterAll(async () => {
  agent.destroy();
  await h?.close();
  await rm(outside, { recursive: true, force: true });
});

function call(
  method: string,
  rawPath: string,
  body?: Buffer | string,
  timeoutMs = 10_000,
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const u = new URL(h.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: u.hostname,
        port: u.port,
        method,
        path: rawPath,
        agent,
        headers: { authorization: `Bearer ${h.token}` },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode!,
            body: Buffer.concat(chunks).toString(),
            headers: res.headers,
          }),
        );
        res.on("error", reject);
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`timeout: ${method} ${rawPath}`)));
    req.on("error", reject);
    req.end(body);
  });
}

/** A real process that renames entries in a loop (one rename is atomic, so the path flips). */
function flipper(script: string): ChildProcess {
  return spawn(process.execPath, ["-e", script], { stdio: "ignore" });
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const done = new Promise((r) => child.once("exit", r));
  child.kill("SIGKILL");
  await done;
}

async function pool<T>(n: number, width: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await fn(i);
      }
    }),
  );
  return out;
}

describe("files API confinement", () => {
  it("does not serve or write through a hard link to an outside file", async () => {
    await writeFile(path.join(outside, "secret"), "TOP-SECRET");
    await link(path.join(outside, "secret"), path.join(h.workspace, "hl"));
    const r = await call("GET", "/v1/files/hl");
    expect(r.body).not.toContain("TOP-SECRET");
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body).error.code).toBe("EFORBIDDEN");
    expect((await call("PUT", "/v1/files/hl", "overwritten")).status).toBeLessThan(300);
    expect(await readFile(path.join(outside, "secret"), "utf8")).toBe("TOP-SECRET");
  });

  it("a directory/symlink swap race never escapes (GET and PUT, thousands of rounds)", async () => {
    const ws = h.workspace;
    await mkdir(path.join(outside, "race"), { recursive: true });
    await writeFile(path.join(outside, "race", "f"), "OUTSIDE");
    await mkdir(path.join(ws, "race-dir"));
    await writeFile(path.join(ws, "race-dir", "f"), "inside");
    execFileSync("ln", ["-s", path.join(outside, "race"), path.join(ws, "race-link")]);
    // `d` flips between a symlink to race-dir (inside), a symlink to outside,
    // and race-dir itself (a real directory renamed in and out).
    const child = flipper(`
      const fs = require("fs"); const p = (n) => ${JSON.stringify(ws)} + "/" + n;
      const out = ${JSON.stringify(path.join(outside, "race"))};
      for (;;) {
        try { fs.symlinkSync("race-dir", p("t1")); } catch {}
        try { fs.symlinkSync(out, p("t2")); } catch {}
        try { fs.renameSync(p("t1"), p("d")); } catch (e) {
          // a PUT created d as a real directory: reset it
          if (e.code !== "ENOENT") fs.rmSync(p("d"), { recursive: true, force: true });
        }
        try { fs.renameSync(p("t2"), p("d")); } catch {}
        try { fs.unlinkSync(p("d")); fs.renameSync(p("race-dir"), p("d")); fs.renameSync(p("d"), p("race-dir")); } catch {}
        try { fs.symlinkSync(out, p("d")); } catch {}
      }`);
    const rounds = 2000;
    let getEscapes = 0;
    let gets200 = 0;
    let puts2xx = 0;
    try {
      await pool(rounds, 8, async (i) => {
        const g = await call("GET", "/v1/files/d/f");
        if (g.body.includes("OUTSIDE")) getEscapes++;
        if (g.status === 200) gets200++;
        const p = await call("PUT", "/v1/files/d/f", `PWNED-${i}`);
        if (p.status < 300) puts2xx++;
      });
    } finally {
      await stop(child);
    }
    const outsideNow = await readFile(path.join(outside, "race", "f"), "utf8");
    const outsideFiles = await readdir(path.join(outside, "race"));
    console.log(
      `swap race: ${rounds} GET (${gets200} served) + ${rounds} PUT (${puts2xx} written); ` +
        `GET escapes ${getEscapes}, outside file ${outsideNow === "OUTSIDE" ? "intact" : "WRITTEN"}, ` +
        `outside entries ${outsideFiles.join(",")}`,
    );
    expect(getEscapes).toBe(0);
    expect(outsideNow).toBe("OUTSIDE");
    expect(outsideFiles).toEqual(["f"]);
    // The race really ran: some requests hit the directory.
    expect(gets200 + puts2xx).toBeGreaterThan(0);
  }, 240_000);

  it("a FIFO swapped in for a file is refused, never opened; the server keeps serving", async () => {
    const ws = h.workspace;
    await writeFile(path.join(ws, "fifo-file"), "regular");
    execFileSync("mkfifo", [path.join(ws, "fifo-pipe")]);
    const child = flipper(`
      const fs = require("fs"); const p = (n) => ${JSON.stringify(ws)} + "/" + n;
      for (;;) {
        try { fs.renameSync(p("fifo-file"), p("ff")); fs.renameSync(p("ff"), p("fifo-file")); } catch {}
        try { fs.renameSync(p("fifo-pipe"), p("ff")); fs.renameSync(p("ff"), p("fifo-pipe")); } catch {}
      }`);
    try {
      const results = await pool(400, 8, () => call("GET", "/v1/files/ff", undefined, 5000));
      for (const r of results) expect([200, 400, 404]).toContain(r.status);
    } finally {
      await stop(child);
    }
    execFileSync("mkfifo", [path.join(ws, "fifo-direct")]);
    const direct = await call("GET", "/v1/files/fifo-direct", undefined, 5000);
    expect(direct.status).toBe(400);
    expect(JSON.parse(direct.body).error.code).toBe("EINVAL");
    // The thread pool is not wedged: file routes still answer.
    await writeFile(path.join(ws, "after-fifo"), "fine");
    expect((await call("GET", "/v1/files/after-fifo", undefined, 5000)).body).toBe("fine");
  }, 120_000);

  it("a file that grows during its download sends exactly Content-Length bytes", async () => {
    const file = path.join(h.workspace, "growing.bin");
    const size = 4 * 1024 * 1024;
    await writeFile(file, Buffer.alloc(size, 0x61));
    const u = new URL(h.url);
    const sock = connect(Number(u.port), u.hostname);
    let raw = Buffer.alloc(0);
    let appended = false;
    await new Promise<void>((resolve, reject) => {
      let idle: NodeJS.Timeout | undefined;
      sock.on("data", async (d) => {
        raw = Buffer.concat([raw, d]);
        if (!appended && raw.indexOf("\r\n\r\n") >= 0) {
          appended = true;
          sock.pause();
          // The first bytes are out: the file now grows by a forged response.
          await writeFile(file, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged".repeat(5000), {
            flag: "a",
          });
          sock.resume();
        }
        clearTimeout(idle);
        idle = setTimeout(() => resolve(), 1000);
      });
      sock.on("error", reject);
      sock.write(
        `GET /v1/files/growing.bin HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${h.token}\r\nConnection: keep-alive\r\n\r\n`,
      );
    });
    sock.destroy();
    const headEnd = raw.indexOf("\r\n\r\n");
    const head = raw.subarray(0, headEnd).toString();
    const length = Number(/content-length: (\d+)/i.exec(head)?.[1]);
    expect(length).toBe(size);
    expect(raw.length - headEnd - 4).toBe(size);
    expect(raw.includes("forged")).toBe(false);
  });

  it("a file deleted between stat and open is a 404, never a dropped connection", async () => {
    const ws = h.workspace;
    const child = flipper(`
      const fs = require("fs"); const f = ${JSON.stringify(ws)} + "/blink";
      for (;;) { try { fs.writeFileSync(f, "x".repeat(100000)); fs.unlinkSync(f); } catch {} }`);
    let dropped = 0;
    const statuses = new Set<number>();
    try {
      await pool(1000, 8, async () => {
        try {
          const r = await call("GET", "/v1/files/blink");
          statuses.add(r.status);
          if (r.status !== 200) expect(JSON.parse(r.body).error.code).toBe("ENOENT");
          if (r.status === 200 && r.body.length !== Number(r.headers["content-length"])) dropped++;
        } catch {
          dropped++;
        }
      });
    } finally {
      await stop(child);
    }
    expect(dropped).toBe(0);
    expect(statuses.has(404)).toBe(true);
  }, 120_000);

  it("lists a large directory in pages (limit, after, next)", async () => {
    const dir = path.join(h.workspace, "many");
    await mkdir(dir);
    const n = 2500;
    await Promise.all(
      Array.from({ length: n }, (_, i) =>
        writeFile(path.join(dir, `f${String(i).padStart(5, "0")}`), ""),
      ),
    );
    const first = JSON.parse((await call("GET", "/v1/files/many?list")).body);
    expect(first.entries.length).toBe(1000);
    expect(typeof first.next).toBe("string");
    const seen: string[] = [];
    let after: string | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const q = `/v1/files/many?list&limit=700${after ? `&after=${encodeURIComponent(after)}` : ""}`;
      const page = JSON.parse((await call("GET", q)).body);
      seen.push(...page.entries.map((e: { name: string }) => e.name));
      if (!page.next) break;
      after = page.next;
    }
    expect(seen.length).toBe(n);
    expect(new Set(seen).size).toBe(n);
    expect(seen).toEqual([...seen].sort());
    expect((await call("GET", "/v1/files/many?list&limit=0")).status).toBe(400);
  });
});
