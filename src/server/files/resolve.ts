// Race-free confinement for the files API: every path is walked component by
// component from an open descriptor of the workspace root, never resolved to
// an absolute path that is checked first and opened later. Node has no
// openat(), so each step opens `/proc/self/fd/<dirfd>/<name>`: the kernel
// follows the magic link to exactly the directory we hold open and then looks
// up `<name>` inside it, with O_NOFOLLOW (and O_DIRECTORY for directories), so
// a component that a command swaps for a symlink between two steps fails
// with ELOOP instead of being followed. A symlink the walk meets is read
// (readlink through the same parent descriptor) and its target is walked again
// from the root by the same rules, so symlinks inside the workspace keep
// working while one that leads out is refused (403 EFORBIDDEN); whatever the
// link says when it is read, the walk itself never leaves the directories it
// holds. Error messages name paths relative to the workspace only.
//
// Linux-only (procfs); the server already is (process groups, /proc).

import { constants } from "node:fs";
import { type FileHandle, mkdir, open, readlink, realpath } from "node:fs/promises";
import { ComputerError } from "../../wire/errors.js";

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = constants;
/** Symlinks followed in one resolution before giving up (the kernel's own limit). */
const MAX_SYMLINKS = 40;

/** `/proc/self/fd/<fd>/<name>`: `name` looked up in the directory `fd` holds open. */
export function at(dir: FileHandle, name?: string): string {
  return name === undefined ? `/proc/self/fd/${dir.fd}` : `/proc/self/fd/${dir.fd}/${name}`;
}

function codeOf(err: unknown): string | undefined {
  return (err as { code?: string } | null)?.code;
}

/** A workspace-relative path for messages ("/" for the root). */
export function shown(segs: readonly string[]): string {
  return segs.length === 0 ? "/" : segs.join("/");
}

export function forbidden(rel: string, why = "leaves the workspace"): ComputerError {
  return new ComputerError("EFORBIDDEN", `path ${JSON.stringify(rel)} ${why}`);
}

/** Our error for an fs error met at workspace-relative `rel` (never the absolute path). */
export function fsError(err: unknown, rel: string): unknown {
  if (err instanceof ComputerError) return err;
  switch (codeOf(err)) {
    case "ENOENT":
      return new ComputerError("ENOENT", `${rel}: no such file or directory`);
    case "ENOTDIR":
      return new ComputerError("ENOTDIR", `${rel}: not a directory`);
    case "EISDIR":
      return new ComputerError("EISDIR", `${rel}: is a directory`);
    case "EEXIST":
      return new ComputerError("EEXIST", `${rel}: already exists`);
    case "ENOTEMPTY":
      return new ComputerError("ENOTEMPTY", `${rel}: directory not empty`);
    case "EACCES":
    case "EPERM":
      return new ComputerError("EFORBIDDEN", `${rel}: permission denied`);
    case "ELOOP":
      return forbidden(rel, "has too many symlinks");
    case "ENAMETOOLONG":
      return new ComputerError("EINVAL", `${rel}: name too long`);
    case "ENXIO":
      return new ComputerError("EINVAL", `${rel} is not a regular file`);
    case "ENOSPC":
      return new ComputerError("ELIMIT", "no space left on the workspace's device");
    default:
      return err;
  }
}

/** The workspace root, opened (its own path may be a symlink: the operator chose it). */
export class WorkspaceRoot {
  private real: string | undefined;
  constructor(private readonly root: string) {}

  async realPath(): Promise<string> {
    if (this.real === undefined) {
      this.real = await realpath(this.root).catch(() => {
        throw new ComputerError("EUNAVAILABLE", "the workspace is not accessible");
      });
    }
    return this.real;
  }

  async open(): Promise<FileHandle> {
    return open(await this.realPath(), O_RDONLY | O_DIRECTORY).catch(() => {
      throw new ComputerError("EUNAVAILABLE", "the workspace is not accessible");
    });
  }
}

/** Where a path ended up: its parent directory (held open) and its last name. */
export interface Entry {
  /** The directory holding the entry, open; the caller closes it. */
  parent: FileHandle;
  /** The entry's name in `parent`; undefined for the workspace root itself. */
  name: string | undefined;
  /** The resolved workspace-relative segments (symlinks replaced by their targets). */
  segs: string[];
}

export interface ResolveOptions {
  /** Create missing parent directories (PUT). */
  createParents?: boolean;
  /** Follow a symlink in the last component too (default true; DELETE says false). */
  followLast?: boolean;
  /** Called with each directory the walk created (a path through the parent's descriptor). */
  created?: (path: string) => Promise<void>;
}

