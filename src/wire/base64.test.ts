// Tests for the base64 codec: round trips on every implementation available
// here (native/Buffer and the portable fallback) and strict rejection rules.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  base64Implementation,
  decodeBase64,
  decodeBase64Ascii,
  decodeBase64Portable,
  encodeBase64,
  encodeBase64Portable,
} from "./base64.js";

const impls = [
  ["platform", encodeBase64, decodeBase64],
  ["portable", encodeBase64Portable, decodeBase64Portable],
] as const;

describe.each(impls)("base64 (%s)", (_name, encode, decode) => {
  it("matches RFC 4648 test vectors", () => {
    const vectors: [string, string][] = [
      ["", ""],
      ["f", "Zg=="],
      ["fo", "Zm8="],
      ["foo", "Zm9v"],
      ["foob", "Zm9vYg=="],
      ["fooba", "Zm9vYmE="],
      ["foobar", "Zm9vYmFy"],
    ];
    for (const [plain, b64] of vectors) {
      const bytes = new TextEncoder().encode(plain);
      expect(encode(bytes)).toBe(b64);
      expect(decode(b64)).toEqual(bytes);
    }
    expect(encode(Uint8Array.of(0, 0xff, 0xfe))).toBe("AP/+");
  });

  it("round-trips random bytes, also from a view with an offset (property)", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(5), (bytes, off) => {
        const backing = new Uint8Array(bytes.length + off + 3);
        backing.set(bytes, off);
        const view = backing.subarray(off, off + bytes.length);
        const text = encode(view);
        expect(text).toBe(encodeBase64Portable(bytes));
        const back = decode(text);
        expect(back).toBeInstanceOf(Uint8Array);
        expect(Array.from(back)).toEqual(Array.from(bytes));
      }),
      { numRuns: 300 },
    );
  });

  it.each([
    ["bad length", "Zm9"],
    ["invalid character", "Zm9*"],
    ["URL-safe alphabet", "AB-_"],
    ["whitespace", "Zm9v Zm9v"],
    ["whitespace keeping length", "Zm 9"],
    ["newline", "Zm9v\nZm8="],
    ["padding in the middle", "Zg==Zm9v"],
    ["three pad characters", "Z==="],
    ["pad only", "===="],
    ["non-zero pad bits (==)", "Zh=="],
    ["non-zero pad bits (=)", "Zm9="],
    ["non-Latin-1 code unit that aliases a letter", "Zm9\u0176"],
    ["missing padding", "Zg"],
  ])("rejects %s with EINVAL", (_why, text) => {
    expect(() => decode(text)).toThrow(expect.objectContaining({ code: "EINVAL" }));
  });
});

describe("decodeBase64Ascii (the decoder's fast path for ASCII text)", () => {
  const outcome = (f: (t: string) => Uint8Array, t: string) => {
    try {
      return Array.from(f(t));
    } catch (e) {
      return (e as { code?: string }).code;
    }
  };
  it("accepts and rejects exactly what the strict portable decoder does (property)", () => {
    const junk = fc.constantFrom(
      "=",
      "-",
      "_",
      " ",
      "\n",
      "*",
      "\ufffd",
      "\u0000",
      "A",
      "g",
      "/",
      "+",
    );
    const valid = fc.uint8Array({ maxLength: 40 }).map(encodeBase64Portable);
    const mutated = fc.tuple(valid, fc.nat(), junk, fc.boolean()).map(([t, p, c, ins]) => {
      const i = p % (t.length + 1);
      return t.slice(0, i) + c + t.slice(ins ? i : i + 1);
    });
    const random = fc.array(junk, { maxLength: 12 }).map((a) => a.join(""));
    fc.assert(
      fc.property(fc.oneof(valid, mutated, mutated, random), (t) => {
        expect(outcome(decodeBase64Ascii, t)).toEqual(outcome(decodeBase64Portable, t));
      }),
      { numRuns: 3000 },
    );
  });
});

describe("decodeBase64 on any text", () => {
  it("accepts and rejects exactly what the strict portable decoder does, whatever the characters (property)", () => {
    const outcome = (f: (t: string) => Uint8Array, t: string) => {
      try {
        return Array.from(f(t));
      } catch (e) {
        return (e as { code?: string }).code;
      }
    };
    // Characters above U+00FF whose low byte is a base64 letter ("\u0141"
    // reads as "A" to Buffer) must not slip through the ASCII fast check.
    const junk = fc.oneof(
      fc.constantFrom("\u0141", "\u0176", "\uff41", "\u00c1", "\ufffd", "\ud83d", "-", "=", " "),
      fc.string({ minLength: 1, maxLength: 1, unit: "binary" }),
    );
    const valid = fc.uint8Array({ maxLength: 60 }).map(encodeBase64Portable);
    const mutated = fc.tuple(valid, fc.nat(), junk, fc.boolean()).map(([t, p, c, ins]) => {
      const i = p % (t.length + 1);
      return t.slice(0, i) + c + t.slice(ins ? i : i + 1);
    });
    fc.assert(
      fc.property(fc.oneof(valid, mutated, mutated), (t) => {
        expect(outcome(decodeBase64, t)).toEqual(outcome(decodeBase64Portable, t));
      }),
      { numRuns: 3000 },
    );
  });
});

describe("base64 platform selection", () => {
  it("uses a native implementation on Node", () => {
    expect(["native", "buffer"]).toContain(base64Implementation);
  });
});
