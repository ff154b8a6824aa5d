// The bytes of one execution's output events in the memory log, copied into
// a few large segments instead of keeping every pipe chunk's own ArrayBuffer.
//
// Why: a pipe read hands the runtime a fresh ArrayBuffer per chunk (up to
// 64 KiB). Kept in the log until the ring evicts it, every chunk outlived the
// young generation, was promoted, and could only be freed by a full (mark-
// compact) collection: ~15 full GCs per 512 MiB of output. Copied in here the
// chunk dies young (a cheap scavenge frees it), and the log's long-lived
// memory is a handful of segments that are reused: an evicted segment goes
// back to a pool shared by the log's executions and is overwritten by the
// next output, so 1 GiB through a 16 MiB ring allocates ~16 MiB of long-lived
// buffers, not 1 GiB.
//
// Addressing: the execution's output bytes form one logical stream; an event
// is (offset, length) into it and may span two segments. Segments grow with
// the output (1 KiB doubling to 256 KiB), so a command printing a few bytes
// holds a few bytes' worth, not a whole segment; a finished execution's last
// segment is trimmed to its used length.
//
// Readers never see bytes overwritten under them. `copyOut` copies into the
// caller's buffer (the memory log gives each read() one fresh buffer for the
// whole batch). `views` is for the spill to disk, whose writes are queued: the
// memory log calls `release` for those bytes only once the write is done, and
// a segment is given back to the pool only by `release` or `dispose` (after
// which the execution's spill is gone too).

/** Largest segment, and the only size that is pooled and reused. */
export const SEGMENT_BYTES = 256 * 1024;
const MIN_SEGMENT_BYTES = 1024;

/** Free full-size segments shared by every execution of one log, bounded. */
export class SegmentPool {
  private readonly free: Uint8Array[] = [];
  /** Full-size segments ever allocated (for tests and metrics: reuse keeps it flat). */
  allocated = 0;

  constructor(private readonly maxFree = 64) {}

  take(): Uint8Array {
    const seg = this.free.pop();
    if (seg) return seg;
    this.allocated++;
    return new Uint8Array(SEGMENT_BYTES);
  }

  give(seg: Uint8Array): void {
    if (seg.byteLength === SEGMENT_BYTES && this.free.length < this.maxFree) this.free.push(seg);
  }

  /** Segments waiting for reuse (for tests). */
  get size(): number {
    return this.free.length;
  }
}

export class OutputRing {
  private segs: Uint8Array[] = [];
  /** Logical offset of byte 0 of each segment. */
  private starts: number[] = [];
  /** Bytes used in the last segment. */
  private fill = 0;
  /** Logical offset of the next byte written (all bytes ever written). */
  private end = 0;

  constructor(private readonly pool: SegmentPool) {}

  /** Copies `v` in; returns its logical offset. */
  put(v: Uint8Array): number {
    const at = this.end;
    let src = 0;
    while (src < v.byteLength) {
      let last = this.segs[this.segs.length - 1];
      if (!last || this.fill === last.byteLength) last = this.grow(v.byteLength - src);
      const n = Math.min(last.byteLength - this.fill, v.byteLength - src);
      last.set(src === 0 && n === v.byteLength ? v : v.subarray(src, src + n), this.fill);
      this.fill += n;
      src += n;
      this.end += n;
    }
    return at;
  }

  /** Copies `len` bytes at logical offset `at` into `dst` at `dstOffset`. */
  copyOut(at: number, len: number, dst: Uint8Array, dstOffset: number): void {
    let k = this.find(at);
    let off = at - this.starts[k]!;
    let done = 0;
    while (done < len) {
      const seg = this.segs[k]!;
      const n = Math.min(seg.byteLength - off, len - done);
      dst.set(seg.subarray(off, off + n), dstOffset + done);
      done += n;
      k++;
      off = 0;
    }
  }

  /**
   * The bytes at `at` as views of the segments they lie in (one, or more when
   * they span segments): no copy. Valid until a `release` past them (the
   * spill's queued write).
   */
  views(at: number, len: number): Uint8Array[] {
    let k = this.find(at);
    let off = at - this.starts[k]!;
    const out: Uint8Array[] = [];
    let done = 0;
    while (done < len) {
      const seg = this.segs[k]!;
      const n = Math.min(seg.byteLength - off, len - done);
      out.push(seg.subarray(off, off + n));
      done += n;
      k++;
      off = 0;
    }
    return out;
  }

  /** No byte before logical offset `upTo` is needed any more: free whole segments before it. */
  release(upTo: number): void {
    let n = 0;
    // The last segment is kept: it is being written.
    while (n < this.segs.length - 1 && this.starts[n]! + this.segs[n]!.byteLength <= upTo) n++;
    if (n === 0) return;
    for (let i = 0; i < n; i++) this.pool.give(this.segs[i]!);
    this.segs.splice(0, n);
    this.starts.splice(0, n);
  }

  /** Nothing more will be written: shrink the last segment to its used bytes. */
  trim(): void {
    const k = this.segs.length - 1;
    const last = this.segs[k];
    if (!last || this.fill === last.byteLength) return;
    this.segs[k] = last.slice(0, this.fill);
    // The trimmed segment is full: a later put (none is expected) grows a new
    // one. The old one is not given back to the pool: a spill write queued
    // before the trim may still be reading a view of it.
  }

  /** Give every segment back to the pool. */
  dispose(): void {
    for (const seg of this.segs) this.pool.give(seg);
    this.segs = [];
    this.starts = [];
    this.fill = 0;
  }

  /** Bytes held in segments now (for tests and metrics). */
  get heldBytes(): number {
    let n = 0;
    for (const seg of this.segs) n += seg.byteLength;
    return n;
  }

  private grow(need: number): Uint8Array {
    let size = MIN_SEGMENT_BYTES;
    const want = Math.max(need, this.end);
    while (size < want && size < SEGMENT_BYTES) size *= 2;
    const seg = size === SEGMENT_BYTES ? this.pool.take() : new Uint8Array(size);
    this.segs.push(seg);
    this.starts.push(this.end);
    this.fill = 0;
    return seg;
  }

  /** Index of the segment holding logical offset `at` (searched from the newest: reads are mostly recent). */
  private find(at: number): number {
    let k = this.segs.length - 1;
    while (k > 0 && this.starts[k]! > at) k--;
    return k;
  }
}
