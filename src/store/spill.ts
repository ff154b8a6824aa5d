// Disk retention behind the memory log's ring. Events the ring evicts are
// appended to per-execution segment files instead of being dropped, so a
// client that was cut off while a command wrote fast can still resume from
// where it stopped. Memory stays bounded (the ring, plus a sparse index of one
// entry per 64 KiB spilled); disk is bounded per execution (`spillMaxBytes`)
// and for the whole log (`spillTotalBytes`): past either, whole segments are
// dropped oldest first, and only then does a reader get ELOG_TRUNCATED.
//
// Shape: one SpillStore per log owns a private directory (created on first
// use, removed on close, and swept at start if a crashed process left one),
// and the running total; one ExecSpill per execution owns its segments. The
// spilled events of an execution are always the contiguous run just before
// its ring, so a reader moves from disk to memory without a gap. Writes are
// synchronous appends to the page cache (one writev per evicted batch, so
// the order is the append order without any queue); reads are asynchronous
// and open the segment themselves, so dropping a segment under a reader is
// safe (the reader keeps the unlinked file until it closes it).

import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  rmSync,
  unlinkSync,
  writevSync,
} from "node:fs";
import { open } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { LoggedEvent } from "../wire/types.js";
import {
  decodeSpilled,
  encodeSpilled,
  framedLength,
  framedSeq,
  HEADER_BYTES,
} from "./spill-codec.js";

/** Default disk retained per execution beyond its ring: 1 GiB. */
export const DEFAULT_SPILL_MAX_BYTES = 1024 * 1024 * 1024;
/** Default disk retained by one log for all executions together: 8 GiB. */
export const DEFAULT_SPILL_TOTAL_BYTES = 8 * 1024 * 1024 * 1024;
const DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024;
/** One index entry per this many spilled bytes (a reader scans at most this far). */
const INDEX_EVERY_BYTES = 64 * 1024;
/** A read from disk returns at most about this many payload bytes. */
const READ_BYTES = 1024 * 1024;
const DIR_PREFIX = "agent-computer-spill-";

export interface SpillOptions {
  /** Parent directory of the log's spill directory (default: the OS temp directory). */
  spillDir?: string;
  /** Disk bytes retained per execution beyond the ring (default 1 GiB; 0 turns spilling off). */
  spillMaxBytes?: number;
  /** Disk bytes retained by the whole log (default 8 GiB). */
  spillTotalBytes?: number;
  /** Size at which a segment file is closed and the next one started (default 8 MiB). */
  spillSegmentBytes?: number;
}

interface Segment {
  file: string;
  fd: number | undefined;
  firstSeq: number;
  bytes: number;
  /** Pairs (seq, offset) of events a reader may start scanning at, ascending. */
  index: number[];
  lastIndexed: number;
}

const liveDirs = new Set<string>();
let exitHookInstalled = false;

export class SpillStore {
  readonly maxBytes: number;
  readonly totalBytes: number;
  private readonly segmentBytes: number;
  private readonly parent: string;
  private dir: string | undefined;
  private total = 0;
  private files = 0;
  private readonly spills = new Set<ExecSpill>();

  constructor(options: SpillOptions = {}) {
    this.maxBytes = Math.max(0, options.spillMaxBytes ?? DEFAULT_SPILL_MAX_BYTES);
    this.totalBytes = Math.max(0, options.spillTotalBytes ?? DEFAULT_SPILL_TOTAL_BYTES);
    this.segmentBytes = Math.max(
      4096,
      Math.min(options.spillSegmentBytes ?? DEFAULT_SEGMENT_BYTES, Math.floor(this.maxBytes / 4)),
    );
    this.parent = options.spillDir ?? tmpdir();
  }

  get enabled(): boolean {
    return this.maxBytes > 0 && this.totalBytes > 0;
  }

  /** Bytes on disk now, all executions together. */
  get usedBytes(): number {
    return this.total;
  }

  /** The spill of one execution (nothing touches the disk until it is written to). */
  open(id: string): ExecSpill {
    const s = new ExecSpill(this, id);
    this.spills.add(s);
    return s;
  }

  /** Remove every segment and the directory. */
  close(): void {
    for (const s of [...this.spills]) s.dispose();
    if (this.dir) {
      rmSync(this.dir, { recursive: true, force: true });
      liveDirs.delete(this.dir);
      this.dir = undefined;
    }
  }

  /** @internal */
  newSegmentFile(): string {
    if (!this.dir) {
      mkdirSync(this.parent, { recursive: true });
      sweepStaleDirs(this.parent);
      this.dir = mkdtempSync(path.join(this.parent, `${DIR_PREFIX}${process.pid}-`));
      liveDirs.add(this.dir);
      installExitHook();
    }
    return path.join(this.dir, `${++this.files}.seg`);
  }

  /** @internal */
  segmentLimit(): number {
    return this.segmentBytes;
  }

  /** @internal */
  grew(by: number, writer: ExecSpill): void {
    this.total += by;
    // Over the total: take whole segments from the largest spill (the writer
    // itself when it is the largest) until the disk fits again.
    while (this.total > this.totalBytes) {
      let victim = writer;
      for (const s of this.spills) if (s.bytes > victim.bytes) victim = s;
      if (victim.bytes === 0) break;
      victim.dropOldest();
    }
  }

  /** @internal */
  shrank(by: number): void {
    this.total -= by;
  }

  /** @internal */
  forget(s: ExecSpill): void {
    this.spills.delete(s);
  }
}

