import { describe, expect, it } from "vitest";
import { parseAfter, resolveAfter } from "./position.js";

describe("parseAfter", () => {
  it("reads absent values as 0, digits and numbers as seqs, and tail", () => {
    expect(parseAfter(undefined)).toBe(0);
    expect(parseAfter(null)).toBe(0);
    expect(parseAfter("")).toBe(0);
    expect(parseAfter("41")).toBe(41);
    expect(parseAfter(41)).toBe(41);
    expect(parseAfter("tail")).toBe("tail");
  });

  it("refuses negatives, fractions, signs, words and over-long digits with EINVAL naming the field", () => {
    for (const bad of [
      "-1",
      "1.5",
      "+3",
      "abc",
      "1e3",
      "9999999999999999",
      -1,
      1.5,
      Number.NaN,
      {},
      true,
    ]) {
      expect(() => parseAfter(bad, "Last-Event-ID")).toThrow(
        expect.objectContaining({
          code: "EINVAL",
          message: expect.stringContaining("Last-Event-ID"),
        }),
      );
    }
  });
});

describe("resolveAfter", () => {
  const bounds = { lastSeq: 10, earliestSeq: 4 };

  it("resolves the tail to the last seq and passes a retained position through", () => {
    expect(resolveAfter("x", "tail", bounds)).toBe(10);
    expect(resolveAfter("x", 3, bounds)).toBe(3);
    expect(resolveAfter("x", 10, bounds)).toBe(10);
  });

  it("refuses a position past the last seq with EINVAL", () => {
    expect(() => resolveAfter("x", 11, bounds)).toThrow(
      expect.objectContaining({ code: "EINVAL", message: "after 11 is beyond the last seq 10" }),
    );
  });

  it("refuses a dropped position with ELOG_TRUNCATED carrying the earliest seq", () => {
    expect(() => resolveAfter("x", 2, bounds)).toThrow(
      expect.objectContaining({ code: "ELOG_TRUNCATED", earliestSeq: 4 }),
    );
  });
});
