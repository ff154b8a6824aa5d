// The files API: GET/PUT/DELETE /v1/files/<path>, GET /v1/files/<dir>?list.
// Confined to the workspace in two layers:
// 1. Lexical, here: the path must be relative and plain (no empty, "." or ".."
//    segment, no backslash, no NUL) -> 400 EINVAL. Catching these up front
//    gives a clear error instead of a silently normalised path.
// 2. Real, in runtime/paths.ts resolveInWorkspace (shared with exec cwd):
//    symlinks resolved, the result must stay under the workspace's real path
//    -> 403 EFORBIDDEN.
// Bodies stream both ways (createReadStream -> response; request -> temp file
// -> rename, so a reader never sees a half-written file and a failed upload
// leaves nothing behind). Uploads are capped at limits.maxFileBytes (413).

import { randomBytes } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { lstat, mkdir, readdir, rename, rm, rmdir, stat, unlink } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import path from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { resolveInWorkspace } from "../../runtime/paths.js";
import { ComputerError } from "../../wire/errors.js";
import type { ServerDeps } from "../deps.js";
import { sendJson } from "../http/errors.js";
import type { Params, RouteContext, Router } from "../http/router.js";

interface FileEntry {
  name: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
  mtimeMs: number;
}

/** Lexical validation of a workspace-relative path ("" is the root). */
function checkRelPath(rel: string): string {
  if (rel.includes("\0")) throw new ComputerError("EINVAL", "path contains NUL");
  if (rel.includes("\\")) throw new ComputerError("EINVAL", "path contains a backslash");
  if (rel === "") return "";
  const trimmed = rel.endsWith("/") ? rel.slice(0, -1) : rel;
  if (trimmed.startsWith("/")) throw new ComputerError("EINVAL", "absolute paths are not allowed");
  for (const seg of trimmed.split("/")) {
    if (seg === "" || seg === "." || seg === "..") {
      throw new ComputerError("EINVAL", `path segment ${JSON.stringify(seg)} is not allowed`);
    }
  }
  if (Buffer.byteLength(trimmed) > 4096) throw new ComputerError("EINVAL", "path too long");
  return trimmed;
}

function typeOf(s: { isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean }) {
  return s.isSymbolicLink() ? "symlink" : s.isDirectory() ? "dir" : s.isFile() ? "file" : "other";
}

async function resolve(deps: ServerDeps, params: Params): Promise<{ rel: string; abs: string }> {
  const rel = checkRelPath(params["*"] ?? "");
  const abs = await resolveInWorkspace(deps.workspace, rel);
  return { rel, abs };
}

function flag(ctx: RouteContext, name: string): boolean {
  const v = ctx.url.searchParams.get(name);
  return v !== null && v !== "0" && v !== "false";
}

