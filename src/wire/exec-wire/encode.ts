// exec-wire encoding: an event (or an error frame) to its one canonical line,
// as text (frameToJson, also the `data` of the SSE mapping) or as UTF-8 bytes
// with the "\n" (encodeExecEvent). The canonical form is in docs/protocol.md
// §1 ("Canonical encoding"): key order is part of the contract, so frames are
// built by concatenation, never from an object's property order.
//
// Speed: output frames (nearly all the traffic) are assembled directly as
// bytes: fixed parts copied, seq digits and the JSON string written by a
// hand-rolled escaper + UTF-8 writer that reproduces JSON.stringify exactly
// (property-tested against it). `JSON.stringify` of a ~100-char value alone
// costs more than the whole byte writer (measured). Other frames are text
// written to bytes in one native Buffer#write (~4x faster per line than
// TextEncoder#encode, ~2x encodeInto + copy, measured on Node 20).
//
// Module-level state, and why sharing it between every server, decoder and
// encoder in the process is safe:
// - `idJson` / `idBytes` memos: pure functions of the id (the last id's JSON
//   text, and its UTF-8 bytes, which are only ever copied out, never handed
//   out). Every use compares the id first.
// - `scratch` (engines without Node's Buffer): overwritten before every use,
//   and the frame is copied out of it.
// - Two 64 KiB slabs that small frames are written into side by side, like
//   Node's own Buffer pool: a slab is append-only, so a frame's bytes are
//   never written again once returned, whoever encodes next. A frame is a
//   view, and its `.buffer` reaches its neighbours in the slab (frames of
//   this process) but never stale memory: slabs are zero-filled when made.
//   Holding a frame keeps its 64 KiB slab alive (documented in
//   docs/protocol.md, "Our TypeScript API").
// Synchronous code with no callbacks in between: no interleaving is possible.

import { encodeBase64 } from "../base64.js";
import { ComputerError } from "../errors.js";
import type { ErrorFrame, ExecEvent, OutputEvent } from "../types.js";

// Node's Buffer, found through globalThis (no `node:` import in src/wire).
interface NodeBufferStatic {
  alloc(size: number): NodeBuffer;
  allocUnsafeSlow(size: number): NodeBuffer;
  byteLength(text: string): number;
}
type NodeBuffer = Uint8Array & { write(text: string, offset: number, encoding?: string): number };
const NodeBuffer = (globalThis as { Buffer?: NodeBufferStatic }).Buffer;

const utf8 = new TextEncoder();
const SLAB_BYTES = 64 * 1024;

function invalidEvent(why: string): ComputerError {
  return new ComputerError("EINVAL", `cannot encode exec-wire event: ${why}`);
}

function checkHeader(ev: { id: unknown; seq: unknown }): void {
  if (typeof ev.id !== "string") throw invalidEvent("`id` must be a string");
  if (!Number.isSafeInteger(ev.seq) || (ev.seq as number) < 0) {
    throw invalidEvent("`seq` must be a non-negative integer");
  }
}

function finiteNumber(v: unknown, what: string): number {
  if (typeof v !== "number" || !Number.isFinite(v)) throw invalidEvent(`${what} must be a number`);
  return v;
}

// Consecutive events mostly share one id: stringify it once (a pure memo).
let lastIdRaw = "";
let lastIdJson = '""';
function idJson(id: string): string {
  if (id !== lastIdRaw) {
    lastIdJson = JSON.stringify(id);
    lastIdRaw = id;
  }
  return lastIdJson;
}

/**
 * The canonical JSON text of an event, without the line end: compact, keys in
 * the order `id, seq, name, enc, value`, then `signal`, `reason` on exit.
 * This is also the `data` of the SSE mapping (docs/protocol.md §2).
 */
export function frameToJson(ev: ExecEvent): string {
  checkHeader(ev);
  const head = `{"id":${idJson(ev.id)},"seq":${ev.seq},"name":`;
  switch (ev.name) {
    case "stdout":
    case "stderr": {
      const v = ev.value;
      if (typeof v === "string") {
        return `${head}"${ev.name}","enc":"utf8","value":${JSON.stringify(v)}}`;
      }
      if (v instanceof Uint8Array) {
        return `${head}"${ev.name}","enc":"b64","value":"${encodeBase64(v)}"}`;
      }
      throw invalidEvent("output `value` must be a string or a Uint8Array");
    }
    case "exit": {
      if (!Number.isSafeInteger(ev.value)) throw invalidEvent("exit `value` must be an integer");
      let s = `${head}"exit","value":${ev.value}`;
      if (ev.signal !== undefined) {
        if (typeof ev.signal !== "string") throw invalidEvent("`signal` must be a string");
        s += `,"signal":${JSON.stringify(ev.signal)}`;
      }
      if (ev.reason !== undefined) {
        if (typeof ev.reason !== "string") throw invalidEvent("`reason` must be a string");
        s += `,"reason":${JSON.stringify(ev.reason)}`;
      }
      return `${s}}`;
    }
    case "heartbeat": {
      const v = ev.value;
      if (typeof v !== "object" || v === null)
        throw invalidEvent("heartbeat `value` must be an object");
      return `${head}"heartbeat","value":{"pid":${finiteNumber(v.pid, "pid")},"elapsedMs":${finiteNumber(v.elapsedMs, "elapsedMs")},"lastOutputMs":${finiteNumber(v.lastOutputMs, "lastOutputMs")}}}`;
    }
    default:
      throw invalidEvent(`unknown name ${JSON.stringify((ev as { name: unknown }).name)}`);
  }
}

