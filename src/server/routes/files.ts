// The files API: GET/PUT/DELETE /v1/files/<path>, GET /v1/files/<dir>?list.
// Confined to the workspace in two layers:
// 1. Lexical, here: the path must be relative and plain (no empty, "." or ".."
//    segment, no backslash, no NUL) -> 400 EINVAL. Catching these up front
//    gives a clear error instead of a silently normalised path.
// 2. Real, in files/resolve.ts: the path is walked component by component
//    from the workspace root's descriptor, never checked and then reopened by
//    name, so a command racing symlink swaps cannot make the API read or write
//    outside -> 403 EFORBIDDEN (docs/security.md explains the design).
// The operations themselves live in files/: read (one file, exact length),
// list (paged), write (temp file + rename), remove.

import type { IncomingMessage, ServerResponse } from "node:http";
import { ComputerError } from "../../wire/errors.js";
import type { ServerDeps } from "../deps.js";
import { sendListing } from "../files/list.js";
import { sendFile } from "../files/read.js";
import { removeEntry } from "../files/remove.js";
import { type ResolveOptions, resolveEntry, segmentsOf, WorkspaceRoot } from "../files/resolve.js";
import { receiveFile } from "../files/write.js";
import type { Params, RouteContext, Router } from "../http/router.js";

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

function flag(ctx: RouteContext, name: string): boolean {
  const v = ctx.url.searchParams.get(name);
  return v !== null && v !== "0" && v !== "false";
}

export function registerFilesRoutes(router: Router, deps: ServerDeps): void {
  const root = new WorkspaceRoot(deps.workspace);
  /** Resolves the request's path, runs `op` on it, and always closes the parent descriptor. */
  const withEntry =
    (
      options: ResolveOptions,
      op: (
        entry: Awaited<ReturnType<typeof resolveEntry>>,
        req: IncomingMessage,
        res: ServerResponse,
        ctx: RouteContext,
      ) => Promise<void>,
    ) =>
    async (req: IncomingMessage, res: ServerResponse, params: Params, ctx: RouteContext) => {
      const rel = checkRelPath(params["*"] ?? "");
      const entry = await resolveEntry(root, segmentsOf(rel), options);
      try {
        await op(entry, req, res, ctx);
      } finally {
        await entry.parent.close().catch(() => {});
      }
    };
  const get = withEntry({}, (entry, req, res, ctx) =>
    ctx.url.searchParams.has("list") ? sendListing(entry, ctx.url, res) : sendFile(entry, req, res),
  );
  router.get("/v1/files", (req, res, _p, ctx) => get(req, res, { "*": "" }, ctx));
  router.get("/v1/files/*", get);
  router.route("HEAD", "/v1/files/*", get);
  router.put(
    "/v1/files/*",
    withEntry(
      { createParents: true, ...(deps.adopt ? { created: deps.adopt } : {}) },
      (entry, req, res) => receiveFile(entry, req, res, deps.limits.maxFileBytes, deps.adopt),
    ),
  );
  router.delete(
    "/v1/files/*",
    withEntry({ followLast: false }, async (entry, _req, res, ctx) => {
      await removeEntry(entry, flag(ctx, "recursive"));
      res.statusCode = 204;
      res.end();
    }),
  );
}