export class ExecSpill {
  private segments: Segment[] = [];
  /** Bytes on disk for this execution. */
  bytes = 0;

  constructor(
    private readonly store: SpillStore,
    private readonly id: string,
  ) {}

  /** Seq of the oldest spilled event, or undefined when nothing is on disk. */
  get firstSeq(): number | undefined {
    return this.segments[0]?.firstSeq;
  }

  /**
   * Append events the ring evicted (contiguous, continuing what is on disk).
   * Returns false when the disk refused them: the caller drops them, and
   * everything spilled before them is dropped too (no gap may open).
   */
  write(events: LoggedEvent[]): boolean {
    if (events.length === 0) return true;
    try {
      let i = 0;
      while (i < events.length) {
        let seg = this.segments[this.segments.length - 1];
        if (!seg || seg.bytes >= this.store.segmentLimit()) seg = this.roll(events[i]!.seq);
        const buffers: Buffer[] = [];
        let size = 0;
        const start = seg.bytes;
        for (; i < events.length && seg.bytes + size < this.store.segmentLimit(); i++) {
          const ev = events[i]!;
          if (start + size - seg.lastIndexed >= INDEX_EVERY_BYTES) {
            seg.index.push(ev.seq, start + size);
            seg.lastIndexed = start + size;
          }
          const [h, p] = encodeSpilled(ev);
          buffers.push(h, p);
          size += h.byteLength + p.byteLength;
        }
        const written = writevSync(seg.fd!, buffers);
        if (written !== size)
          throw new Error(`short write to spill segment (${written} of ${size})`);
        seg.bytes += size;
        this.bytes += size;
        this.store.grew(size, this);
      }
      while (this.bytes > this.store.maxBytes && this.segments.length > 0) this.dropOldest();
      return true;
    } catch {
      this.dispose();
      return false;
    }
  }

  /**
   * Up to `limit` events with seq > after, from disk. Empty when `after + 1`
   * is no longer on disk (dropped meanwhile): the caller looks again.
   */
  async read(after: number, limit: number): Promise<LoggedEvent[]> {
    const want = after + 1;
    let k = this.segments.length - 1;
    while (k >= 0 && this.segments[k]!.firstSeq > want) k--;
    const seg = this.segments[k];
    if (!seg) return [];
    const end = seg.bytes;
    let offset = 0;
    for (let j = 0; j < seg.index.length && seg.index[j]! <= want; j += 2) {
      offset = seg.index[j + 1]!;
    }
    let fh: Awaited<ReturnType<typeof open>>;
    try {
      fh = await open(seg.file, "r");
    } catch {
      return [];
    }
    const out: LoggedEvent[] = [];
    try {
      let buf = Buffer.alloc(0);
      /** File offset of buf[0]. */
      let bufAt = offset;
      let pos = 0;
      let payload = 0;
      while (out.length < limit && payload < READ_BYTES) {
        const at = bufAt + pos;
        if (at >= end) break;
        let len = framedLength(buf, pos);
        if (len < 0) {
          // Refill: keep the partial frame and read at least one whole frame more.
          const have = buf.byteLength - pos;
          const needed = have >= HEADER_BYTES ? HEADER_BYTES + buf.readUInt32LE(pos) : HEADER_BYTES;
          if (needed > end - at) break; // a torn frame at the end: nothing more to read
          const chunk = Buffer.allocUnsafe(Math.min(Math.max(READ_BYTES, needed), end - at));
          buf.copy(chunk, 0, pos);
          const { bytesRead } = await fh.read(chunk, have, chunk.byteLength - have, at + have);
          if (bytesRead === 0) break;
          buf = chunk.subarray(0, have + bytesRead);
          bufAt = at;
          pos = 0;
          len = framedLength(buf, pos);
          if (len < 0) continue;
        }
        if (framedSeq(buf, pos) >= want) {
          out.push(decodeSpilled(this.id, buf, pos));
          payload += len;
        }
        pos += len;
      }
    } finally {
      await fh.close();
    }
    return out;
  }

  /** Drop the oldest segment (the budget is exceeded). */
  dropOldest(): void {
    const seg = this.segments.shift();
    if (!seg) return;
    this.remove(seg);
  }

  /** Remove all segments of this execution. */
  dispose(): void {
    for (const seg of this.segments) this.remove(seg);
    this.segments = [];
    this.store.forget(this);
  }

  private roll(firstSeq: number): Segment {
    const last = this.segments[this.segments.length - 1];
    if (last?.fd !== undefined) {
      closeSync(last.fd);
      last.fd = undefined;
    }
    const file = this.store.newSegmentFile();
    const seg: Segment = {
      file,
      fd: openSync(file, "a"),
      firstSeq,
      bytes: 0,
      index: [firstSeq, 0],
      lastIndexed: 0,
    };
    this.segments.push(seg);
    return seg;
  }

  private remove(seg: Segment): void {
    if (seg.fd !== undefined) {
      try {
        closeSync(seg.fd);
      } catch {}
      seg.fd = undefined;
    }
    try {
      unlinkSync(seg.file);
    } catch {}
    this.bytes -= seg.bytes;
    this.store.shrank(seg.bytes);
  }
}

/** Remove spill directories left by processes that no longer run (a crash or kill -9). */
function sweepStaleDirs(parent: string): void {
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(DIR_PREFIX)) continue;
    const pid = Number(name.slice(DIR_PREFIX.length).split("-")[0]);
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid || alive(pid)) continue;
    rmSync(path.join(parent, name), { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** A process that exits without closing its logs still leaves no segments behind. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => {
    for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
  });
}
