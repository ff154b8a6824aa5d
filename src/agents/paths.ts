// How a path given to an agent tool names a place in the workspace. Models
// use absolute paths (Anthropic's editor is documented with them, and `pwd`
// in the shell prints one), while the files API takes workspace-relative
// paths and reads a leading "/" as the workspace root. So the tools accept
// both: an absolute path under the workspace's absolute path is made
// relative; any other absolute path is refused with an error that says where
// the workspace is, rather than silently mapped into it (a model writing
// "/tmp/x" would otherwise look for it in /tmp with the shell and not find
// it). Relative paths pass through; `..` and symlinks that leave the
// workspace are refused by the confinement underneath (resolveInWorkspace,
// or the server's files API, which applies the same rule).

import { ComputerError } from "../wire/errors.js";

/**
 * The workspace-relative form of `p`. `roots` are the absolute paths the
 * workspace is known by (as configured, and its real path).
 */
export function toWorkspacePath(p: string, roots: readonly string[]): string {
  if (p.includes("\0")) throw new ComputerError("EINVAL", "path must not contain NUL bytes");
  if (!p.startsWith("/")) return p;
  for (const root of roots) {
    const r = root.replace(/\/+$/, "");
    if (p === r) return "";
    if (p.startsWith(`${r}/`)) return p.slice(r.length + 1);
  }
  throw new ComputerError(
    "EFORBIDDEN",
    `${p} is outside the workspace ${roots[0] ?? ""}; use a path relative to the workspace or an absolute path under it`,
  );
}
