// Tests for the byte-level line splitter: framing rules, chunking
// independence (property tests), the line limit and linear buffering.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { excerptOf, LineSplitter, PendingBytes, WireLineError } from "./lines.js";

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { ignoreBOM: true });

function split(
  chunks: Uint8Array[],
  options?: ConstructorParameters<typeof LineSplitter>[1],
): [number, string][] {
  const out: [number, string][] = [];
  const s = new LineSplitter((line, n) => out.push([n, dec.decode(line)]), options);
  for (const c of chunks) s.push(c);
  s.end();
  return out;
}

function chunkAt(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const out: Uint8Array[] = [];
  let prev = 0;
  for (const p of points) {
    out.push(bytes.slice(prev, p));
    prev = p;
  }
  out.push(bytes.slice(prev));
  return out;
}

describe("LineSplitter", () => {
  it("splits on LF and numbers lines from 1, counting blank lines", () => {
    expect(split([enc.encode("a\n\nb\n")])).toEqual([
      [1, "a"],
      [2, ""],
      [3, "b"],
    ]);
  });

  it("strips one CR before LF (CRLF line ends), not more", () => {
    expect(split([enc.encode("a\r\nb\r\r\n")])).toEqual([
      [1, "a"],
      [2, "b\r"],
    ]);
  });

  it("handles CRLF split between chunks", () => {
    expect(split([enc.encode("a\r"), enc.encode("\nb")])).toEqual([
      [1, "a"],
      [2, "b"],
    ]);
  });

  it("delivers a final line without LF at end()", () => {
    expect(split([enc.encode("a\nlast")])).toEqual([
      [1, "a"],
      [2, "last"],
    ]);
    expect(split([enc.encode("a\n")])).toEqual([[1, "a"]]);
  });

  it("gives the same lines for every chunking (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: "binary" }), { maxLength: 20 }),
        fc.array(fc.nat(), { maxLength: 30 }),
        (lines, cuts) => {
          const text = lines.map((l) => l.replace(/[\r\n]/g, "")).join("\n");
          const bytes = enc.encode(text);
          expect(split(chunkAt(bytes, cuts))).toEqual(split([bytes]));
        },
      ),
      { numRuns: 300 },
    );
  });

  it("gives the same lines for every-single-byte chunking", () => {
    const bytes = enc.encode("héllo 🌍\r\n\nwörld\nend");
    const ones = Array.from(bytes, (b) => Uint8Array.of(b));
    expect(split(ones)).toEqual(split([bytes]));
  });

  it("does not keep views of the caller's chunks (caller may reuse buffers)", () => {
    const out: string[] = [];
    const s = new LineSplitter((l) => out.push(dec.decode(l)));
    const buf = enc.encode("abc");
    s.push(buf);
    buf.fill(0x7a); // caller reuses its buffer
    s.push(enc.encode("d\n"));
    expect(out).toEqual(["abcd"]);
  });

  it("throws ELIMIT with line number and excerpt for a line over maxLineBytes", () => {
    const s = new LineSplitter(() => {}, { maxLineBytes: 4 });
    s.push(enc.encode("ok\n"));
    let err: unknown;
    try {
      s.push(enc.encode("toolong"));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(WireLineError);
    expect((err as WireLineError).code).toBe("ELIMIT");
    expect((err as WireLineError).line).toBe(2);
    expect((err as WireLineError).excerpt).toBe("toolo");
  });

  it("allows a line of exactly maxLineBytes plus CRLF, in any chunking", () => {
    const bytes = enc.encode("abcd\r\nabcde\n");
    for (const chunks of [[bytes], Array.from(bytes, (b) => Uint8Array.of(b))]) {
      const errs: WireLineError[] = [];
      const lines = split(chunks, { maxLineBytes: 4, onTooLong: (e) => errs.push(e) });
      expect(lines).toEqual([[1, "abcd"]]);
      expect(errs.map((e) => [e.code, e.line, e.excerpt])).toEqual([["ELIMIT", 2, "abcde"]]);
    }
  });

  it("with onTooLong, discards the long line and continues with the next", () => {
    const errs: WireLineError[] = [];
    const chunks = [enc.encode("x".repeat(50)), enc.encode("x".repeat(50)), enc.encode("\nnext\n")];
    const lines = split(chunks, { maxLineBytes: 10, onTooLong: (e) => errs.push(e) });
    expect(lines).toEqual([[2, "next"]]);
    expect(errs).toHaveLength(1);
    expect(errs[0]!.line).toBe(1);
    expect(errs[0]!.excerpt).toBe("x".repeat(11));
  });

  it("bounds buffering: an endless line stops growing at maxLineBytes", () => {
    const s = new LineSplitter(() => {}, { maxLineBytes: 1000, onTooLong: () => {} });
    const chunk = new Uint8Array(100).fill(0x61);
    for (let i = 0; i < 1000; i++) s.push(chunk);
    expect(s.pendingBytes).toBe(0);
  });

  it("joins a huge line fed one byte at a time exactly", () => {
    const n = 200_000;
    const lines: Uint8Array[] = [];
    const s = new LineSplitter((l) => lines.push(l.slice()));
    const one = Uint8Array.of(0x62);
    for (let i = 0; i < n; i++) s.push(one);
    s.push(Uint8Array.of(0x0a));
    expect(lines).toHaveLength(1);
    expect(lines[0]!.length).toBe(n);
    expect(lines[0]!.every((b) => b === 0x62)).toBe(true);
  });
});

describe("PendingBytes", () => {
  it("joins appended pieces across segment boundaries", () => {
    const p = new PendingBytes();
    const big = new Uint8Array(70_000).map((_, i) => i & 0xff);
    p.append(big, 0, 40_000);
    p.append(big, 40_000, 70_000);
    expect(p.head(3)).toEqual(Uint8Array.of(0, 1, 2));
    const expected = new Uint8Array(70_001);
    expected.set(big);
    expected[70_000] = 9;
    const joined = p.take(Uint8Array.of(9, 9), 1, 2);
    expect(joined.length).toBe(expected.length);
    expect(joined.every((b, i) => b === expected[i])).toBe(true);
    expect(p.length).toBe(0);
  });
});

describe("excerptOf", () => {
  it("keeps at most 120 UTF-16 units and never splits a surrogate pair", () => {
    expect(excerptOf("a".repeat(200))).toHaveLength(120);
    const s = `${"a".repeat(119)}🌍tail`;
    expect(excerptOf(s)).toBe("a".repeat(119));
  });
});
