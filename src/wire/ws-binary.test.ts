// Tests for the binary WebSocket codec (docs/protocol.md §1, "Binary
// WebSocket messages"): the documented layout byte for byte, round trips of
// random events cut into random messages, equality with the text codec, and
// malformed messages (each with its code and the events before it).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hasCode } from "./errors.js";
import { encodeExecEvent } from "./exec-wire/index.js";
import { concat, decodeAll, eventArb, norm } from "./exec-wire/test-support/fixtures.js";
import type { ExecEvent } from "./types.js";
import {
  BinaryFrameError,
  decodeBinaryMessage,
  encodeBinaryMessage,
  encodeBinaryRecord,
  encodeBinaryRecordHeader,
  RECORD_HEADER_BYTES,
  RECORD_KIND,
} from "./ws-binary.js";

/** Random events with seqs 1..n, cut into 1..n messages at random points. */
const messagesArb = fc
  .array(eventArb, { minLength: 1, maxLength: 12 })
  .map((drafts) => drafts.map((d, i) => ({ ...d, seq: i + 1 }) as ExecEvent))
  .chain((events) =>
    fc.array(fc.nat(events.length), { maxLength: events.length }).map((cuts) => ({ events, cuts })),
  );

function split<T>(items: T[], cuts: number[]): T[][] {
  const points = [...new Set([0, ...cuts, items.length])].sort((a, b) => a - b);
  const out: T[][] = [];
  for (let i = 1; i < points.length; i++) {
    const part = items.slice(points[i - 1], points[i]);
    if (part.length > 0) out.push(part);
  }
  return out;
}

const record = (kind: number, id: string, seq: number, payload: Uint8Array) => {
  const idb = new TextEncoder().encode(id);
  const out = new Uint8Array(RECORD_HEADER_BYTES + idb.length + payload.length);
  const v = new DataView(out.buffer);
  v.setUint8(0, kind);
  v.setUint8(1, idb.length);
  v.setUint32(2, Math.floor(seq / 2 ** 32));
  v.setUint32(6, seq >>> 0);
  v.setUint32(10, payload.length);
  out.set(idb, RECORD_HEADER_BYTES);
  out.set(payload, RECORD_HEADER_BYTES + idb.length);
  return out;
};

function failure(message: Uint8Array): BinaryFrameError & { events?: ExecEvent[] } {
  try {
    decodeBinaryMessage(message);
  } catch (err) {
    return err as BinaryFrameError;
  }
  throw new Error("decoded without an error");
}

describe("binary WebSocket records", () => {
  it("lays out an output record as documented: kind, id length, u64 seq, u32 length, id, raw bytes", () => {
    const rec = encodeBinaryRecord({
      id: "r1",
      seq: 7,
      name: "stderr",
      value: Uint8Array.of(0, 255),
    });
    expect([...rec]).toEqual([0x02, 2, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 2, 0x72, 0x31, 0x00, 0xff]);
  });

  it("text output is a text record; exit and heartbeat are line records holding their canonical JSON", () => {
    const text = encodeBinaryRecord({ id: "r1", seq: 1, name: "stdout", value: "π\n" });
    expect(text[0]).toBe(RECORD_KIND.stdoutText);
    const exit: ExecEvent = { id: "r1", seq: 2, name: "exit", value: 0, reason: "exited" };
    const line = encodeBinaryRecord(exit);
    expect(line[0]).toBe(RECORD_KIND.line);
    expect(new TextDecoder().decode(line.subarray(RECORD_HEADER_BYTES))).toBe(
      new TextDecoder().decode(encodeExecEvent(exit)).trimEnd(),
    );
  });

  it("a header plus the raw payload is the same record as encodeBinaryRecord's", () => {
    const ev: ExecEvent = { id: "r1", seq: 9, name: "stdout", value: Uint8Array.of(1, 2, 3) };
    const header = encodeBinaryRecordHeader(ev)!;
    expect(concat([header, ev.value as Uint8Array])).toEqual(encodeBinaryRecord(ev));
    expect(encodeBinaryRecordHeader({ ...ev, value: "text" })).toBeUndefined();
    expect(encodeBinaryRecordHeader({ id: "r1", seq: 2, name: "exit", value: 0 })).toBeUndefined();
  });

  it("seqs up to 2^53 - 1 survive", () => {
    const ev: ExecEvent = {
      id: "x",
      seq: Number.MAX_SAFE_INTEGER,
      name: "stdout",
      value: Uint8Array.of(1),
    };
    expect(decodeBinaryMessage(encodeBinaryRecord(ev))[0]!.seq).toBe(Number.MAX_SAFE_INTEGER);
  });

  it("output values are views into the message (no copy)", () => {
    const msg = encodeBinaryRecord({
      id: "r1",
      seq: 1,
      name: "stdout",
      value: Uint8Array.of(9, 8),
    });
    const [ev] = decodeBinaryMessage(msg);
    expect((ev!.value as Uint8Array).buffer).toBe(msg.buffer);
  });

  it("property: random events in random messages decode to the same events, equal to the text codec's", () => {
    fc.assert(
      fc.property(messagesArb, ({ events, cuts }) => {
        const got = split(events, cuts).flatMap((batch) =>
          decodeBinaryMessage(encodeBinaryMessage(batch)),
        );
        const viaText = decodeAll([concat(events.map((e) => encodeExecEvent(e)))]).events;
        expect(norm(got)).toEqual(norm(events));
        expect(norm(got)).toEqual(norm(viaText));
      }),
      { numRuns: 300 },
    );
  });

  it("property: values 'bytes' gives every output value as bytes, like the text decoder", () => {
    fc.assert(
      fc.property(messagesArb, ({ events }) => {
        const got = decodeBinaryMessage(encodeBinaryMessage(events), { values: "bytes" });
        const viaText = decodeAll([concat(events.map((e) => encodeExecEvent(e)))], {
          values: "bytes",
        }).events;
        expect(norm(got)).toEqual(norm(viaText));
      }),
      { numRuns: 100 },
    );
  });

  it("events that UTF-8 cannot carry unchanged (lone surrogates, long ids) travel as line records", () => {
    const events: ExecEvent[] = [
      { id: "r1", seq: 1, name: "stdout", value: "a\ud800b" },
      { id: "x".repeat(300), seq: 2, name: "stdout", value: Uint8Array.of(1) },
      { id: "\udc00", seq: 3, name: "stderr", value: Uint8Array.of(2) },
    ];
    for (const ev of events) expect(encodeBinaryRecord(ev)[0]).toBe(RECORD_KIND.line);
    expect(norm(decodeBinaryMessage(encodeBinaryMessage(events)))).toEqual(norm(events));
  });

  it("an invalid event is refused with EINVAL, as by the text encoder", () => {
    expect(() =>
      encodeBinaryRecord({ id: "r1", seq: -1, name: "stdout", value: "x" } as ExecEvent),
    ).toThrow(expect.objectContaining({ code: "EINVAL" }));
  });
});

