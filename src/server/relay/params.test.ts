// The relay's resume position and long-poll wait: positions accept what the
// exec API accepts except "tail" (a page always needs the replay), and a wait
// is whole milliseconds capped at the server's maximum.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseChannelAfter, parseWait } from "./params.js";

describe("parseChannelAfter", () => {
  it("reads absent values as 0 and digits as the seq", () => {
    expect(parseChannelAfter(undefined)).toBe(0);
    expect(parseChannelAfter(null)).toBe(0);
    expect(parseChannelAfter("")).toBe(0);
    expect(parseChannelAfter("17")).toBe(17);
  });

  it("refuses tail and malformed positions with EINVAL naming the field and not offering tail", () => {
    for (const bad of ["tail", "-1", "1.5", "abc", "9999999999999999"]) {
      let err: unknown;
      try {
        parseChannelAfter(bad, "Last-Event-ID");
      } catch (e) {
        err = e;
      }
      expect(err).toMatchObject({
        code: "EINVAL",
        message: "Last-Event-ID must be a non-negative integer",
      });
    }
  });

  it("returns any non-negative integer of up to 15 decimal digits (property)", () => {
    fc.assert(
      fc.property(fc.nat({ max: 999_999_999_999_999 }), (n) => {
        expect(parseChannelAfter(String(n))).toBe(n);
      }),
    );
  });
});

describe("parseWait", () => {
  it("answers at once when absent and caps at the maximum", () => {
    expect(parseWait(null, 30_000)).toBe(0);
    expect(parseWait("", 30_000)).toBe(0);
    expect(parseWait("250", 30_000)).toBe(250);
    expect(parseWait("999999999", 30_000)).toBe(30_000);
  });

  it("refuses signs, fractions, units and over-long numbers with EINVAL", () => {
    for (const bad of ["-1", "+5", "1.5", "5s", "1e3", "1234567890", " 5"]) {
      expect(() => parseWait(bad, 1000)).toThrow(expect.objectContaining({ code: "EINVAL" }));
    }
  });

  it("never exceeds the maximum (property)", () => {
    fc.assert(
      fc.property(fc.nat({ max: 999_999_999 }), fc.nat({ max: 100_000 }), (n, max) => {
        expect(parseWait(String(n), max)).toBe(Math.min(n, max));
      }),
    );
  });
});
