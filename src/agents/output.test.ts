// Output budgets against a byte-exact model: within the budget everything is
// shown; over it exactly the first half and the last half are kept, and the
// elision names the bytes left out, the seq and offset of the first one and
// the seq of the last, so read_output can fetch them. The marker line sits
// between one "\n" on each side, and each stream decodes UTF-8 on its own.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { asBytes, decodePieces, elisionMarker, OutputBudget } from "./output.js";

type Stream = "stdout" | "stderr";
const enc = (s: string) => new TextEncoder().encode(s);

/** Every byte fed, with the event seq and offset it came from. */
function model(events: { stream: Stream; text: string }[]) {
  const bytes: { byte: number; seq: number; offset: number }[] = [];
  events.forEach((e, i) => {
    enc(e.text).forEach((byte, offset) => {
      bytes.push({ byte, seq: i + 1, offset });
    });
  });
  return bytes;
}

const ascii = fc.string({ unit: fc.constantFrom(..."abcxyz01 \n".split("")), maxLength: 20 });
const eventsArb = fc.array(
  fc.record({ stream: fc.constantFrom<Stream>("stdout", "stderr"), text: ascii }),
  {
    maxLength: 25,
  },
);

describe("OutputBudget", () => {
  it("keeps the first and last halves exactly and describes the left-out middle (property)", () => {
    fc.assert(
      fc.property(eventsArb, fc.integer({ min: 2, max: 120 }), (events, max) => {
        const budget = new OutputBudget(max);
        events.forEach((e, i) => {
          budget.add(i + 1, e.stream, enc(e.text));
        });
        const all = model(events);
        const text = String.fromCharCode(...all.map((b) => b.byte));
        expect(budget.total).toBe(all.length);
        if (all.length <= max) {
          expect(budget.elision()).toBeUndefined();
          expect(budget.shownBytes).toBe(all.length);
          expect(budget.render("s")).toBe(text);
          return;
        }
        const headMax = Math.floor(max / 2);
        const tailMax = max - headMax;
        const cutFrom = headMax;
        const cutTo = all.length - tailMax; // exclusive
        expect(budget.shownBytes).toBe(max);
        const e = budget.elision()!;
        expect(e).toEqual({
          bytes: cutTo - cutFrom,
          fromSeq: all[cutFrom]!.seq,
          fromOffset: all[cutFrom]!.offset,
          toSeq: all[cutTo - 1]!.seq,
        });
        expect(budget.render("s")).toBe(
          `${text.slice(0, cutFrom)}\n${elisionMarker("s", e)}\n${text.slice(cutTo)}`,
        );
      }),
    );
  });

  it("counts an event given from an offset of its value at that offset", () => {
    const budget = new OutputBudget(4);
    budget.add(1, "stdout", enc("ab"));
    budget.add(2, "stdout", enc("cdefgh"), 10);
    expect(budget.elision()).toEqual({ bytes: 4, fromSeq: 2, fromOffset: 10, toSeq: 2 });
    expect(budget.render("s")).toMatch(/^ab\n\[… 4 bytes .*\]\ngh$/);
  });

  it("ignores empty chunks", () => {
    const budget = new OutputBudget(2);
    budget.add(1, "stdout", new Uint8Array(0));
    expect(budget.total).toBe(0);
    expect(budget.render("s")).toBe("");
  });
});

describe("elisionMarker", () => {
  it("names the byte count, the position and the read_output call that returns the bytes", () => {
    expect(elisionMarker("abc", { bytes: 100, fromSeq: 5, fromOffset: 0, toSeq: 9 })).toBe(
      '[… 100 bytes left out here, starting at byte 0 of seq 5 and ending in seq 9; read_output {"session_id":"abc","after_seq":4} returns them …]',
    );
  });

  it("says how many bytes of the first event to skip when the cut is inside it", () => {
    expect(elisionMarker("abc", { bytes: 1, fromSeq: 5, fromOffset: 7, toSeq: 5 })).toContain(
      "returns them (skip its first 7 bytes, shown above) …]",
    );
  });

  it("quotes any session id as JSON, so the call parses back (property)", () => {
    fc.assert(
      fc.property(fc.string(), fc.integer({ min: 1, max: 1e6 }), (id, seq) => {
        const line = elisionMarker(id, { bytes: 1, fromSeq: seq, fromOffset: 0, toSeq: seq });
        const call = /read_output (\{.*\}) returns them/.exec(line)![1]!;
        expect(JSON.parse(call)).toEqual({ session_id: id, after_seq: seq - 1 });
      }),
    );
  });
});

describe("decodePieces", () => {
  it("decodes a character split across two events of one stream whole, even with the other stream between", () => {
    const euro = enc("€"); // 3 bytes
    const text = decodePieces([
      { stream: "stdout", bytes: euro.subarray(0, 1) },
      { stream: "stderr", bytes: enc("e") },
      { stream: "stdout", bytes: euro.subarray(1) },
    ]);
    expect(text).toBe("e€");
  });

  it("renders invalid or unfinished UTF-8 as U+FFFD", () => {
    expect(decodePieces([{ stream: "stdout", bytes: new Uint8Array([0xff]) }])).toBe("\uFFFD");
    expect(decodePieces([{ stream: "stderr", bytes: enc("€").subarray(0, 2) }])).toBe("\uFFFD");
  });
});

describe("asBytes", () => {
  it("encodes text as UTF-8 and passes bytes through", () => {
    expect([...asBytes("é")]).toEqual([0xc3, 0xa9]);
    const b = new Uint8Array([1]);
    expect(asBytes(b)).toBe(b);
  });
});
