// The memory log's output segments: bytes come back exactly as written across
// segment boundaries, evicted segments are reused instead of reallocated, and
// what a reader copied out is never changed by later output reusing them.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { OutputRing, SEGMENT_BYTES, SegmentPool } from "./output-ring.js";

/** n bytes that differ from chunk to chunk and along the chunk (a mix-up shows). */
function bytes(n: number, seed: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i += 251) b[i] = seed & 0xff;
  for (let i = 1; i < n; i += 97) b[i] = (seed + i) & 0xff;
  return b;
}

describe("OutputRing", () => {
  it("returns every chunk byte-exact, across segment boundaries and releases (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 100_000 }), { minLength: 1, maxLength: 24 }),
        fc.integer({ min: 0, max: 23 }),
        (sizes, keepFrom) => {
          const pool = new SegmentPool();
          const ring = new OutputRing(pool);
          const chunks = sizes.map((n, i) => ({ at: 0, v: bytes(n, i) }));
          for (const c of chunks) c.at = ring.put(c.v);
          const from = Math.min(keepFrom, chunks.length - 1);
          ring.release(chunks[from]!.at);
          for (const c of chunks.slice(from)) {
            const out = new Uint8Array(c.v.byteLength + 2);
            ring.copyOut(c.at, c.v.byteLength, out, 1);
            // Buffer#equals: vitest's deep equality is far too slow for 100 KiB arrays.
            expect(Buffer.from(out.subarray(1, -1)).equals(c.v)).toBe(true);
            expect(Buffer.concat(ring.views(c.at, c.v.byteLength)).equals(c.v)).toBe(true);
          }
        },
      ),
      { numRuns: 50 },
    );
  });

  it("reuses evicted segments: 64 MiB through a 1 MiB window allocates about the window", () => {
    const pool = new SegmentPool();
    const ring = new OutputRing(pool);
    const chunk = bytes(65_536, 7);
    const offsets: number[] = [];
    for (let i = 0; i < 1024; i++) {
      offsets.push(ring.put(chunk));
      if (offsets.length > 16) ring.release(offsets[offsets.length - 16]!);
    }
    expect(pool.allocated).toBeLessThanOrEqual((2 * 1024 * 1024) / SEGMENT_BYTES);
    expect(ring.heldBytes).toBeLessThanOrEqual(1024 * 1024 + 2 * SEGMENT_BYTES);
  });

  it("grows small segments for small output and trims the last one", () => {
    const ring = new OutputRing(new SegmentPool());
    ring.put(bytes(3, 1));
    expect(ring.heldBytes).toBe(1024);
    ring.trim();
    expect(ring.heldBytes).toBe(3);
    const out = new Uint8Array(3);
    ring.copyOut(0, 3, out, 0);
    expect(out).toEqual(bytes(3, 1));
  });
});
