// Confinement of caller-given paths to the workspace, by name. Used for an
// execution's cwd (spawn takes a path, not a descriptor) and by agent tools
// that work on a local workspace. The server's files API does not use it: it
// walks paths by descriptors (server/files/resolve.ts) so a command racing
// symlink swaps cannot make it read or write outside. The rule: a path is
// resolved against the workspace root, symlinks included, and must end up
// inside the root's real path. Checking the lexical path alone is not enough
// (a symlink `ws/out -> /etc` passes a string check), so the longest existing
// prefix is resolved with realpath and only the not-yet-existing rest is
// joined lexically (the files API may create it; it cannot contain symlinks
// because it does not exist). A concurrent symlink swap can change what the
// name means after this check; for a cwd that only moves where the new command
// starts, which a command in the workspace could do to itself anyway.
//
// The realpath calls are synchronous on purpose: on a local file system one
// takes ~5 µs, where the same call through the thread pool cost ~130 µs of
// CPU (measured on the 2-core reference machine), several times per exec.

import { realpathSync } from "node:fs";
import path from "node:path";
import { ComputerError } from "../wire/errors.js";

/**
 * Resolve `rel` (relative to `root`; a leading "/" is read as the workspace
 * root, so "/a/b" and "a/b" are the same) to an absolute path inside the real
 * workspace root. Throws `EINVAL` for malformed input (NUL bytes, non-strings)
 * and `EFORBIDDEN` for a path that leaves the workspace, lexically or through
 * a symlink. The returned path has every existing component resolved.
 */
export async function resolveInWorkspace(root: string, rel: string): Promise<string> {
  if (typeof rel !== "string" || rel.includes("\0")) {
    throw new ComputerError("EINVAL", "path must be a string without NUL bytes");
  }
  let realRoot: string;
  try {
    realRoot = realpathSync.native(root);
  } catch (err) {
    throw new ComputerError("EINVAL", `workspace root ${root} is not accessible`, { cause: err });
  }
  const rooted = path.resolve(realRoot, `.${path.sep}${rel.replace(/^[/\\]+/, "")}`);
  if (!inside(realRoot, rooted)) throw outside(rel);
  // Walk up to the longest prefix that exists and resolve its symlinks.
  let existing = rooted;
  const rest: string[] = [];
  for (;;) {
    try {
      const real = realpathSync.native(existing);
      const full = rest.length ? path.join(real, ...rest.reverse()) : real;
      if (!inside(realRoot, full)) throw outside(rel);
      return full;
    } catch (err) {
      if ((err as { code?: string }).code === "EFORBIDDEN") throw err;
      const code = (err as { code?: string }).code;
      // ENOENT: component missing; ENOTDIR: a file used as a directory. Either
      // way the rest is created (or rejected) by the caller's own fs call.
      if (code !== "ENOENT" && code !== "ENOTDIR") throw err;
      const parent = path.dirname(existing);
      if (parent === existing || !inside(realRoot, parent)) throw outside(rel);
      rest.push(path.basename(existing));
      existing = parent;
    }
  }
}

/** The workspace-relative form ("" for the root) of an absolute path inside `realRoot`. */
export function relativeToWorkspace(realRoot: string, abs: string): string {
  const r = path.relative(realRoot, abs);
  return r.split(path.sep).join("/");
}

function inside(root: string, p: string): boolean {
  if (p === root) return true;
  const withSep = root.endsWith(path.sep) ? root : root + path.sep;
  return p.startsWith(withSep);
}

function outside(rel: string): ComputerError {
  return new ComputerError("EFORBIDDEN", `path ${JSON.stringify(rel)} leaves the workspace`);
}