async function getFile(
  deps: ServerDeps,
  req: IncomingMessage,
  res: ServerResponse,
  params: Params,
  ctx: RouteContext,
): Promise<void> {
  const { rel, abs } = await resolve(deps, params);
  const st = await stat(abs);
  if (ctx.url.searchParams.has("list")) {
    if (!st.isDirectory()) throw new ComputerError("ENOTDIR", `${rel || "/"} is not a directory`);
    const dirents = await readdir(abs, { withFileTypes: true });
    const entries: FileEntry[] = [];
    for (const d of dirents) {
      try {
        const s = await lstat(path.join(abs, d.name));
        entries.push({
          name: d.name,
          type: typeOf(s),
          size: s.size,
          mtimeMs: Math.round(s.mtimeMs),
        });
      } catch {
        // vanished between readdir and lstat: skip it
      }
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    sendJson(res, 200, { path: rel, entries });
    return;
  }
  if (st.isDirectory()) {
    throw new ComputerError("EISDIR", `${rel || "/"} is a directory (add ?list to list it)`);
  }
  if (!st.isFile()) throw new ComputerError("EINVAL", `${rel} is not a regular file`);
  res.statusCode = 200;
  res.setHeader("content-type", "application/octet-stream");
  res.setHeader("content-length", st.size);
  res.setHeader("cache-control", "no-store");
  res.setHeader("x-content-type-options", "nosniff");
  // A workspace file is untrusted content served from the API's own origin:
  // never let a browser render it as a page that could use the auth cookie.
  res.setHeader("content-disposition", "attachment");
  res.setHeader("content-security-policy", "sandbox; default-src 'none'");
  if (req.method === "HEAD") {
    res.end();
    return;
  }
  await pipeline(createReadStream(abs), res).catch((err) => {
    if (!res.headersSent) throw err;
    res.destroy();
  });
}

async function putFile(
  deps: ServerDeps,
  req: IncomingMessage,
  res: ServerResponse,
  params: Params,
): Promise<void> {
  const { rel, abs } = await resolve(deps, params);
  if (rel === "") throw new ComputerError("EINVAL", "a file path is required");
  const limit = deps.limits.maxFileBytes;
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) {
    throw new ComputerError("ETOOLARGE", `file larger than ${limit} bytes`);
  }
  const existing = await stat(abs).catch(() => undefined);
  if (existing?.isDirectory())
    throw new ComputerError("EISDIR", `${rel} is a directory`, { status: 409 });
  const dir = path.dirname(abs);
  const created = await mkdir(dir, { recursive: true });
  if (created) await deps.adopt?.(created);
  // Re-check after creating parents: the created part cannot hold symlinks, but be strict.
  await resolveInWorkspace(deps.workspace, rel);
  const tmp = path.join(dir, `.${path.basename(abs)}.${randomBytes(6).toString("hex")}.upload`);
  let size = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      size += chunk.length;
      if (size > limit) cb(new ComputerError("ETOOLARGE", `file larger than ${limit} bytes`));
      else cb(null, chunk);
    },
  });
  try {
    await pipeline(req, counter, createWriteStream(tmp, { flags: "wx" }));
    await deps.adopt?.(tmp);
    await rename(tmp, abs);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    if (err instanceof ComputerError) throw err;
    if ((err as { code?: string }).code === "ERR_STREAM_PREMATURE_CLOSE") {
      throw new ComputerError("EINVAL", "upload aborted");
    }
    throw err;
  }
  sendJson(res, existing ? 200 : 201, { path: rel, size });
}

async function deleteFile(
  deps: ServerDeps,
  res: ServerResponse,
  params: Params,
  ctx: RouteContext,
): Promise<void> {
  const rel = checkRelPath(params["*"] ?? "");
  if (rel === "") throw new ComputerError("EINVAL", "refusing to delete the workspace root");
  // Resolve the parent, not the entry: deleting a symlink removes the link itself
  // (never its target), and a link pointing outside may still be removed.
  const parent = await resolveInWorkspace(deps.workspace, path.posix.dirname(rel));
  const abs = path.join(parent, path.posix.basename(rel));
  const st = await lstat(abs);
  if (st.isDirectory()) {
    if (flag(ctx, "recursive")) await rm(abs, { recursive: true, force: true });
    else await rmdir(abs);
  } else {
    await unlink(abs);
  }
  res.statusCode = 204;
  res.end();
}

export function registerFilesRoutes(router: Router, deps: ServerDeps): void {
  const get = (req: IncomingMessage, res: ServerResponse, params: Params, ctx: RouteContext) =>
    getFile(deps, req, res, params, ctx);
  router.get("/v1/files", (req, res, _p, ctx) => getFile(deps, req, res, { "*": "" }, ctx));
  router.get("/v1/files/*", get);
  router.route("HEAD", "/v1/files/*", get);
  router.put("/v1/files/*", (req, res, params) => putFile(deps, req, res, params));
  router.delete("/v1/files/*", (_req, res, params, ctx) => deleteFile(deps, res, params, ctx));
}