/** The canonical JSON text of an error frame, without the line end. */
export function errorFrameToJson(frame: ErrorFrame): string {
  if (typeof frame.code !== "string" || frame.code === "") {
    throw invalidEvent("error frame `code` must be a non-empty string");
  }
  let s = "{";
  if (frame.id !== undefined) s += `"id":${JSON.stringify(frame.id)},`;
  s += `"name":"error","code":${JSON.stringify(frame.code)},"message":${JSON.stringify(String(frame.message ?? ""))}`;
  if (frame.earliestSeq !== undefined) {
    if (!Number.isSafeInteger(frame.earliestSeq))
      throw invalidEvent("`earliestSeq` must be an integer");
    s += `,"earliestSeq":${frame.earliestSeq}`;
  }
  return `${s}}`;
}

/**
 * A producer's failure as its exec-wire line: `{"id"?,"name":"error","code",
 * "message","earliestSeq"?}` (id first when present, like every frame).
 */
export function encodeErrorFrame(frame: ErrorFrame): Uint8Array {
  return lineBytes(errorFrameToJson(frame));
}

/** One event as its canonical exec-wire line (UTF-8 JSON + "\n"). */
export function encodeExecEvent(ev: ExecEvent): Uint8Array {
  if (ev.name === "stdout" || ev.name === "stderr") {
    const out = encodeOutput(ev);
    if (out !== undefined) return out;
  }
  return lineBytes(frameToJson(ev));
}

// ---------------------------------------------------------------------------
// Text to line bytes

let scratch = new Uint8Array(64 * 1024);
let textSlab: NodeBuffer | undefined;
let textSlabUsed = 0;

/** UTF-8 bytes of `text` followed by "\n", as an exactly-sized array. */
function lineBytes(text: string): Uint8Array {
  const max = text.length * 3 + 1; // UTF-8 needs at most 3 bytes per UTF-16 unit
  if (NodeBuffer !== undefined) {
    if (max <= SLAB_BYTES / 4) {
      // Small frames: one native write into the slab, no allocation but the view.
      if (textSlab === undefined || textSlabUsed + max > SLAB_BYTES) {
        textSlab = NodeBuffer.alloc(SLAB_BYTES);
        textSlabUsed = 0;
      }
      const n = textSlab.write(text, textSlabUsed);
      textSlab[textSlabUsed + n] = 0x0a;
      const out = new Uint8Array(textSlab.buffer, textSlab.byteOffset + textSlabUsed, n + 1);
      textSlabUsed += n + 1;
      return out;
    }
    const n = NodeBuffer.byteLength(text);
    const big = NodeBuffer.allocUnsafeSlow(n + 1); // every byte is written below
    big.write(text, 0);
    big[n] = 0x0a;
    return new Uint8Array(big.buffer, big.byteOffset, n + 1);
  }
  if (scratch.length < max) scratch = new Uint8Array(Math.max(max, scratch.length * 2));
  const { written } = utf8.encodeInto(text, scratch);
  const out = scratch.slice(0, written + 1);
  out[written] = 0x0a;
  return out;
}

// ---------------------------------------------------------------------------
// Output frames written as bytes

const asciiBytes = (s: string): Uint8Array => Uint8Array.from(s, (c) => c.charCodeAt(0));
const E_OPEN = asciiBytes('{"id":');
const E_SEQ = asciiBytes(',"seq":');
const E_MIDDLE = {
  stdout: {
    utf8: asciiBytes(',"name":"stdout","enc":"utf8","value":'),
    b64: asciiBytes(',"name":"stdout","enc":"b64","value":"'),
  },
  stderr: {
    utf8: asciiBytes(',"name":"stderr","enc":"utf8","value":'),
    b64: asciiBytes(',"name":"stderr","enc":"b64","value":"'),
  },
};
const HEX = asciiBytes("0123456789abcdef");

// The UTF-8 of the last id's JSON text (a pure memo, only copied from).
let idBytesRaw: string | undefined;
let idBytes = new Uint8Array(0);
// A plain Uint8Array slab (not a Buffer): stores into it stay monomorphic.
let outputSlab: Uint8Array | undefined;
let outputSlabUsed = 0;

/** An exactly-sized array whose every byte the caller writes (unzeroed on Node). */
function allocExact(n: number): Uint8Array {
  return NodeBuffer !== undefined ? NodeBuffer.allocUnsafeSlow(n) : new Uint8Array(n);
}

function put(dst: Uint8Array, o: number, src: Uint8Array): number {
  for (let i = 0; i < src.length; i++) dst[o + i] = src[i]!;
  return o + src.length;
}

