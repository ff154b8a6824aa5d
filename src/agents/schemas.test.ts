// The tool input schemas: every tool has a schema and a description, objects
// are strict (an unknown field is refused, naming it), and the documented
// bounds hold (output budgets, yields, signal names, editor ranges).
import { describe, expect, it } from "vitest";
import {
  DEFAULT_MAX_OUTPUT_BYTES,
  editorInput,
  execCommandInput,
  killSessionInput,
  MAX_OUTPUT_BYTES_LIMIT,
  MAX_YIELD_MS,
  readOutputInput,
  TOOL_NAMES,
  TOOL_SPECS,
  writeStdinInput,
} from "./schemas.js";

describe("TOOL_SPECS", () => {
  it("lists each tool once with a description", () => {
    expect(new Set(TOOL_NAMES).size).toBe(TOOL_NAMES.length);
    for (const name of TOOL_NAMES) expect(TOOL_SPECS[name].description.length).toBeGreaterThan(20);
  });

  it("refuses an unknown field in every tool's input, naming it", () => {
    for (const name of TOOL_NAMES) {
      const r = TOOL_SPECS[name].schema.safeParse({ no_such_field: 1 });
      expect(r.success).toBe(false);
      expect(JSON.stringify(r.error?.issues)).toContain("no_such_field");
    }
  });
});

describe("bounds", () => {
  it("keeps output budgets between 256 bytes and the limit, the default inside", () => {
    expect(DEFAULT_MAX_OUTPUT_BYTES).toBeGreaterThanOrEqual(256);
    expect(DEFAULT_MAX_OUTPUT_BYTES).toBeLessThanOrEqual(MAX_OUTPUT_BYTES_LIMIT);
    const ok = (n: number) => execCommandInput.safeParse({ cmd: "x", max_output_bytes: n }).success;
    expect([
      ok(255),
      ok(256),
      ok(MAX_OUTPUT_BYTES_LIMIT),
      ok(MAX_OUTPUT_BYTES_LIMIT + 1),
      ok(1000.5),
    ]).toEqual([false, true, true, false, false]);
  });

  it("bounds yields to 0..MAX_YIELD_MS and requires a non-empty command", () => {
    const ok = (v: unknown) =>
      writeStdinInput.safeParse({ session_id: "s", yield_time_ms: v }).success;
    expect([ok(0), ok(MAX_YIELD_MS), ok(MAX_YIELD_MS + 1), ok(-1)]).toEqual([
      true,
      true,
      false,
      false,
    ]);
    expect(execCommandInput.safeParse({ cmd: "" }).success).toBe(false);
    expect(readOutputInput.safeParse({ session_id: "" }).success).toBe(false);
  });

  it("accepts SIG-prefixed upper-case signal names only", () => {
    const ok = (signal: string) => killSessionInput.safeParse({ session_id: "s", signal }).success;
    expect([ok("SIGTERM"), ok("SIGRTMIN1"), ok("TERM"), ok("sigterm"), ok("SIG")]).toEqual([
      true,
      true,
      false,
      false,
      false,
    ]);
  });

  it("takes an editor view_range of a 1-based start and an end of -1 or more", () => {
    const ok = (view_range: unknown) =>
      editorInput.safeParse({ command: "view", path: "a", view_range }).success;
    expect([ok([1, -1]), ok([3, 10]), ok([0, 5]), ok([1, -2]), ok([1])]).toEqual([
      true,
      true,
      false,
      false,
      false,
    ]);
  });
});
