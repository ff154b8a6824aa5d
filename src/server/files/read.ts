// GET/HEAD of one workspace file. The file is opened race-free (resolve.ts)
// with O_NOFOLLOW|O_NONBLOCK after an lstat through the same parent
// descriptor said it is a regular file, and checked again on the open
// descriptor (fstat), so a FIFO, socket or device is refused without ever
// being opened for reading (O_NONBLOCK: even a FIFO swapped in after the
// lstat cannot block a thread-pool thread on open). A regular file with more
// than one hard link is refused too: its other names may be outside the
// workspace and nothing on the descriptor says where. Exactly the bytes
// announced in Content-Length are sent, read from the descriptor that was
// measured: a file that grows meanwhile is cut at that length, one that
// shrinks ends the connection (a short body must never be mistaken for the
// whole file, nor leave the connection reusable).

import { constants, createReadStream } from "node:fs";
import { lstat } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { ComputerError } from "../../wire/errors.js";
import { at, type Entry, forbidden, fsError, openEntry, shown } from "./resolve.js";

const { O_RDONLY, O_NONBLOCK } = constants;

/** Refuses anything but a regular file with one link (EINVAL / EFORBIDDEN). */
export function checkRegular(
  st: { isFile(): boolean; isDirectory(): boolean; nlink: number },
  rel: string,
): void {
  if (st.isDirectory()) {
    throw new ComputerError("EISDIR", `${rel} is a directory (add ?list to list it)`);
  }
  if (!st.isFile()) throw new ComputerError("EINVAL", `${rel} is not a regular file`);
  if (st.nlink > 1) throw forbidden(rel, "has other hard links (they may lead outside)");
}

/** Streams the regular file at `entry` (its parent is closed by the caller). */
export async function sendFile(
  entry: Entry,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const rel = shown(entry.segs);
  if (entry.name === undefined) {
    throw new ComputerError("EISDIR", "/ is a directory (add ?list to list it)");
  }
  const pre = await lstat(at(entry.parent, entry.name)).catch((err) => {
    throw fsError(err, rel);
  });
  checkRegular(pre, rel);
  const fh = await openEntry(entry, O_RDONLY | O_NONBLOCK);
  let size: number;
  try {
    const st = await fh.stat();
    checkRegular(st, rel);
    size = st.size;
  } catch (err) {
    await fh.close();
    throw err;
  }
  res.statusCode = 200;
  res.setHeader("content-type", "application/octet-stream");
  res.setHeader("content-length", size);
  res.setHeader("cache-control", "no-store");
  res.setHeader("x-content-type-options", "nosniff");
  // A workspace file is untrusted content served from the API's own origin:
  // never let a browser render it as a page that could use the auth cookie.
  res.setHeader("content-disposition", "attachment");
  res.setHeader("content-security-policy", "sandbox; default-src 'none'");
  if (req.method === "HEAD" || size === 0) {
    await fh.close();
    res.end();
    return;
  }
  const stream = createReadStream("", { fd: fh, start: 0, end: size - 1, autoClose: true });
  let sent = 0;
  await new Promise<void>((resolve) => {
    const done = () => {
      stream.destroy();
      resolve();
    };
    stream.on("data", (data) => {
      const chunk = data as Buffer;
      sent += chunk.length;
      if (!res.write(chunk)) stream.pause();
    });
    res.on("drain", () => stream.resume());
    stream.on("end", () => {
      if (sent === size) res.end();
      else res.destroy(); // the file shrank: never pass a short body off as the file
      done();
    });
    stream.on("error", () => {
      res.destroy();
      done();
    });
    res.on("close", done);
  });
}
