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
// its ring, so a reader moves from disk to memory without a gap.
//
// Writes are asynchronous (libuv's thread pool), off the event loop: a
// synchronous write of every evicted byte cost the loop most of its time on
// a fast command (measured: writev alone took ~40% of the loop's time for
// 1 GiB of output). Each write has its place in the file when it is queued
// (positional writes; a queue per execution with one write in flight,
// queued batches coalesced into one writev), so the file's layout is decided
// at once and only the bytes arrive later. The caller's buffers (views of the
// ring's segments) must stay untouched until the write is done: `write` takes
// a `done` callback, called in queue order once the bytes are in the file (or
// will never be needed), and the memory log gives the ring's segments back
// only then. What is queued but not written is the backlog; the memory log
// stops accepting appends while it is above SPILL_BACKLOG_BYTES (the runtime
// then pauses the pipes), so a disk slower than the command bounds memory
// instead of growing it. A read first waits until everything queued before it
// is written, so it never sees a hole. A segment's descriptor is closed only
// once no write on it is in flight (a closed and reused descriptor would
// receive another file's bytes).
//
// Reads are asynchronous and open the segment themselves, so dropping a
// segment under a reader is safe (the reader keeps the unlinked file until it
// closes it).

import {
  close,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  rmSync,
  unlink,
  writev,
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
/** Bytes queued for disk but not written, per execution, above which the log stops accepting appends. */
export const SPILL_BACKLOG_BYTES = 16 * 1024 * 1024;
/** Buffers in one writev (the kernel's IOV_MAX is 1024). */
const MAX_IOV = 1024;
/**
 * A write starts once this much is queued, or WRITE_DELAY_MS after the first
 * queued byte, or at once when someone waits for it: one writev per pipe
 * chunk cost the loop ~40 µs each in handing it to the thread pool.
 */
const WRITE_BATCH_BYTES = 1024 * 1024;
const WRITE_DELAY_MS = 5;

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
  /** Writes queued or in flight on `fd`. */
  writes: number;
  /** No more writes will be queued (rolled over or removed): close `fd` once `writes` is 0. */
  sealed: boolean;
}

/** One queued write: `buffers` at `position` of `seg`. */
interface QueuedWrite {
  seg: Segment;
  position: number;
  buffers: Buffer[];
  size: number;
  /** Told once the callers' buffers are no longer needed (in queue order). */
  dones: (() => void)[];
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
  /** Bytes on disk for this execution (written or queued). */
  bytes = 0;
  private readonly queue: QueuedWrite[] = [];
  private writing = false;
  /** Bytes of the write in flight. */
  private inFlight = 0;
  /** Starts a write of a queue smaller than WRITE_BATCH_BYTES. */
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** `done` callbacks of the write in flight (its queue entries are gone already). */
  private afterInFlight: (() => void)[] = [];
  /** Bytes ever queued, and ever written (or given up): the backlog is the difference. */
  private queuedTotal = 0;
  private writtenTotal = 0;
  /** Waiting until `writtenTotal` reaches `until`. */
  private waiters: { until: number; resolve: () => void }[] = [];
  /** The disk refused a write: nothing more is taken. */
  private failed = false;

  constructor(
    private readonly store: SpillStore,
    private readonly id: string,
  ) {}

  /** Seq of the oldest spilled event, or undefined when nothing is on disk. */
  get firstSeq(): number | undefined {
    return this.segments[0]?.firstSeq;
  }

  /** Bytes queued for disk and not written yet. */
  get backlog(): number {
    return this.queuedTotal - this.writtenTotal;
  }

