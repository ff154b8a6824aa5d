// The workspace files the agent tools read and write, behind one small
// interface with two implementations: in-process (node:fs, every path confined
// by resolveInWorkspace, the same rule the server's files API applies) and
// remote (the SDK's `client.files`, i.e. the server's files API). The text
// editor and the file tools are written once against this interface.
//
// Failures are ComputerErrors with the files API's codes (ENOENT, EISDIR,
// ENOTDIR, EFORBIDDEN), so the tools turn both implementations' failures into
// the same tool error text.

import { lstat, mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import type { FilesApi } from "../client/client.js";
import { resolveInWorkspace } from "../runtime/paths.js";
import { ComputerError } from "../wire/errors.js";

export interface WorkspaceEntry {
  name: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
}

/** Files inside one workspace; paths are workspace-relative ("" is the root). */
export interface WorkspaceFiles {
  /** The whole file; EISDIR for a directory, ENOENT when missing. */
  read(path: string): Promise<Uint8Array>;
  /** Creates or replaces a file, parents created; EISDIR when a directory is in the way. */
  write(path: string, data: Uint8Array): Promise<void>;
  /** Entries of a directory; ENOTDIR for a file, ENOENT when missing. */
  list(path: string): Promise<WorkspaceEntry[]>;
}

/** In-process files under `root`, confined like the server's files API. */
export function localFiles(root: string): WorkspaceFiles {
  const resolve = (rel: string) => resolveInWorkspace(root, rel);
  return {
    async read(rel) {
      const abs = await resolve(rel);
      const st = await stat(abs).catch((err) => {
        throw fsError(err, rel);
      });
      if (st.isDirectory()) throw new ComputerError("EISDIR", `${rel} is a directory`);
      return new Uint8Array(
        await readFile(abs).catch((err) => {
          throw fsError(err, rel);
        }),
      );
    },
    async write(rel, data) {
      const abs = await resolve(rel);
      const st = await stat(abs).catch(() => undefined);
      if (st?.isDirectory()) throw new ComputerError("EISDIR", `${rel} is a directory`);
      await mkdir(path.dirname(abs), { recursive: true }).catch((err) => {
        throw fsError(err, rel);
      });
      await writeFile(abs, data).catch((err) => {
        throw fsError(err, rel);
      });
    },
    async list(rel) {
      const abs = await resolve(rel);
      const st = await stat(abs).catch((err) => {
        throw fsError(err, rel);
      });
      if (!st.isDirectory()) throw new ComputerError("ENOTDIR", `${rel} is not a directory`);
      const out: WorkspaceEntry[] = [];
      for (const d of await readdir(abs, { withFileTypes: true })) {
        const s = await lstat(path.join(abs, d.name)).catch(() => undefined);
        if (!s) continue; // vanished between readdir and lstat
        const type = s.isSymbolicLink()
          ? "symlink"
          : s.isDirectory()
            ? "dir"
            : s.isFile()
              ? "file"
              : "other";
        out.push({ name: d.name, type, size: s.size });
      }
      return out.sort((a, b) => a.name.localeCompare(b.name));
    },
  };
}

/** The server's files API through the SDK (`client.files`). */
export function clientFiles(files: FilesApi): WorkspaceFiles {
  return {
    read: (rel) => files.read(rel),
    async write(rel, data) {
      await files.write(rel, data);
    },
    async list(rel) {
      const entries = await files.list(rel);
      return entries
        .map((e) => ({ name: e.name, type: e.type, size: e.size }))
        .sort((a, b) => a.name.localeCompare(b.name));
    },
  };
}

/** node:fs error codes as the project's codes; anything else passes through. */
function fsError(err: unknown, rel: string): unknown {
  const code = (err as { code?: string })?.code;
  if (code === "ENOENT") return new ComputerError("ENOENT", `${rel} does not exist`);
  if (code === "EISDIR") return new ComputerError("EISDIR", `${rel} is a directory`);
  if (code === "ENOTDIR")
    return new ComputerError("ENOTDIR", `${rel}: a parent is not a directory`);
  if (code === "EACCES" || code === "EPERM") {
    return new ComputerError("EFORBIDDEN", `${rel}: permission denied`);
  }
  return err;
}
