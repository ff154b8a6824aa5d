// The Redis layout both ways, without a server: events turned into script
// arguments and stored the way the append script stores them decode to the
// same events (bytes stay bytes, text stays text, exits keep signal and
// reason); a record written with recordFields/patchFields reads back with
// parseRecord, older state spellings included.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LoggedEvent } from "../../wire/types.js";
import type { ExecRecord, NewExecRecord } from "../types.js";
import {
  type Arg,
  decodeEntry,
  eventArgs,
  parseRecord,
  patchFields,
  type RawEntry,
  recordFields,
} from "./codec.js";

const buf = (a: Arg): Buffer => (Buffer.isBuffer(a) ? a : Buffer.from(String(a), "utf8"));

/** What the append script XADDs for each five-argument group, read back in Buffer mode. */
function storeLikeTheScript(args: Arg[]): RawEntry[] {
  const entries: RawEntry[] = [];
  for (let b = 0; b < args.length; b += 5) {
    const [seq, t, v, s, r] = args.slice(b, b + 5) as [Arg, Arg, Arg, Arg, Arg];
    const fields = t === "x" ? ["t", t, "v", v, "s", s, "r", r] : ["t", t, "v", v];
    entries.push([Buffer.from(`${seq}-0`), fields.map(buf)]);
  }
  return entries;
}

/** Pairs of a flat field/value list as an object, as HGETALL returns them. */
function hash(pairs: Arg[]): Record<string, string> {
  const h: Record<string, string> = {};
  for (let i = 0; i < pairs.length; i += 2) h[String(pairs[i])] = String(pairs[i + 1]);
  return h;
}

const eventArb: fc.Arbitrary<LoggedEvent> = fc.oneof(
  fc.record({
    id: fc.constant("e"),
    seq: fc.integer({ min: 1, max: 2 ** 40 }),
    name: fc.constantFrom("stdout" as const, "stderr" as const),
    value: fc.oneof(
      fc.uint8Array({ maxLength: 32 }),
      fc.string({ unit: "grapheme", maxLength: 16 }),
    ),
  }),
  fc.record(
    {
      id: fc.constant("e"),
      seq: fc.integer({ min: 1, max: 2 ** 40 }),
      name: fc.constant("exit" as const),
      value: fc.integer({ min: -1, max: 255 }),
      signal: fc.constantFrom("SIGTERM", "SIGKILL", "SIGINT"),
      reason: fc.constantFrom(
        "exited" as const,
        "killed" as const,
        "timeout" as const,
        "lost" as const,
      ),
    },
    { requiredKeys: ["id", "seq", "name", "value"] },
  ),
);

/** Events compared by content: bytes as plain arrays. */
const plain = (ev: LoggedEvent) =>
  ev.name !== "exit" && typeof ev.value !== "string" ? { ...ev, value: [...ev.value] } : ev;

describe("events", () => {
  it("decode to what was appended: type, bytes or text, exit code, signal and reason (property)", () => {
    fc.assert(
      fc.property(fc.array(eventArb, { maxLength: 8 }), (events) => {
        const args = eventArgs(events);
        expect(args).toHaveLength(events.length * 5);
        const back = storeLikeTheScript(args).map((e) => decodeEntry("e", e));
        expect(back.map(plain)).toEqual(events.map(plain));
        for (let i = 0; i < events.length; i++) {
          const ev = events[i]!;
          if (ev.name !== "exit") expect(typeof back[i]!.value).toBe(typeof ev.value);
        }
      }),
      { numRuns: 50 },
    );
  });

  it("use the documented type letters and empty signal/reason for output", () => {
    const args = eventArgs([
      { id: "e", seq: 1, name: "stdout", value: new Uint8Array([1]) },
      { id: "e", seq: 2, name: "stderr", value: new Uint8Array([2]) },
      { id: "e", seq: 3, name: "stdout", value: "a" },
      { id: "e", seq: 4, name: "stderr", value: "b" },
      { id: "e", seq: 5, name: "exit", value: 0 },
    ]);
    expect(args.filter((_, i) => i % 5 === 1)).toEqual(["o", "e", "O", "E", "x"]);
    expect(args.slice(23)).toEqual(["", ""]);
  });

  it("hand bytes over as a Buffer over the same memory, without copying", () => {
    const backing = new Uint8Array([0, 1, 2, 3]);
    const value = backing.subarray(1, 3);
    const v = eventArgs([{ id: "e", seq: 1, name: "stdout", value }])[2] as Buffer;
    expect(Buffer.isBuffer(v)).toBe(true);
    expect([...v]).toEqual([1, 2]);
    expect(v.buffer).toBe(backing.buffer);
  });

  it("read an exit the lost-sweep script wrote (empty signal, reason lost)", () => {
    const entry: RawEntry = [
      Buffer.from("12-0"),
      ["t", "x", "v", "-1", "s", "", "r", "lost"].map((s) => Buffer.from(s)),
    ];
    expect(decodeEntry("e", entry)).toEqual({
      id: "e",
      seq: 12,
      name: "exit",
      value: -1,
      reason: "lost",
    });
  });
});

