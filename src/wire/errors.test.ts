import { describe, expect, it } from "vitest";
import { ComputerError, hasCode } from "./errors.js";

describe("ComputerError", () => {
  it("carries a code and, for truncation, the earliest retained seq", () => {
    const err = new ComputerError("ELOG_TRUNCATED", "gone", { earliestSeq: 42 });
    expect(err).toBeInstanceOf(Error);
    expect(err.code).toBe("ELOG_TRUNCATED");
    expect(err.earliestSeq).toBe(42);
    expect(hasCode(err, "ELOG_TRUNCATED")).toBe(true);
    expect(hasCode(new Error("x"), "ELOG_TRUNCATED")).toBe(false);
  });
});
