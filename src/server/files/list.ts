// GET /v1/files/<dir>?list, paged. Names are read from the directory held
// open by the race-free walk (resolve.ts), sorted bytewise, and one page is
// returned: `limit` entries (default 1000, at most 10000) after the name
// `after` (exclusive), with `next` set to the cursor of the following page
// when there is one. Only the page's entries are lstat'ed (through the same
// descriptor), so a huge directory costs one sorted name list, not one
// response of every entry's metadata.

import { constants } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import type { ServerResponse } from "node:http";
import { ComputerError } from "../../wire/errors.js";
import { sendJson } from "../http/errors.js";
import { at, type Entry, fsError, openEntry, shown } from "./resolve.js";

export const DEFAULT_LIST_LIMIT = 1000;
export const MAX_LIST_LIMIT = 10_000;

export interface FileEntry {
  name: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
  mtimeMs: number;
}

function typeOf(s: { isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean }) {
  return s.isSymbolicLink() ? "symlink" : s.isDirectory() ? "dir" : s.isFile() ? "file" : "other";
}

function parseLimit(raw: string | null): number {
  if (raw === null || raw === "") return DEFAULT_LIST_LIMIT;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > MAX_LIST_LIMIT) {
    throw new ComputerError("EINVAL", `limit must be an integer from 1 to ${MAX_LIST_LIMIT}`);
  }
  return n;
}

/** Byte order of names (what a client can reproduce from UTF-8). */
function compare(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

export async function sendListing(entry: Entry, url: URL, res: ServerResponse): Promise<void> {
  const rel = entry.name === undefined ? "" : entry.segs.join("/");
  const limit = parseLimit(url.searchParams.get("limit"));
  const after = url.searchParams.get("after");
  const dir = await openEntry(entry, constants.O_RDONLY | constants.O_DIRECTORY).catch((err) => {
    if ((err as { code?: string }).code === "ENOTDIR") {
      throw new ComputerError("ENOTDIR", `${shown(entry.segs)} is not a directory`);
    }
    throw err;
  });
  try {
    let names = await readdir(at(dir)).catch((err) => {
      throw fsError(err, shown(entry.segs));
    });
    names.sort(compare);
    if (after !== null) names = names.filter((n) => compare(n, after) > 0);
    const page = names.slice(0, limit);
    const entries: FileEntry[] = [];
    for (const name of page) {
      try {
        const s = await lstat(at(dir, name));
        entries.push({ name, type: typeOf(s), size: s.size, mtimeMs: Math.round(s.mtimeMs) });
      } catch {
        // vanished between readdir and lstat: skip it
      }
    }
    const body: { path: string; entries: FileEntry[]; next?: string } = { path: rel, entries };
    if (names.length > limit) body.next = page[page.length - 1]!;
    sendJson(res, 200, body);
  } finally {
    await dir.close();
  }
}