describe("records", () => {
  const base: NewExecRecord = {
    id: "e1",
    command: ["echo", "a b"],
    cwd: "sub",
    encoding: "utf8",
    node: "n1",
    pid: 77,
    startedAt: 1000,
  };

  it("read back as written, with what the create script adds (state, last, earliest)", () => {
    const fields = recordFields(base);
    const h: Record<string, string> = {
      ...hash(fields),
      state: "running",
      last: "0",
      earliest: "1",
    };
    expect(h.command).toBe('["echo","a b"]');
    expect(parseRecord(h)).toEqual({ ...base, state: "running", lastSeq: 0, earliestSeq: 1 });
  });

  it("leave out the state, undefined fields and fields the layout does not know", () => {
    const fields = recordFields({
      ...base,
      state: "running",
      pid: undefined,
      extra: 1,
    } as NewExecRecord);
    const h = hash(fields);
    expect(h).not.toHaveProperty("state");
    expect(h).not.toHaveProperty("pid");
    expect(h).not.toHaveProperty("extra");
  });

  it("patch by hash field name, deleting fields set to undefined", () => {
    expect(
      patchFields({
        state: "exited",
        exitCode: 0,
        endedAt: 5,
        lastSeq: 9,
        earliestSeq: 2,
        signal: undefined,
      }),
    ).toEqual({
      set: ["state", "exited", "exitCode", "0", "endedAt", "5", "last", "9", "earliest", "2"],
      del: ["signal"],
    });
  });

  it("round-trip a finished record through recordFields + patchFields (property)", () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string(), fc.array(fc.string(), { minLength: 1, maxLength: 3 })),
        fc.constantFrom("exited" as const, "killed" as const, "timeout" as const, "lost" as const),
        fc.integer({ min: -1, max: 255 }),
        fc.option(fc.constantFrom("SIGTERM", "SIGKILL"), { nil: undefined }),
        fc.nat(1000),
        (command, state, exitCode, signal, lastSeq) => {
          const rec: ExecRecord = {
            ...base,
            command,
            state,
            exitCode,
            endedAt: 2000,
            lastSeq,
            earliestSeq: lastSeq + 1,
          };
          if (signal) rec.signal = signal;
          const { set } = patchFields({
            state,
            exitCode,
            endedAt: 2000,
            lastSeq,
            earliestSeq: lastSeq + 1,
            signal,
          });
          expect(parseRecord(hash([...recordFields({ ...base, command }), ...set]))).toEqual(rec);
        },
      ),
    );
  });

  it("read older spellings and gaps: timed_out as timeout, unknown state as running, b64 by default", () => {
    const r = parseRecord({ id: "x", state: "timed_out" })!;
    expect(r).toEqual({
      id: "x",
      command: "",
      cwd: "",
      encoding: "b64",
      node: "",
      state: "timeout",
      startedAt: 0,
      lastSeq: 0,
      earliestSeq: 1,
    });
    expect(parseRecord({ id: "x", state: "weird" })!.state).toBe("running");
  });

  it("are absent when the hash is empty or lacks id or state", () => {
    expect(parseRecord({})).toBeUndefined();
    expect(parseRecord({ id: "x" })).toBeUndefined();
    expect(parseRecord({ state: "running" })).toBeUndefined();
  });
});
