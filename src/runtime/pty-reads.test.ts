// ReadMerger: a terminal's full reads are held and merged, a short read (an
// echo) goes out at once with whatever is held, and nothing is lost or
// reordered (the bytes out are the bytes in).

import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { FULL_READ_BYTES, HOLD_MS, MAX_MERGED_BYTES, ReadMerger } from "./pty-reads.js";

const bytes = (n: number, fill: number) => Buffer.alloc(n, fill);

describe("ReadMerger", () => {
  let out: Buffer[];
  let merger: ReadMerger;
  beforeEach(() => {
    vi.useFakeTimers();
    out = [];
    merger = new ReadMerger((c) => out.push(c));
  });
  afterEach(() => vi.useRealTimers());

  it("hands a lone short read (a keystroke's echo) over at once", () => {
    merger.push(Buffer.from("a"));
    expect(out.map(String)).toEqual(["a"]);
  });

  it("holds full reads and sends them with the first short read, as one chunk", () => {
    merger.push(bytes(FULL_READ_BYTES, 1));
    merger.push(bytes(FULL_READ_BYTES, 2));
    expect(out).toEqual([]);
    merger.push(bytes(10, 3));
    expect(out).toHaveLength(1);
    expect(out[0]).toEqual(
      Buffer.concat([bytes(FULL_READ_BYTES, 1), bytes(FULL_READ_BYTES, 2), bytes(10, 3)]),
    );
  });

  it("sends what is held once it reaches the merge limit", () => {
    const n = Math.ceil(MAX_MERGED_BYTES / FULL_READ_BYTES);
    for (let i = 0; i < n - 1; i++) merger.push(bytes(FULL_READ_BYTES, i));
    expect(out).toEqual([]);
    merger.push(bytes(FULL_READ_BYTES, n));
    expect(out).toHaveLength(1);
    expect(out[0]!.length).toBe(n * FULL_READ_BYTES);
  });

  it("sends a burst that ended on a full read after HOLD_MS", () => {
    merger.push(bytes(FULL_READ_BYTES, 7));
    vi.advanceTimersByTime(HOLD_MS - 0.5);
    expect(out).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(out).toHaveLength(1);
    // Then idle again: a short read is not held.
    merger.push(Buffer.from("$ "));
    expect(out).toHaveLength(2);
  });

  it("flush() hands over what is held, once", () => {
    merger.push(bytes(FULL_READ_BYTES, 1));
    merger.flush();
    merger.flush();
    vi.runAllTimers();
    expect(out).toHaveLength(1);
  });

  it("keeps every byte in order whatever the read sizes", () => {
    const reads: Buffer[] = [];
    let seed = 1;
    for (let i = 0; i < 500; i++) {
      seed = (seed * 48271) % 2147483647;
      const len = seed % 3 === 0 ? (seed % FULL_READ_BYTES) + 1 : FULL_READ_BYTES;
      reads.push(bytes(len, i % 251));
      merger.push(reads[i]!);
      if (seed % 17 === 0) vi.advanceTimersByTime(HOLD_MS);
    }
    merger.flush();
    expect(Buffer.concat(out).equals(Buffer.concat(reads))).toBe(true);
    expect(out.every((c) => c.length <= MAX_MERGED_BYTES + FULL_READ_BYTES)).toBe(true);
  });
});
