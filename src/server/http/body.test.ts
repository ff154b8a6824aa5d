// Request bodies without sockets: the size limit (declared or counted) is
// ETOOLARGE, malformed JSON, non-objects and unknown fields are EINVAL, a
// non-JSON content type is EUNSUPPORTED_MEDIA, and an empty body is `{}`
// only where the route allows it.

import type { IncomingMessage } from "node:http";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { readBody, readJsonBody, rejectUnknownFields } from "./body.js";

/** A request whose body is `chunks`, with the given headers. */
function request(
  chunks: (string | Buffer)[],
  headers: Record<string, string> = {},
): IncomingMessage {
  const stream = Readable.from(chunks.map((c) => (typeof c === "string" ? Buffer.from(c) : c)));
  return Object.assign(stream, { headers }) as unknown as IncomingMessage;
}

const coded = (code: string, status: number) => expect.objectContaining({ code, status });

describe("readBody", () => {
  it("joins the chunks", async () => {
    const buf = await readBody(request(["ab", "cd", "e"]), 10);
    expect(buf.toString()).toBe("abcde");
  });

  it("fails at the limit when the bytes pass it", async () => {
    await expect(readBody(request(["12345", "6"]), 5)).rejects.toEqual(coded("ETOOLARGE", 413));
  });

  it("fails before reading when content-length declares more than the limit", async () => {
    const req = request(["x"], { "content-length": "100" });
    await expect(readBody(req, 10)).rejects.toEqual(coded("ETOOLARGE", 413));
  });

  it("a body of exactly the limit is fine", async () => {
    expect((await readBody(request(["12345"]), 5)).length).toBe(5);
  });
});

describe("readJsonBody", () => {
  it("parses a JSON object", async () => {
    const req = request(['{"a":1,', '"b":"x"}'], { "content-type": "application/json" });
    expect(await readJsonBody(req)).toEqual({ a: 1, b: "x" });
  });

  it("accepts no content type and +json types", async () => {
    expect(await readJsonBody(request(["{}"]))).toEqual({});
    const req = request(["{}"], { "content-type": "application/merge-patch+json; charset=utf-8" });
    expect(await readJsonBody(req)).toEqual({});
  });

  it("refuses other content types with 415", async () => {
    const req = request(["{}"], { "content-type": "text/plain" });
    await expect(readJsonBody(req)).rejects.toEqual(coded("EUNSUPPORTED_MEDIA", 415));
  });

  it("an empty body is {} only when allowed", async () => {
    expect(await readJsonBody(request([]), { allowEmpty: true })).toEqual({});
    await expect(readJsonBody(request([]))).rejects.toEqual(coded("EINVAL", 400));
  });

  it("malformed JSON and non-objects are EINVAL", async () => {
    for (const text of ["{", "[1]", "null", "3", '"s"']) {
      await expect(readJsonBody(request([text])), text).rejects.toEqual(coded("EINVAL", 400));
    }
  });

  it("honours the limit", async () => {
    const req = request([JSON.stringify({ a: "x".repeat(100) })]);
    await expect(readJsonBody(req, { limit: 50 })).rejects.toEqual(coded("ETOOLARGE", 413));
  });
});

describe("rejectUnknownFields", () => {
  it("names every unknown field", () => {
    expect(() => rejectUnknownFields({ a: 1 }, ["a", "b"])).not.toThrow();
    expect(() => rejectUnknownFields({ a: 1, timeout: 2, x: 3 }, ["a"])).toThrow(
      expect.objectContaining({ code: "EINVAL", message: "unknown field(s): timeout, x" }),
    );
  });
});
