// result(): wait for an execution's exit and return its output. It reads the
// log like any subscriber (so it also works for executions on other nodes or
// from before a restart), keeps at most `maxBytes` of each stream, and keeps
// the LAST bytes: summaries and errors are at the end. When the log already
// dropped the beginning, it carries on from the earliest retained event and
// says `truncated`.

import type { ExecRecord } from "../store/types.js";
import { type ComputerError, hasCode } from "../wire/errors.js";
import type { Chunk, ExecEvent, LoggedEvent } from "../wire/types.js";
import type { EventsOptions, ExecResult } from "./types.js";

/** What result() needs from the computer. */
export interface ResultSource {
  events(id: string, options: EventsOptions): ReadableStream<ExecEvent>;
  info(id: string): Promise<ExecRecord>;
}

export async function collectResult(
  source: ResultSource,
  id: string,
  maxBytes: number,
  options: { signal?: AbortSignal } = {},
): Promise<ExecResult> {
  const rec0 = await source.info(id);
  const text = rec0.encoding === "utf8";
  const out = { stdout: new TailBuffer(maxBytes, text), stderr: new TailBuffer(maxBytes, text) };
  let truncated = false;
  let after = 0;
  let exit: LoggedEvent | undefined;
  for (;;) {
    const stream = source.events(id, { after, heartbeats: false, signal: options.signal });
    const reader = stream.getReader();
    try {
      for (;;) {
        const { value: ev, done } = await reader.read();
        if (done) break;
        after = ev.seq;
        if (ev.name === "exit") exit = ev;
        else if (ev.name === "stdout" || ev.name === "stderr") out[ev.name].push(ev.value);
      }
      break;
    } catch (err) {
      // Part of the log was dropped before we read it: keep what is left and say so.
      if (hasCode(err, "ELOG_TRUNCATED")) {
        truncated = true;
        after = (err as ComputerError).earliestSeq! - 1;
        continue;
      }
      throw err;
    }
  }
  const rec = await source.info(id);
  const res: ExecResult = {
    id,
    status: rec.state,
    exitCode: exit && exit.name === "exit" && exit.reason !== "lost" ? exit.value : null,
    stdout: out.stdout.value(),
    stderr: out.stderr.value(),
    truncated: truncated || out.stdout.truncated || out.stderr.truncated,
  };
  const signal = exit?.name === "exit" ? exit.signal : rec.signal;
  if (signal) res.signal = signal;
  return res;
}

/** Keeps the last `max` bytes of a stream of chunks (bytes or text). */
class TailBuffer {
  private chunks: Chunk[] = [];
  private sizes: number[] = [];
  private bytes = 0;
  truncated = false;
  constructor(
    private readonly max: number,
    private readonly text: boolean,
  ) {}
  push(v: Chunk): void {
    const size = typeof v === "string" ? Buffer.byteLength(v) : v.byteLength;
    this.chunks.push(v);
    this.sizes.push(size);
    this.bytes += size;
    while (this.bytes - this.sizes[0]! >= this.max && this.chunks.length > 1) {
      const dropped = this.sizes.shift()!;
      this.bytes -= dropped;
      this.chunks.shift();
      if (dropped > 0) this.truncated = true; // an empty chunk leaves nothing out
    }
  }
  value(): Chunk {
    let buf = Buffer.concat(
      this.chunks.map((c) =>
        typeof c === "string" ? Buffer.from(c) : Buffer.from(c.buffer, c.byteOffset, c.byteLength),
      ),
    );
    if (buf.length > this.max) {
      buf = buf.subarray(buf.length - this.max);
      this.truncated = true;
      if (this.text) {
        // Do not start in the middle of a character.
        let i = 0;
        while (i < buf.length && (buf[i]! & 0xc0) === 0x80) i++;
        buf = buf.subarray(i);
      }
    }
    if (this.text) return buf.toString("utf8");
    return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  }
}
