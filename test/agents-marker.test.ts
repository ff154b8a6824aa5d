// The bash tool's command boundary: however the shell's output is cut into
// events (a marker split across two reads, output that ends like the start
// of a marker), the scanner emits exactly the bytes before the marker, with
// their true (seq, offset), parses the status line, and keeps what follows.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MarkerScanner } from "../src/agents/bash.js";

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

describe("bash command boundaries", () => {
  it("finds the marker under any chunking and keeps exact positions", () => {
    const sentinel = "\n__ac_abc_7 ";
    // Output built from pieces that look like parts of the marker.
    const piece = fc.constantFrom("\n", "_", "__ac_", "__ac_abc_", "__ac_abc_6 ", "x", "é", "7 ");
    fc.assert(
      fc.property(
        fc.array(piece, { maxLength: 30 }),
        fc.integer({ min: 0, max: 255 }),
        fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 40 }),
        (parts, code, cuts) => {
          const output = parts.join("");
          fc.pre(!output.includes(sentinel)); // the real marker carries a random nonce
          const stream = enc(`${output}${sentinel}${code} /w s\nlater`);
          const emitted: { seq: number; offset: number; bytes: Uint8Array }[] = [];
          const scanner = new MarkerScanner(enc(sentinel), (s) => emitted.push(s));
          const chunks: Uint8Array[] = [];
          let pos = 0;
          for (let i = 0; pos < stream.length; i++) {
            const n = cuts[i % cuts.length]!;
            chunks.push(stream.subarray(pos, pos + n));
            pos += n;
          }
          chunks.forEach((c, i) => {
            scanner.push(i + 1, c);
          });
          expect(dec(Buffer.concat(emitted.map((e) => e.bytes)))).toBe(output);
          for (const e of emitted) {
            expect(e.bytes).toEqual(
              chunks[e.seq - 1]!.subarray(e.offset, e.offset + e.bytes.length),
            );
          }
          expect(scanner.status()).toEqual({ code, pwd: "/w s" });
          expect(dec(Buffer.concat(scanner.after().map((s) => s.bytes)))).toBe("later");
        },
      ),
      { numRuns: 500 },
    );
  });
});
