// PUT /v1/files/<path>: the body is streamed into a new temp file created
// (O_CREAT|O_EXCL|O_NOFOLLOW) in the target's parent directory, reached by the
// race-free walk (resolve.ts, parents created one at a time through their
// parent's descriptor), then renamed over the name inside that same
// directory. rename() replaces the directory entry and never follows a
// symlink or writes through a hard link, so whatever a command swaps in at
// the name meanwhile, no byte lands outside the workspace; a reader never
// sees a half-written file and a failed upload leaves nothing behind.
// Uploads are capped at limits.maxFileBytes (413).

import { randomBytes } from "node:crypto";
import { constants, createWriteStream } from "node:fs";
import { lstat, open, rename, unlink } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { ComputerError } from "../../wire/errors.js";
import { sendJson } from "../http/errors.js";
import { at, type Entry, fsError, shown } from "./resolve.js";

const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = constants;

export async function receiveFile(
  entry: Entry,
  req: IncomingMessage,
  res: ServerResponse,
  limit: number,
  /** Hands the new file to the sandbox's uid before it takes the name (see ServerDeps.adopt). */
  adopt?: (path: string) => Promise<void>,
): Promise<void> {
  const name = entry.name;
  const rel = shown(entry.segs);
  if (name === undefined) throw new ComputerError("EINVAL", "a file path is required");
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) {
    throw new ComputerError("ETOOLARGE", `file larger than ${limit} bytes`);
  }
  const existing = await lstat(at(entry.parent, name)).catch(() => undefined);
  if (existing?.isDirectory()) {
    throw new ComputerError("EISDIR", `${rel} is a directory`, { status: 409 });
  }
  const tmpName = `.${name}.${randomBytes(6).toString("hex")}.upload`.slice(-255);
  const fh = await open(
    at(entry.parent, tmpName),
    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW,
    0o644,
  ).catch((err) => {
    throw fsError(err, rel);
  });
  let size = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      size += chunk.length;
      if (size > limit) cb(new ComputerError("ETOOLARGE", `file larger than ${limit} bytes`));
      else cb(null, chunk);
    },
  });
  try {
    await pipeline(req, counter, createWriteStream("", { fd: fh, autoClose: true }));
    await adopt?.(at(entry.parent, tmpName));
    await rename(at(entry.parent, tmpName), at(entry.parent, name));
  } catch (err) {
    await fh.close().catch(() => {});
    await unlink(at(entry.parent, tmpName)).catch(() => {});
    if (err instanceof ComputerError) throw err;
    if ((err as { code?: string }).code === "ERR_STREAM_PREMATURE_CLOSE") {
      throw new ComputerError("EINVAL", "upload aborted");
    }
    throw fsError(err, rel);
  }
  sendJson(res, existing ? 200 : 201, { path: entry.segs.join("/"), size });
}
