// The server's shared frame encoders (src/server/encode-cache.ts) must give
// byte-for-byte the codec's canonical text (frameToJson / formatSseEvent),
// whatever the id, seq, stream name or value size, and share one frame per
// event between subscribers. A guard for any hand-built fast path there (a
// Buffer-built variant was tried and measured, see docs/benchmarks.md).

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { encodeNdjson, encodeSse } from "../src/server/encode-cache.js";
import { frameToJson } from "../src/wire/exec-wire.js";
import { formatSseEvent } from "../src/wire/sse.js";
import type { ExecEvent } from "../src/wire/types.js";

const bytesOf = (f: Uint8Array | string): Buffer =>
  typeof f === "string" ? Buffer.from(f, "utf8") : Buffer.from(f.buffer, f.byteOffset, f.length);

describe("server frame encoders", () => {
  it("raw-byte frames equal the canonical text, exec-wire and SSE", () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 40, unit: "binary" }),
        fc.nat({ max: Number.MAX_SAFE_INTEGER }),
        fc.constantFrom("stdout" as const, "stderr" as const),
        fc.uint8Array({ minLength: 0, maxLength: 5000 }),
        (id, seq, name, value) => {
          const ev: ExecEvent = { id, seq, name, value };
          expect(bytesOf(encodeNdjson(ev))).toEqual(Buffer.from(`${frameToJson(ev)}\n`));
          expect(bytesOf(encodeSse(ev))).toEqual(
            Buffer.from(formatSseEvent({ id: seq, event: name, data: frameToJson(ev) })),
          );
        },
      ),
      { numRuns: 300 },
    );
  });

  it("shares one frame between subscribers of the same event", () => {
    const ev: ExecEvent = { id: "x", seq: 1, name: "stdout", value: new Uint8Array(70_000) };
    expect(encodeNdjson(ev)).toBe(encodeNdjson(ev));
    expect(encodeSse(ev)).toBe(encodeSse(ev));
  });
});
