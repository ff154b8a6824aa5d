// The client SDK (`agent-computer/client`) in a real browser. The SDK says it
// is isomorphic (fetch + web streams, no `node:` imports); this proves it by
// loading the BUILT modules (dist/client/*.js and the dist/wire/*.js they
// import, nothing else) as native ES modules into Debian's Chromium, on a page
// served from a different origin than the agent-computer server, the way a
// web app would embed it. In the page: exec with byte-exact binary stdout
// (SHA-256 by crypto.subtle vs Node), gap-free seqs and the exit code, result(),
// files write/read/list, coded errors (ENOENT, EUNAUTHORIZED). Then the same
// page on an origin the server does NOT allow must get nowhere: CORS blocks
// the SDK, the server answers 403 to requests that skip the preflight, and a
// WebSocket (which CORS does not cover) is refused by the Origin check.
// Pages return plain JSON from page.evaluate; every assertion is in Node.
// Skips loudly when /usr/bin/chromium is missing (`apt-get install chromium`).

import { createHash, randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHROMIUM, CHROMIUM_ARGS, haveChromium } from "./support/chromium.js";
import { ensureDistBuilt } from "./support/dist.js";
import { type Harness, startServer } from "./support/server-harness.js";

const haveChromiumHere = haveChromium("browser client tests");

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
/** The only dist folders the page may load: the SDK must need nothing else. */
const SERVED = ["client", "wire"];

/** The SDK module as the page sees it (types only; the page imports the built JS). */
type Sdk = typeof import("../src/client/index.js");

/**
 * A static file server standing in for "the web app's origin": an empty page
 * at / and the built SDK at /sdk/<client|wire>/<path>. Anything else is a 404
 * that is recorded, so a module the SDK needs but we did not serve shows up.
 */
interface StaticSite {
  origin: string;
  missing: string[];
  close(): Promise<void>;
}

