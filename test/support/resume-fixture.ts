// The shared setup of the lossless-resume tests (one per transport): a server
// whose log ring holds the whole stream, a 50 MiB file of random bytes in its
// workspace with its SHA-256, and a command that writes the file paced (1 MiB
// every 20 ms) after one byte of stdin. The ring is larger than the stream
// because the command keeps writing while a client is cut off and every byte
// must still be there when it resumes (the bounded-ring case has its own
// ELOG_TRUNCATED tests). The pacing makes the cuts fall while the command is
// still running, so resumes switch from replayed log to live output instead of
// replaying a finished execution. The stdin byte lets the test subscribe first.

import { createHash, randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { type Harness, startServer } from "./server-harness.js";

export const RESUME_STREAM_BYTES = 50 * 1024 * 1024;

/** Starts after one byte of stdin; writes the file in 1 MiB steps, 20 ms apart. */
export const PACED_STREAM_COMMAND =
  "head -c 1 >/dev/null; for i in $(seq 0 49); do dd if=stream.bin bs=1048576 skip=$i count=1 status=none; sleep 0.02; done";

export interface ResumeFixture {
  h: Harness;
  /** SHA-256 (hex) of the bytes PACED_STREAM_COMMAND writes. */
  expectedSha256: string;
}

export async function startResumeFixture(): Promise<ResumeFixture> {
  const h = await startServer({ computer: { logMaxBytes: 256 * 1024 * 1024 } });
  const data = randomBytes(RESUME_STREAM_BYTES);
  await writeFile(path.join(h.workspace, "stream.bin"), data);
  return { h, expectedSha256: createHash("sha256").update(data).digest("hex") };
}