/** Splits a symlink target into segments relative to the workspace, or throws EFORBIDDEN. */
function linkTarget(target: string, realRoot: string, dirSegs: string[], rel: string): string[] {
  let base: string[];
  let rest: string;
  if (target.startsWith("/")) {
    if (target !== realRoot && !target.startsWith(`${realRoot}/`)) throw forbidden(rel);
    base = [];
    rest = target.slice(realRoot.length);
  } else {
    base = [...dirSegs];
    rest = target;
  }
  for (const seg of rest.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") {
      if (base.length === 0) throw forbidden(rel);
      base.pop();
    } else base.push(seg);
  }
  return base;
}

/**
 * Walks `segs` (already lexically checked: no "", ".", "..") from the
 * workspace root and returns the last component's parent, open. Every
 * directory is opened O_DIRECTORY|O_NOFOLLOW through its parent's descriptor;
 * symlinks are re-walked from the root (at most MAX_SYMLINKS). The last
 * component is only looked at (lstat through the parent) to see whether it is
 * a symlink to follow; the caller opens it with O_NOFOLLOW itself, so a swap
 * after this check fails rather than escapes.
 */
export async function resolveEntry(
  root: WorkspaceRoot,
  segs: readonly string[],
  options: ResolveOptions = {},
): Promise<Entry> {
  const rel = shown(segs as string[]);
  const realRoot = await root.realPath();
  let todo = [...segs];
  for (let hops = 0; hops <= MAX_SYMLINKS; hops++) {
    const rootFd = await root.open();
    let found: Entry | undefined;
    let restart: string[] | undefined;
    try {
      ({ found, restart } = await walk(rootFd, todo, realRoot, rel, options));
    } finally {
      // Close everything but the parent we hand out.
      if (found?.parent !== rootFd) await rootFd.close().catch(() => {});
    }
    if (found) return found;
    if (restart === undefined) break;
    todo = restart;
  }
  throw forbidden(rel, "has too many symlinks");
}

interface WalkResult {
  found?: Entry;
  restart?: string[];
}

/** One walk from the root: the entry, or the segments to walk again after a symlink. */
async function walk(
  rootFd: FileHandle,
  todo: string[],
  realRoot: string,
  rel: string,
  options: ResolveOptions,
): Promise<WalkResult> {
  let dir = rootFd;
  const done: string[] = [];
  let created = 0;
  const closeDir = async () => {
    if (dir !== rootFd) await dir.close().catch(() => {});
  };
  if (todo.length === 0) return { found: { parent: rootFd, name: undefined, segs: [] } };
  try {
    for (let i = 0; i < todo.length; i++) {
      const name = todo[i]!;
      const last = i === todo.length - 1;
      const entry = (): WalkResult => ({
        found: { parent: dir, name, segs: [...done, name] },
      });
      if (last && options.followLast === false) return entry();
      let next: FileHandle;
      try {
        next = await open(at(dir, name), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
      } catch (err) {
        const code = codeOf(err);
        if (code === "ENOENT" && !last && options.createParents && created++ < todo.length * 4) {
          const made = await mkdir(at(dir, name)).then(
            () => true,
            (e) => {
              if (codeOf(e) !== "EEXIST") throw e;
              return false;
            },
          );
          if (made) await options.created?.(at(dir, name));
          i--; // open what we just created (or what raced us to it) on the next turn
          continue;
        }
        if (code === "ELOOP" || code === "ENOTDIR") {
          const target = await readlink(at(dir, name)).catch(() => undefined);
          if (target !== undefined) {
            const restart = [...linkTarget(target, realRoot, done, rel), ...todo.slice(i + 1)];
            await closeDir();
            return { restart };
          }
          // Not a symlink: a file. As the last component it is the entry itself.
          if (last && code === "ENOTDIR") return entry();
        }
        if (last && code === "ENOENT") return entry();
        throw fsError(err, shown([...done, name]));
      }
      if (last) {
        await next.close();
        return entry();
      }
      await closeDir();
      dir = next;
      done.push(name);
    }
  } catch (err) {
    await closeDir();
    throw err;
  }
  throw new Error("unreachable");
}

/** Opens `entry` with `flags | O_NOFOLLOW`; a symlink there now (a swap) is ELOOP, refused. */
export async function openEntry(entry: Entry, flags: number, mode?: number): Promise<FileHandle> {
  if (entry.name === undefined) return open(at(entry.parent, "."), flags | O_DIRECTORY);
  try {
    return await open(at(entry.parent, entry.name), flags | O_NOFOLLOW, mode);
  } catch (err) {
    throw fsError(err, shown(entry.segs));
  }
}

/** Splits a lexically checked relative path ("" is the root) into segments. */
export function segmentsOf(rel: string): string[] {
  return rel === "" ? [] : rel.split("/");
}
