// The files API through a real socket: read/write/list/remove with the client
// SDK (streaming both ways), and confinement: `..` in every spelling, absolute
// paths, NUL, backslashes and symlinks that leave the workspace are refused with
// 400/403 and a code; raw requests are used so no URL normalisation hides them.

import { createHash, randomBytes } from "node:crypto";
import { mkdir, readFile, symlink, writeFile } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startServer } from "./support/server-harness.js";

let h: Harness;

beforeAll(async () => {
  h = await startServer({ server: { limits: { maxFileBytes: 8 * 1024 * 1024 } } });
});
afterAll(async () => {
  await h?.close();
});

function raw(
  method: string,
  rawPath: string,
  body?: Buffer,
): Promise<{ status: number; body: string }> {
  const u = new URL(h.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: u.hostname,
        port: u.port,
        method,
        path: rawPath,
        headers: { authorization: `Bearer ${h.token}` },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () =>
          resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString() }),
        );
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

describe("files", () => {
  it("write, read, list, remove (client SDK)", async () => {
    const r = await h.client.files.write("notes/a.txt", "hello");
    expect(r).toEqual({ path: "notes/a.txt", size: 5 });
    expect(await h.client.files.readText("notes/a.txt")).toBe("hello");
    expect(await readFile(path.join(h.workspace, "notes/a.txt"), "utf8")).toBe("hello");
    await h.client.files.write("notes/b.bin", new Uint8Array([0, 1, 255]));
    const list = await h.client.files.list("notes");
    expect(list.map((e) => [e.name, e.type, e.size])).toEqual([
      ["a.txt", "file", 5],
      ["b.bin", "file", 3],
    ]);
    expect(
      (await h.client.files.list("/")).some((e) => e.name === "notes" && e.type === "dir"),
    ).toBe(true);
    await h.client.files.remove("notes/a.txt");
    await expect(h.client.files.read("notes/a.txt")).rejects.toMatchObject({ code: "ENOENT" });
    await expect(h.client.files.remove("notes")).rejects.toMatchObject({ code: "ENOTEMPTY" });
    await h.client.files.remove("notes", { recursive: true });
    await expect(h.client.files.list("notes")).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("streams a large file both ways byte-exact", async () => {
    const data = randomBytes(6 * 1024 * 1024 + 3);
    let off = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        if (off >= data.length) c.close();
        else {
          c.enqueue(new Uint8Array(data.subarray(off, off + 100_000)));
          off += 100_000;
        }
      },
    });
    await h.client.files.write("big/data.bin", body);
    const stream = await h.client.files.readStream("big/data.bin");
    const hash = createHash("sha256");
    for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) hash.update(chunk);
    expect(hash.digest("hex")).toBe(createHash("sha256").update(data).digest("hex"));
  });

  it("oversize upload: 413 and nothing left behind", async () => {
    const r = await raw("PUT", "/v1/files/too-big.bin", Buffer.alloc(9 * 1024 * 1024));
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body).error.code).toBe("ETOOLARGE");
    await expect(h.client.files.list("")).resolves.not.toContainEqual(
      expect.objectContaining({ name: "too-big.bin" }),
    );
  });

  it("directories need ?list; the root cannot be deleted", async () => {
    await mkdir(path.join(h.workspace, "adir"), { recursive: true });
    const r = await raw("GET", "/v1/files/adir");
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body).error.code).toBe("EISDIR");
    expect((await raw("DELETE", "/v1/files/")).status).toBe(400);
  });

  it("path traversal in every spelling is refused with 400 EINVAL", async () => {
    for (const p of [
      "/v1/files/../etc/passwd",
      "/v1/files/a/../../etc/passwd",
      "/v1/files/%2e%2e/etc/passwd",
      "/v1/files/a/%2E%2E/%2e%2e/etc/passwd",
      "/v1/files/..%2fetc%2fpasswd",
      "/v1/files//etc/passwd",
      "/v1/files/%2fetc%2fpasswd",
      "/v1/files/a%00b",
      "/v1/files/a%5c..%5c..%5cetc",
      "/v1/files/./x",
      "/v1/files/%zz",
    ]) {
      for (const method of ["GET", "PUT", "DELETE"]) {
        const r = await raw(method, p, method === "PUT" ? Buffer.from("x") : undefined);
        expect([400, 404], `${method} ${p}`).toContain(r.status);
        if (r.status === 400)
          expect(JSON.parse(r.body).error.code, `${method} ${p}`).toBe("EINVAL");
      }
    }
    // Nothing was written outside the workspace, nothing inside either.
    expect((await h.client.files.list("")).find((e) => e.name === "x")).toBeUndefined();
  });

  it("symlinks that leave the workspace are refused with 403 EFORBIDDEN", async () => {
    await symlink("/etc", path.join(h.workspace, "etc-link"));
    await writeFile(path.join(h.workspace, "inside.txt"), "ok");
    await symlink("inside.txt", path.join(h.workspace, "ok-link"));
    const read = await raw("GET", "/v1/files/etc-link/hostname");
    expect(read.status).toBe(403);
    expect(JSON.parse(read.body).error.code).toBe("EFORBIDDEN");
    expect((await raw("GET", "/v1/files/etc-link?list")).status).toBe(403);
    const write = await raw("PUT", "/v1/files/etc-link/evil", Buffer.from("x"));
    expect(write.status).toBe(403);
    expect(await h.client.files.readText("ok-link")).toBe("ok");
    // Deleting the link removes the link, never the target.
    await h.client.files.remove("etc-link");
    expect((await h.client.files.list("")).find((e) => e.name === "etc-link")).toBeUndefined();
  });
});