function putU(dst: Uint8Array, o: number, c: number): number {
  dst[o] = 0x5c;
  dst[o + 1] = 0x75;
  dst[o + 2] = HEX[c >>> 12]!;
  dst[o + 3] = HEX[(c >>> 8) & 15]!;
  dst[o + 4] = HEX[(c >>> 4) & 15]!;
  dst[o + 5] = HEX[c & 15]!;
  return o + 6;
}

/** Writes `JSON.stringify(s)` as UTF-8 at `o`; needs room for 6 bytes per unit + 2. */
function writeJsonString(dst: Uint8Array, o: number, s: string): number {
  dst[o++] = 0x22;
  const n = s.length;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) {
      if (c >= 0x20 && c !== 0x22 && c !== 0x5c) {
        dst[o++] = c;
        continue;
      }
      let e = 0;
      if (c === 0x22 || c === 0x5c) e = c;
      else if (c === 0x0a) e = 0x6e;
      else if (c === 0x0d) e = 0x72;
      else if (c === 0x09) e = 0x74;
      else if (c === 0x08) e = 0x62;
      else if (c === 0x0c) e = 0x66;
      if (e !== 0) {
        dst[o++] = 0x5c;
        dst[o++] = e;
      } else o = putU(dst, o, c);
    } else if (c < 0x800) {
      dst[o++] = 0xc0 | (c >>> 6);
      dst[o++] = 0x80 | (c & 63);
    } else if (c < 0xd800 || c > 0xdfff) {
      dst[o++] = 0xe0 | (c >>> 12);
      dst[o++] = 0x80 | ((c >>> 6) & 63);
      dst[o++] = 0x80 | (c & 63);
    } else {
      const d = i + 1 < n ? s.charCodeAt(i + 1) : 0;
      if (c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) {
        const cp = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        dst[o++] = 0xf0 | (cp >>> 18);
        dst[o++] = 0x80 | ((cp >>> 12) & 63);
        dst[o++] = 0x80 | ((cp >>> 6) & 63);
        dst[o++] = 0x80 | (cp & 63);
        i++;
      } else o = putU(dst, o, c); // a lone surrogate, escaped like JSON.stringify
    }
  }
  dst[o++] = 0x22;
  return o;
}

/**
 * An output event's line written directly as bytes, or undefined for a big
 * text frame (its size is unknown without a scan: lineBytes writes it).
 */
function encodeOutput(ev: OutputEvent): Uint8Array | undefined {
  checkHeader(ev);
  const v = ev.value;
  let b64: string | undefined;
  let room: number;
  if (typeof v === "string") room = v.length * 6 + 2;
  else if (v instanceof Uint8Array) {
    b64 = encodeBase64(v);
    room = b64.length + 1;
  } else throw invalidEvent("output `value` must be a string or a Uint8Array");
  if (ev.id !== idBytesRaw) {
    idBytes = utf8.encode(idJson(ev.id));
    idBytesRaw = ev.id;
  }
  // seq: a non-negative safe integer (checked above), in plain decimal.
  let digits = 1;
  for (let t = ev.seq; t >= 10; t = Math.floor(t / 10)) digits++;
  const middle = E_MIDDLE[ev.name][b64 === undefined ? "utf8" : "b64"];
  const head = E_OPEN.length + idBytes.length + E_SEQ.length + digits + middle.length;
  const max = head + room + 2;
  let dst: Uint8Array;
  let start = 0;
  const big = max > SLAB_BYTES / 4;
  if (big) {
    // Big binary frames have an exact size (`max`: the closing quote, `}`
    // and "\n"): one unzeroed buffer, every byte of it written below, the
    // base64 text copied in natively.
    if (b64 === undefined) return undefined;
    dst = allocExact(max);
  } else {
    if (outputSlab === undefined || outputSlabUsed + max > SLAB_BYTES) {
      outputSlab = new Uint8Array(SLAB_BYTES);
      outputSlabUsed = 0;
    }
    dst = outputSlab;
    start = outputSlabUsed;
  }
  let o = put(dst, start, E_OPEN);
  o = put(dst, o, idBytes);
  o = put(dst, o, E_SEQ);
  let seq = ev.seq;
  for (let k = o + digits - 1; k >= o; k--) {
    dst[k] = 0x30 + (seq % 10);
    seq = Math.floor(seq / 10);
  }
  o += digits;
  o = put(dst, o, middle);
  if (b64 === undefined) o = writeJsonString(dst, o, v as string);
  else {
    if (big && NodeBuffer !== undefined) o += (dst as NodeBuffer).write(b64, o, "latin1");
    else {
      for (let i = 0; i < b64.length; i++) dst[o + i] = b64.charCodeAt(i);
      o += b64.length;
    }
    dst[o++] = 0x22;
  }
  dst[o++] = 0x7d;
  dst[o++] = 0x0a;
  if (big) return new Uint8Array(dst.buffer, dst.byteOffset, o);
  outputSlabUsed = o;
  return new Uint8Array(dst.buffer, start, o - start);
}