async function startStatic(): Promise<StaticSite> {
  const missing: string[] = [];
  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    if (url.pathname === "/") {
      res.setHeader("content-type", "text/html; charset=utf-8");
      // The page imports the SDK the way a web app would: a native module script.
      res.end(`<!doctype html><meta charset="utf-8"><title>sdk probe</title><link rel="icon" href="data:,">
<script type="module">
import * as sdk from "/sdk/client/index.js";
globalThis.sdk = sdk;
</script>`);
      return;
    }
    // One or more plain path segments (wire/ has subfolders, e.g. exec-wire/).
    const m = /^\/sdk\/([a-z]+)\/((?:[\w-]+\/)*[\w.-]+\.js(?:\.map)?)$/.exec(url.pathname);
    if (m && SERVED.includes(m[1]!)) {
      try {
        const body = await readFile(path.join(root, "dist", m[1]!, m[2]!));
        res.setHeader(
          "content-type",
          m[2]!.endsWith(".map") ? "application/json" : "text/javascript; charset=utf-8",
        );
        res.end(body);
        return;
      } catch {
        // fall through to 404
      }
    }
    missing.push(url.pathname);
    res.statusCode = 404;
    res.end("not found");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    missing,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

let browser: Browser;
let harness: Harness | undefined;
let allowed: StaticSite;
let foreign: StaticSite;
let page: Page;
/** The server's structured request log (method, path, status, error code). */
const requests: { method?: string; path?: string; status?: number; code?: string }[] = [];
const blob = randomBytes(400_000);

/** A fresh page on `site` with the built SDK imported as `globalThis.sdk`. */
async function openSdkPage(site: StaticSite): Promise<Page> {
  const p = await browser.newPage();
  await p.goto(`${site.origin}/`);
  // (Not `await import()` inside evaluate: vitest rewrites dynamic imports in this file.)
  const loaded = await p
    .waitForFunction(() => (globalThis as unknown as { sdk?: Sdk }).sdk !== undefined, null, {
      timeout: 10_000,
    })
    .then(() => p.evaluate(() => typeof (globalThis as unknown as { sdk: Sdk }).sdk.ComputerClient))
    .catch((err) => `SDK did not load (${site.missing.join(", ") || "no 404s"}): ${err}`);
  expect(loaded).toBe("function");
  return p;
}

describe.skipIf(!haveChromiumHere)("client SDK in Chromium, cross-origin", () => {
  beforeAll(async () => {
    ensureDistBuilt();
    allowed = await startStatic();
    foreign = await startStatic();
    harness = await startServer({
      server: {
        corsOrigins: [allowed.origin],
        logger: (entry) => {
          if (entry.msg === "request") requests.push(entry as (typeof requests)[number]);
        },
      },
    });
    await writeFile(path.join(harness.workspace, "blob.bin"), blob);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
    });
    page = await openSdkPage(allowed);
  });

  afterAll(async () => {
    await browser?.close();
    await harness?.close();
    await allowed?.close();
    await foreign?.close();
  });

  it("the page and the server really are on different origins, and the SDK loads from dist/client + dist/wire alone", () => {
    expect(new URL(allowed.origin).origin).not.toBe(new URL(harness!.url).origin);
    expect(allowed.missing).toEqual([]);
  });

  it("exec streams binary stdout byte-exact (SHA-256 in the page), stderr text, gap-free seqs and exit 3", async () => {
    const got = await page.evaluate(
      async ({ url, token }) => {
        const { sdk } = globalThis as unknown as { sdk: Sdk };
        const client = new sdk.ComputerClient({ url, token });
        const h = await client.exec("head -c 300000 blob.bin; echo err >&2; exit 3");
        const reader = h.events({ heartbeats: false }).getReader();
        const out: Uint8Array[] = [];
        let stderr = "";
        const seqs: number[] = [];
        const names: string[] = [];
        let exit: { value: number; reason?: string } | undefined;
        let allBytes = true;
        const text = new TextDecoder();
        for (;;) {
          const { value: ev, done } = await reader.read();
          if (done) break;
          seqs.push(ev.seq);
          names.push(ev.name);
          if (ev.name === "stdout" || ev.name === "stderr") {
            if (!(ev.value instanceof Uint8Array)) allBytes = false;
            const bytes = ev.value as Uint8Array;
            if (ev.name === "stdout") out.push(bytes);
            else stderr += text.decode(bytes, { stream: true });
          } else if (ev.name === "exit") {
            exit = { value: ev.value, reason: ev.reason };
          }
        }
        const total = out.reduce((n, c) => n + c.length, 0);
        const all = new Uint8Array(total);
        let at = 0;
        for (const c of out) {
          all.set(c, at);
          at += c.length;
        }
        const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", all));
        return {
          id: h.id,
          stdoutBytes: total,
          stdoutSha: [...digest].map((b) => b.toString(16).padStart(2, "0")).join(""),
          stdoutChunks: out.length,
          stderr,
          seqs,
          names,
          exit,
          allBytes,
        };
      },
      { url: harness!.url, token: harness!.token },
    );
    expect(got.stdoutBytes).toBe(300_000);
    expect(got.stdoutSha).toBe(sha256(blob.subarray(0, 300_000)));
    expect(got.allBytes).toBe(true);
    expect(got.stderr).toBe("err\n");
    expect(got.seqs).toEqual(got.seqs.map((_, i) => i + 1)); // 1..n, no gap, no repeat
    expect(got.names.at(-1)).toBe("exit");
    expect(got.names.filter((n) => n === "exit")).toHaveLength(1);
    expect(got.exit).toEqual({ value: 3, reason: "exited" });
    // the server agrees on what the page saw
    const rec = await (await harness!.client.get(got.id)).info();
    expect(rec.lastSeq).toBe(got.seqs.at(-1));
  });

  it("transport websocket: one socket (binary records, then text frames) streams the same bytes, gap-free, exit 3", async () => {
    const offered: (string | undefined)[] = [];
    const onUpgrade = (req: import("node:http").IncomingMessage) => {
      const p = req.headers["sec-websocket-protocol"];
      offered.push(typeof p === "string" ? p : undefined);
    };
    harness!.server.httpServer.on("upgrade", onUpgrade);
    const got = await page.evaluate(
      async ({ url, token }) => {
        const { sdk } = globalThis as unknown as { sdk: Sdk };
        const out: Record<string, unknown>[] = [];
        for (const binary of [true, false]) {
          const client = new sdk.ComputerClient({ url, token, transport: "websocket", binary });
          const handles = await Promise.all([
            client.exec("head -c 300000 blob.bin; exit 3"),
            client.exec("printf 'grün\\n'; exit 4", { encoding: "utf8" }),
          ]);
          const read = async (h: (typeof handles)[number]) => {
            const reader = h.events({ heartbeats: false }).getReader();
            const chunks: Uint8Array[] = [];
            let text = "";
            const seqs: number[] = [];
            let exit: number | undefined;
            for (;;) {
              const { value: ev, done } = await reader.read();
              if (done) break;
              seqs.push(ev.seq);
              if (ev.name === "stdout") {
                if (typeof ev.value === "string") text += ev.value;
                else chunks.push(ev.value);
              } else if (ev.name === "exit") exit = ev.value;
            }
            const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
            let at = 0;
            for (const c of chunks) {
              all.set(c, at);
              at += c.length;
            }
            const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", all));
            return {
              bytes: all.length,
              sha: [...digest].map((b) => b.toString(16).padStart(2, "0")).join(""),
              text,
              gapFree: seqs.every((s, i) => s === i + 1),
              exit,
            };
          };
          const [a, b] = await Promise.all(handles.map(read));
          out.push({ binary, a, b });
          await client.close();
        }
        return out;
      },
      { url: harness!.url, token: harness!.token },
    );
    for (const r of got) {
      expect(r.a).toEqual({
        bytes: 300_000,
        sha: sha256(blob.subarray(0, 300_000)),
        text: "",
        gapFree: true,
        exit: 3,
      });
      expect(r.b).toEqual({
        bytes: 0,
        sha: sha256(new Uint8Array(0)),
        text: "grün\n",
        gapFree: true,
        exit: 4,
      });
    }
    harness!.server.httpServer.off("upgrade", onUpgrade);
    // One socket per client for both executions: binary offered, then not.
    expect(offered).toEqual(["agent-computer.exec-wire.binary.v1", undefined]);
  });

  it("result() in the page waits for the exit and gives code 3 with the same bytes", async () => {
    const got = await page.evaluate(
      async ({ url, token }) => {
        const { sdk } = globalThis as unknown as { sdk: Sdk };
        const client = new sdk.ComputerClient({ url, token });
        const h = await client.exec("sleep 0.2; head -c 300000 blob.bin; echo err >&2; exit 3");
        const r = await h.result();
        const again = await (await client.get(h.id)).result();
        const hex = async (b: Uint8Array<ArrayBuffer>) =>
          [...new Uint8Array(await crypto.subtle.digest("SHA-256", b))]
            .map((x) => x.toString(16).padStart(2, "0"))
            .join("");
        return {
          status: r.status,
          exitCode: r.exitCode,
          truncated: r.truncated,
          stdoutSha: await hex(r.stdout as Uint8Array<ArrayBuffer>),
          stderr: new TextDecoder().decode(r.stderr as Uint8Array),
          againExitCode: again.exitCode,
        };
      },
      { url: harness!.url, token: harness!.token },
    );
    expect(got).toEqual({
      status: "exited",
      exitCode: 3,
      truncated: false,
      stdoutSha: sha256(blob.subarray(0, 300_000)),
      stderr: "err\n",
      againExitCode: 3,
    });
  });

  it("files.write then files.read round-trip every byte value, and files.list shows the file", async () => {
    const got = await page.evaluate(
      async ({ url, token }) => {
        const { sdk } = globalThis as unknown as { sdk: Sdk };
        const client = new sdk.ComputerClient({ url, token });
        const bytes = new Uint8Array(70_000).map((_, i) => (i * 7 + (i >> 8)) & 0xff);
        const written = await client.files.write("up/dir/bytes.bin", bytes);
        const back = await client.files.read("up/dir/bytes.bin");
        await client.files.write("up/dir/note.txt", "grün ✓\n");
        const text = await client.files.readText("up/dir/note.txt");
        const entries = await client.files.list("up/dir");
        return {
          written,
          sameBytes: back.length === bytes.length && back.every((b, i) => b === bytes[i]),
          text,
          entries: entries.map((e) => ({ name: e.name, type: e.type, size: e.size })),
        };
      },
      { url: harness!.url, token: harness!.token },
    );
    expect(got.written.size).toBe(70_000);
    expect(got.sameBytes).toBe(true);
    expect(got.text).toBe("grün ✓\n");
    expect(got.entries).toEqual(
      expect.arrayContaining([
        { name: "bytes.bin", type: "file", size: 70_000 },
        { name: "note.txt", type: "file", size: Buffer.byteLength("grün ✓\n") },
      ]),
    );
    // and the bytes really landed on the server's disk
    const onDisk = readFileSync(path.join(harness!.workspace, "up/dir/bytes.bin"));
    expect([...onDisk.subarray(0, 600)]).toEqual(
      Array.from({ length: 600 }, (_, i) => (i * 7 + (i >> 8)) & 0xff),
    );
  });

  it("errors reach the page as ComputerErrors with their code: ENOENT for an unknown id, EUNAUTHORIZED for a wrong token", async () => {
    const got = await page.evaluate(
      async ({ url, token }) => {
        const { sdk } = globalThis as unknown as { sdk: Sdk };
        const describe = (e: unknown) => ({
          code: (e as { code?: string }).code,
          status: (e as { status?: number }).status,
          isComputerError: e instanceof sdk.ComputerError,
        });
        const client = new sdk.ComputerClient({ url, token });
        const out: Record<string, unknown> = {};
        try {
          await client.get("no-such-id");
          out.missing = "resolved";
        } catch (e) {
          out.missing = describe(e);
        }
        try {
          await client.files.read("no/such/file");
          out.noFile = "resolved";
        } catch (e) {
          out.noFile = describe(e);
        }
        // A 401 is only readable here if the server put CORS headers on the
        // error response too; without them the browser reports ENETWORK.
        try {
          await new sdk.ComputerClient({ url, token: "wrong-token" }).list();
          out.wrongToken = "resolved";
        } catch (e) {
          out.wrongToken = describe(e);
        }
        try {
          await new sdk.ComputerClient({ url }).list();
          out.noToken = "resolved";
        } catch (e) {
          out.noToken = describe(e);
        }
        return out;
      },
      { url: harness!.url, token: harness!.token },
    );
    expect(got).toEqual({
      missing: { code: "ENOENT", status: 404, isComputerError: true },
      noFile: { code: "ENOENT", status: 404, isComputerError: true },
      wrongToken: { code: "EUNAUTHORIZED", status: 401, isComputerError: true },
      noToken: { code: "EUNAUTHORIZED", status: 401, isComputerError: true },
    });
  });

  it("a page on an origin the server does not allow cannot drive it: CORS blocks the SDK, the server answers 403, WebSockets are refused", async () => {
    const wsUrl = `${harness!.url.replace(/^http/, "ws")}/v1/ws?token=${harness!.token}`;
    const probeWs = (p: Page) =>
      p.evaluate(
        (u) =>
          new Promise<string>((resolve) => {
            const ws = new WebSocket(u);
            ws.onopen = () => {
              ws.close();
              resolve("open");
            };
            ws.onerror = () => resolve("error");
          }),
        wsUrl,
      );
    // Control: from the allowed origin the very same socket opens.
    expect(await probeWs(page)).toBe("open");

    const execsBefore = (await harness!.client.list()).length;
    const evil = await openSdkPage(foreign);
    const before = requests.length;
    const got = await evil.evaluate(
      async ({ url, token }) => {
        const { sdk } = globalThis as unknown as { sdk: Sdk };
        const client = new sdk.ComputerClient({ url, token });
        const code = async (f: () => Promise<unknown>) => {
          try {
            await f();
            return "resolved";
          } catch (e) {
            return (e as { code?: string }).code ?? String(e);
          }
        };
        return {
          list: await code(() => client.list()),
          exec: await code(() => client.exec("touch pwned-by-sdk")),
          write: await code(() => client.files.write("pwned.txt", "x")),
          // A "simple" request skips the preflight and is sent anyway (the page
          // just cannot read the answer): only the server's Origin check stops it.
          simplePost: await fetch(`${url}/v1/execs?token=${token}`, {
            method: "POST",
            mode: "no-cors",
            body: JSON.stringify({ command: "touch pwned-by-form" }),
          }).then(
            (r) => r.type,
            (e) => String(e),
          ),
        };
      },
      { url: harness!.url, token: harness!.token },
    );
    expect(got).toEqual({
      list: "ENETWORK",
      exec: "ENETWORK",
      write: "ENETWORK",
      simplePost: "opaque",
    });
    expect(await probeWs(evil)).toBe("error");
    await evil.close();

    // What the server did with the foreign page's requests: 403 EFORBIDDEN for
    // every one (preflights and the simple POST), nothing ran, nothing was written.
    await expect.poll(() => requests.slice(before).some((r) => r.method === "POST")).toBe(true);
    const seen = requests.slice(before).filter((r) => r.path?.startsWith("/v1/"));
    expect(seen.length).toBeGreaterThanOrEqual(4);
    for (const r of seen) expect(r).toMatchObject({ status: 403, code: "EFORBIDDEN" });
    expect(seen.map((r) => `${r.method} ${r.path}`)).toEqual(
      expect.arrayContaining([
        "OPTIONS /v1/execs",
        "OPTIONS /v1/files/pwned.txt",
        "POST /v1/execs",
      ]),
    );
    expect(existsSync(path.join(harness!.workspace, "pwned-by-sdk"))).toBe(false);
    expect(existsSync(path.join(harness!.workspace, "pwned-by-form"))).toBe(false);
    expect(existsSync(path.join(harness!.workspace, "pwned.txt"))).toBe(false);
    expect(await harness!.client.list()).toHaveLength(execsBefore); // no execution was created
    expect(foreign.missing).toEqual([]);
  });
});