  /**
   * Queue events the ring evicted (contiguous, continuing what is on disk)
   * for writing; their buffers are written from where they are, not copied. `done` is called once their buffers are no longer needed
   * (in queue order; at once when nothing had to be written). Returns false,
   * without taking them, when the disk refused: the caller drops them, and
   * everything spilled before them is dropped too (no gap may open).
   */
  write(
    events: LoggedEvent[],
    done?: () => void,
    /** A byte event's payload as parts (encodeSpilled), by index in `events`. */
    parts?: readonly (readonly Uint8Array[] | undefined)[],
  ): boolean {
    if (this.failed) return false;
    if (events.length === 0) {
      this.enqueueDone(done);
      return true;
    }
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
          for (const b of encodeSpilled(ev, parts?.[i])) {
            buffers.push(b);
            size += b.byteLength;
          }
        }
        seg.bytes += size;
        seg.writes++;
        this.queue.push({ seg, position: start, buffers, size, dones: [] });
        this.queuedTotal += size;
        this.bytes += size;
        this.store.grew(size, this);
      }
      this.enqueueDone(done);
      while (this.bytes > this.store.maxBytes && this.segments.length > 0) this.dropOldest();
    } catch {
      this.fail();
      return false;
    }
    this.schedule();
    return true;
  }

  /** Resolves once everything queued so far, but `leave` bytes, is written (or given up). */
  settled(leave = 0): Promise<void> {
    const until = this.queuedTotal - leave;
    if (this.writtenTotal >= until) return Promise.resolve();
    const p = new Promise<void>((resolve) => this.waiters.push({ until, resolve }));
    this.schedule();
    return p;
  }

  /**
   * Up to `limit` events with seq > after, from disk. Empty when `after + 1`
   * is no longer on disk (dropped meanwhile): the caller looks again.
   */
  async read(after: number, limit: number): Promise<LoggedEvent[]> {
    // What was queued before this read is in the file before it looks.
    await this.settled();
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

  /** Remove all segments of this execution; queued writes are given up. */
  dispose(): void {
    for (const seg of this.segments) this.remove(seg);
    this.segments = [];
    this.store.forget(this);
    this.giveUp();
  }

  /** `done` runs after every write queued so far (at once when none is). */
  private enqueueDone(done: (() => void) | undefined): void {
    if (!done) return;
    const last = this.queue[this.queue.length - 1];
    if (last) {
      last.dones.push(done);
    } else if (this.writing) {
      this.afterInFlight.push(done);
    } else {
      done();
    }
  }

  /** Start a write now if enough is queued or someone waits, else within WRITE_DELAY_MS. */
  private schedule(): void {
    if (this.writing || this.queue.length === 0) return;
    const queued = this.queuedTotal - this.writtenTotal - this.inFlight;
    if (queued >= WRITE_BATCH_BYTES || this.waiters.length > 0) {
      this.kick();
      return;
    }
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.kick();
    }, WRITE_DELAY_MS);
    this.timer.unref?.();
  }

  /** Start the next write: the queued batches that continue each other in one segment, as one writev. */
  private kick(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (this.writing || this.queue.length === 0) return;
    const first = this.queue.shift()!;
    const { seg, position } = first;
    const buffers = first.buffers;
    let size = first.size;
    let writes = 1;
    const dones = first.dones;
    while (this.queue.length > 0) {
      const next = this.queue[0]!;
      if (next.seg !== seg || next.position !== position + size) break;
      if (buffers.length + next.buffers.length > MAX_IOV) break;
      this.queue.shift();
      for (const b of next.buffers) buffers.push(b);
      size += next.size;
      writes++;
      for (const d of next.dones) dones.push(d);
    }
    this.writing = true;
    this.inFlight = size;
    this.afterInFlight = dones;
    writev(seg.fd!, buffers, position, (err, written) => {
      this.writing = false;
      this.inFlight = 0;
      seg.writes -= writes;
      if (seg.sealed && seg.writes === 0) closeFd(seg);
      const ok = !err && written === size;
      this.written(size, this.afterInFlight);
      this.afterInFlight = [];
      if (!ok) this.fail();
      else this.schedule();
    });
  }

  /** `size` bytes are written (or given up): release their buffers, wake the waiters. */
  private written(size: number, dones: (() => void)[]): void {
    this.writtenTotal += size;
    for (const done of dones) done();
    if (this.waiters.length === 0) return;
    const still: typeof this.waiters = [];
    for (const w of this.waiters) {
      if (this.writtenTotal >= w.until) w.resolve();
      else still.push(w);
    }
    this.waiters = still;
  }

  /** The disk refused: drop everything, take nothing more. */
  private fail(): void {
    this.failed = true;
    this.dispose();
  }

  /** Queued writes will not happen: their buffers are free, nobody waits for them. */
  private giveUp(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    const queued = this.queue.splice(0);
    let size = 0;
    const dones: (() => void)[] = [];
    for (const q of queued) {
      size += q.size;
      q.seg.writes--;
      if (q.seg.sealed && q.seg.writes === 0) closeFd(q.seg);
      for (const d of q.dones) dones.push(d);
    }
    // The write in flight finishes on its own (its segment's descriptor is
    // closed then, and its bytes counted); its buffers may be reused
    // meanwhile: its file is gone.
    const inFlight = this.afterInFlight.splice(0);
    this.written(size, [...inFlight, ...dones]);
  }

  private roll(firstSeq: number): Segment {
    const last = this.segments[this.segments.length - 1];
    if (last) seal(last);
    const file = this.store.newSegmentFile();
    const seg: Segment = {
      file,
      fd: openSync(file, "w"),
      firstSeq,
      bytes: 0,
      index: [firstSeq, 0],
      lastIndexed: 0,
      writes: 0,
      sealed: false,
    };
    this.segments.push(seg);
    return seg;
  }

  private remove(seg: Segment): void {
    seal(seg);
    // Off the loop: the segment is out of the list already, so no reader opens it from now on.
    unlink(seg.file, () => {});
    this.bytes -= seg.bytes;
    this.store.shrank(seg.bytes);
  }
}

/** No more writes will be queued on `seg`: close its descriptor now, or once its writes are done. */
function seal(seg: Segment): void {
  seg.sealed = true;
  if (seg.writes === 0) closeFd(seg);
}

function closeFd(seg: Segment): void {
  if (seg.fd === undefined) return;
  const fd = seg.fd;
  seg.fd = undefined;
  close(fd, () => {});
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
