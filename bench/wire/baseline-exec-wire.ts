// The "straightforward" exec-wire codec our codec is measured against: what a
// careful developer writes first without measuring. Kept deliberately plain:
// streaming TextDecoder per chunk, a string buffer searched with indexOf,
// JSON.parse per line, atob-style base64 both ways, JSON.stringify per frame.
// It is correct (same events as ours on valid input); it is just slow.

import type { ExecEvent } from "../../src/index.js";

const enc = new TextEncoder();

function atobBytes(b64: string): Uint8Array {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function btoaBytes(bytes: Uint8Array): string {
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    // A typed array passed as the argument list, as plain JavaScript code would.
    bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000) as unknown as number[]);
  }
  return btoa(bin);
}

function toEvent(line: string): ExecEvent {
  const f = JSON.parse(line);
  if (f.name === "stdout" || f.name === "stderr") {
    return {
      id: f.id,
      seq: f.seq,
      name: f.name,
      value: f.enc === "b64" ? atobBytes(f.value) : f.value,
    };
  }
  return f;
}

/** ReadableStream<Uint8Array> -> ReadableStream of events. */
export function baselineDecode(readable: ReadableStream<Uint8Array>): ReadableStream<ExecEvent> {
  const decoder = new TextDecoder();
  let buf = "";
  return readable.pipeThrough(
    new TransformStream<Uint8Array, ExecEvent>({
      transform(chunk, controller) {
        buf += decoder.decode(chunk, { stream: true });
        let i: number;
        while ((i = buf.indexOf("\n")) !== -1) {
          const line = buf.slice(0, i).replace(/\r$/, "");
          buf = buf.slice(i + 1);
          if (line.length > 0) controller.enqueue(toEvent(line));
        }
      },
      flush(controller) {
        buf += decoder.decode();
        if (buf.length > 0) controller.enqueue(toEvent(buf));
      },
    }),
  );
}

/** One event -> its line as bytes. */
export function baselineEncode(ev: ExecEvent): Uint8Array {
  const frame =
    ev.name === "stdout" || ev.name === "stderr"
      ? typeof ev.value === "string"
        ? { id: ev.id, seq: ev.seq, name: ev.name, enc: "utf8", value: ev.value }
        : { id: ev.id, seq: ev.seq, name: ev.name, enc: "b64", value: btoaBytes(ev.value) }
      : ev;
  return enc.encode(`${JSON.stringify(frame)}\n`);
}
