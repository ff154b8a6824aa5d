// Tests for exec-wire encoding (docs/protocol.md §1, "Canonical encoding"):
// key order, compactness, escapes, error frames, invalid events, and the
// byte-level output writer held equal to the JSON.stringify-based text.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ExecEvent } from "../types.js";
import { encodeErrorFrame, encodeExecEvent, frameToJson } from "./index.js";
import {
  bytes,
  concat,
  idArb,
  td,
  te,
  WIRE_EVENTS,
  WIRE_EXAMPLE,
} from "./test-support/fixtures.js";

describe("exec-wire encoding", () => {
  it("interop: our bytes equal the example frames of docs/protocol.md §1 exactly", () => {
    const ours = concat(WIRE_EVENTS.map(encodeExecEvent));
    expect(td.decode(ours)).toBe(WIRE_EXAMPLE);
    expect(ours).toEqual(bytes(WIRE_EXAMPLE));
  });

  it("writes keys in the order id, seq, name, enc, value, then signal, reason; compact", () => {
    const line = td.decode(
      encodeExecEvent({
        id: "x",
        seq: 9,
        name: "exit",
        value: 137,
        reason: "killed",
        signal: "SIGKILL",
      }),
    );
    expect(line).toBe(
      '{"id":"x","seq":9,"name":"exit","value":137,"signal":"SIGKILL","reason":"killed"}\n',
    );
  });

  it("gives a string value enc utf8 and a Uint8Array value enc b64 (standard, padded)", () => {
    expect(frameToJson({ id: "a", seq: 1, name: "stdout", value: "hi" })).toBe(
      '{"id":"a","seq":1,"name":"stdout","enc":"utf8","value":"hi"}',
    );
    expect(frameToJson({ id: "a", seq: 2, name: "stderr", value: bytes("f") })).toBe(
      '{"id":"a","seq":2,"name":"stderr","enc":"b64","value":"Zg=="}',
    );
    expect(frameToJson({ id: "a", seq: 3, name: "stdout", value: new Uint8Array(0) })).toBe(
      '{"id":"a","seq":3,"name":"stdout","enc":"b64","value":""}',
    );
  });

  it("frameToJson is the line without its newline", () => {
    for (const ev of WIRE_EVENTS)
      expect(`${frameToJson(ev)}\n`).toBe(td.decode(encodeExecEvent(ev)));
  });

  it("encodes a heartbeat with value keys pid, elapsedMs, lastOutputMs", () => {
    const hb: ExecEvent = {
      id: "r1",
      seq: 4,
      name: "heartbeat",
      value: { lastOutputMs: 3, elapsedMs: 2, pid: 1 },
    };
    expect(frameToJson(hb)).toBe(
      '{"id":"r1","seq":4,"name":"heartbeat","value":{"pid":1,"elapsedMs":2,"lastOutputMs":3}}',
    );
  });

  it("encodes an error frame: id first when present, then name, code, message, earliestSeq", () => {
    expect(
      td.decode(
        encodeErrorFrame({
          name: "error",
          code: "ELOG_TRUNCATED",
          message: "gone",
          earliestSeq: 7,
        }),
      ),
    ).toBe('{"name":"error","code":"ELOG_TRUNCATED","message":"gone","earliestSeq":7}\n');
    expect(
      td.decode(encodeErrorFrame({ id: "r1", name: "error", code: "ENOENT", message: "no" })),
    ).toBe('{"id":"r1","name":"error","code":"ENOENT","message":"no"}\n');
  });

  it("writes astral characters as UTF-8 and lone surrogates as \\u escapes (always valid UTF-8)", () => {
    const line = encodeExecEvent({ id: "🌍", seq: 1, name: "stdout", value: "a\ud800b😀" });
    expect(td.decode(line)).toBe(
      '{"id":"🌍","seq":1,"name":"stdout","enc":"utf8","value":"a\\ud800b😀"}\n',
    );
    expect(new TextDecoder("utf-8", { fatal: true }).decode(line)).toBeTypeOf("string");
  });

  it.each([
    ["non-string id", { id: 1, seq: 1, name: "stdout", value: "x" }],
    ["fractional seq", { id: "a", seq: 1.5, name: "stdout", value: "x" }],
    ["negative seq", { id: "a", seq: -1, name: "stdout", value: "x" }],
    ["unknown name", { id: "a", seq: 1, name: "nope", value: "x" }],
    ["non-integer exit", { id: "a", seq: 1, name: "exit", value: 1.5 }],
    ["number as output", { id: "a", seq: 1, name: "stdout", value: 5 }],
  ])("refuses to encode an invalid event (%s) with EINVAL", (_why, ev) => {
    expect(() => encodeExecEvent(ev as unknown as ExecEvent)).toThrow(
      expect.objectContaining({ code: "EINVAL" }),
    );
  });
});

describe("exec-wire encoding properties", () => {
  it("the byte-level frame writer equals UTF-8 of JSON.stringify-based frameToJson (any text)", () => {
    const anyText = fc.oneof(
      fc.string({ unit: "binary", maxLength: 60 }),
      fc.string({
        unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
        maxLength: 40,
      }),
      fc.string({
        unit: fc.constantFrom(
          "\u0000",
          "\u001f",
          "\u007f",
          '"',
          "\\",
          "\ud800",
          "\udfff",
          "é",
          "€",
          "😀",
        ),
        maxLength: 30,
      }),
      fc.string({ unit: "binary", minLength: 2000, maxLength: 5000 }),
    );
    fc.assert(
      fc.property(
        idArb,
        fc.nat({ max: Number.MAX_SAFE_INTEGER }),
        fc.constantFrom("stdout" as const, "stderr" as const),
        fc.oneof(
          anyText,
          fc.uint8Array({ maxLength: 3000 }),
          fc.uint8Array({ minLength: 13000, maxLength: 30000 }),
        ),
        (id, seq, name, value) => {
          const ev = { id, seq, name, value } as ExecEvent;
          expect(td.decode(encodeExecEvent(ev))).toBe(`${frameToJson(ev)}\n`);
          expect(Array.from(encodeExecEvent(ev))).toEqual(
            Array.from(te.encode(`${frameToJson(ev)}\n`)),
          );
        },
      ),
      { numRuns: 400 },
    );
  });
});
