// Tests for the shared line pieces: PendingBytes (a line still arriving,
// joined once) and excerptOf (what line errors quote). The framing rules
// themselves are tested through the exec-wire decoder (exec-wire/*.test.ts).
import { describe, expect, it } from "vitest";
import { excerptOf, PendingBytes } from "./lines.js";

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
