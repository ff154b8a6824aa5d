// DELETE /v1/files/<path>. The parent is reached by the race-free walk
// (resolve.ts) and the last name is never followed: deleting a symlink
// removes the link, never its target. `?recursive=1` removes a tree by
// descriptors as well (each subdirectory opened O_DIRECTORY|O_NOFOLLOW
// through its parent's descriptor), so a command that swaps a subdirectory
// for a symlink to elsewhere mid-removal makes the removal fail there rather
// than delete outside files.

import { constants } from "node:fs";
import { type FileHandle, lstat, open, readdir, rmdir, unlink } from "node:fs/promises";
import { ComputerError } from "../../wire/errors.js";
import { at, type Entry, fsError, shown } from "./resolve.js";

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = constants;

async function removeTree(parent: FileHandle, name: string, depth: number): Promise<void> {
  if (depth > 4096) throw new ComputerError("ELIMIT", "directory tree too deep");
  try {
    await unlink(at(parent, name));
    return;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "ENOENT") return;
    if (code !== "EISDIR" && code !== "EPERM") throw err;
  }
  const dir = await open(at(parent, name), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  try {
    for (const child of await readdir(at(dir))) await removeTree(dir, child, depth + 1);
  } finally {
    await dir.close();
  }
  await rmdir(at(parent, name)).catch((err) => {
    if ((err as { code?: string }).code !== "ENOENT") throw err;
  });
}

export async function removeEntry(entry: Entry, recursive: boolean): Promise<void> {
  const name = entry.name;
  const rel = shown(entry.segs);
  if (name === undefined)
    throw new ComputerError("EINVAL", "refusing to delete the workspace root");
  try {
    const st = await lstat(at(entry.parent, name));
    if (!st.isDirectory()) await unlink(at(entry.parent, name));
    else if (recursive) await removeTree(entry.parent, name, 0);
    else await rmdir(at(entry.parent, name));
  } catch (err) {
    throw fsError(err, rel);
  }
}