describe("binary WebSocket records: malformed messages", () => {
  const good = record(RECORD_KIND.stdoutBytes, "r1", 1, Uint8Array.of(1, 2, 3));

  it("an empty message is EINVAL", () => {
    expect(failure(new Uint8Array(0))).toMatchObject({ code: "EINVAL", offset: 0 });
  });

  it("a truncated header is EINVAL at its offset, after the events before it", () => {
    const err = failure(concat([good, good.subarray(0, 9)]));
    expect(err).toBeInstanceOf(BinaryFrameError);
    expect(err).toMatchObject({ code: "EINVAL", offset: good.length });
    expect(err.message).toMatch(/truncated header/);
    expect(err.events?.map((e) => e.seq)).toEqual([1]);
  });

  it("a record announcing more bytes than the message holds is EINVAL", () => {
    const err = failure(good.subarray(0, good.length - 1));
    expect(err).toMatchObject({ code: "EINVAL", offset: 0 });
    expect(err.message).toMatch(/truncated record/);
  });

  it("an unknown record kind is EINVAL", () => {
    const err = failure(record(0x7f, "r1", 1, new Uint8Array(0)));
    expect(err.message).toMatch(/unknown record kind 0x7f/);
    expect(hasCode(err, "EINVAL")).toBe(true);
  });

  it("a seq beyond 2^53 - 1 is EINVAL", () => {
    const bad = record(RECORD_KIND.stdoutBytes, "r1", 0, new Uint8Array(0));
    new DataView(bad.buffer).setUint32(2, 0x200000);
    expect(failure(bad)).toMatchObject({ code: "EINVAL" });
  });

  it("a line record with an id or seq, or with JSON that is not an exec-wire frame, is EINVAL", () => {
    const json = new TextEncoder().encode('{"id":"r1","seq":1,"name":"exit","value":0}');
    expect(failure(record(RECORD_KIND.line, "r1", 0, json)).code).toBe("EINVAL");
    expect(failure(record(RECORD_KIND.line, "", 3, json)).code).toBe("EINVAL");
    const bad = failure(record(RECORD_KIND.line, "", 0, new TextEncoder().encode("{nope")));
    expect(bad.code).toBe("EINVAL");
  });

  it("a line record holding an error frame raises the producer's code; an extension frame is skipped", () => {
    const frame = (s: string) => record(RECORD_KIND.line, "", 0, new TextEncoder().encode(s));
    const err = failure(
      concat([
        good,
        frame(
          '{"id":"r1","name":"error","code":"ELOG_TRUNCATED","message":"gone","earliestSeq":9}',
        ),
      ]),
    );
    expect(err).toMatchObject({ code: "ELOG_TRUNCATED", earliestSeq: 9 });
    expect(err.events?.length).toBe(1);
    expect(decodeBinaryMessage(concat([frame('{"id":"r1","name":"future"}'), good]))).toHaveLength(
      1,
    );
  });

  it("invalid UTF-8 in a text record reads as U+FFFD (as in a text line)", () => {
    const [ev] = decodeBinaryMessage(
      record(RECORD_KIND.stdoutText, "r1", 1, Uint8Array.of(0x61, 0xff)),
    );
    expect(ev!.value).toBe("a\ufffd");
  });

  it("property: any prefix of a valid message decodes or fails with EINVAL, never anything else", () => {
    fc.assert(
      fc.property(messagesArb, fc.nat(), ({ events }, cut) => {
        const msg = encodeBinaryMessage(events);
        const prefix = msg.subarray(0, cut % (msg.length + 1));
        try {
          decodeBinaryMessage(prefix);
        } catch (err) {
          expect((err as BinaryFrameError).code).toBe("EINVAL");
        }
      }),
      { numRuns: 200 },
    );
  });
});
