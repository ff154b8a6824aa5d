// Standard base64 (RFC 4648 §4, with padding) for exec-wire's `b64` frames.
//
// Why not `btoa(String.fromCharCode(...))`: that runs at ~14 MB/s, 100x slower
// than the platform's native codecs (measured, Node 20). We use, in order
// of preference, `Uint8Array.prototype.toBase64` / `Uint8Array.fromBase64`
// (the TC39 proposal, shipping in newer engines), Node's `Buffer` (found via
// `globalThis` so this module stays free of `node:` imports and runs in
// browsers and workers), and a portable table-driven codec.
//
// Decoding is strict: only the canonical encoding of some byte string is
// accepted (alphabet A-Z a-z 0-9 + /, length a multiple of 4, at most two
// `=` and only at the end, zero pad bits, no whitespace). Node's Buffer
// decoder is lenient (it skips unknown characters, accepts the URL-safe
// alphabet and truncates non-Latin-1 code units), so on that path we check the
// result by re-encoding it and comparing: exact, and still ~1.3 GB/s.

import { ComputerError } from "./errors.js";

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const PAD = 0x3d; // "="

interface NodeBufferLike {
  from(
    data: ArrayBufferLike,
    byteOffset: number,
    length: number,
  ): { toString(enc: string): string };
  from(data: string, enc: string): Uint8Array;
  byteLength(text: string, enc: string): number;
}
interface NativeFromBase64 {
  fromBase64(text: string, options?: { lastChunkHandling?: string }): Uint8Array;
}

const NodeBuffer = (globalThis as { Buffer?: NodeBufferLike }).Buffer;
const protoToBase64 = (Uint8Array.prototype as { toBase64?: (this: Uint8Array) => string })
  .toBase64;
const nativeFromBase64 = (Uint8Array as unknown as Partial<NativeFromBase64>).fromBase64;

/** Which implementation this platform uses (for benchmarks and diagnostics). */
export const base64Implementation: "native" | "buffer" | "portable" =
  typeof protoToBase64 === "function" && typeof nativeFromBase64 === "function"
    ? "native"
    : NodeBuffer !== undefined
      ? "buffer"
      : "portable";

function invalid(why: string): ComputerError {
  return new ComputerError("EINVAL", `invalid base64: ${why}`);
}

// ---- portable codec ------------------------------------------------------

const ENC = new Uint8Array(64);
const DEC = new Int16Array(256).fill(-1);
for (let i = 0; i < 64; i++) {
  const c = ALPHABET.charCodeAt(i);
  ENC[i] = c;
  DEC[c] = i;
}
// Base64 text is ASCII, so a (native) UTF-8 decode of its bytes is the string.
const asciiDecoder = new TextDecoder();

/** Portable encoder: table lookup into bytes, one native decode to a string. */
export function encodeBase64Portable(bytes: Uint8Array): string {
  const n = bytes.length;
  const out = new Uint8Array(Math.ceil(n / 3) * 4);
  let o = 0;
  let i = 0;
  for (const full = n - (n % 3); i < full; i += 3) {
    const v = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out[o++] = ENC[v >>> 18]!;
    out[o++] = ENC[(v >>> 12) & 63]!;
    out[o++] = ENC[(v >>> 6) & 63]!;
    out[o++] = ENC[v & 63]!;
  }
  const rest = n - i;
  if (rest === 1) {
    const v = bytes[i]!;
    out[o++] = ENC[v >>> 2]!;
    out[o++] = ENC[(v & 3) << 4]!;
    out[o++] = PAD;
    out[o++] = PAD;
  } else if (rest === 2) {
    const v = (bytes[i]! << 8) | bytes[i + 1]!;
    out[o++] = ENC[v >>> 10]!;
    out[o++] = ENC[(v >>> 4) & 63]!;
    out[o++] = ENC[(v & 15) << 2]!;
    out[o++] = PAD;
  }
  return asciiDecoder.decode(out);
}

/** Portable strict decoder (see the module comment for what "strict" means). */
export function decodeBase64Portable(text: string): Uint8Array {
  const len = text.length;
  if (len % 4 !== 0) throw invalid("length is not a multiple of 4");
  let pad = 0;
  if (len > 0 && text.charCodeAt(len - 1) === PAD) pad = text.charCodeAt(len - 2) === PAD ? 2 : 1;
  const out = new Uint8Array((len / 4) * 3 - pad);
  const body = len - (pad > 0 ? 4 : 0); // the last group is handled apart when padded
  let o = 0;
  for (let i = 0; i < body; i += 4) {
    const a = DEC[text.charCodeAt(i) & 0xff]!;
    const b = DEC[text.charCodeAt(i + 1) & 0xff]!;
    const c = DEC[text.charCodeAt(i + 2) & 0xff]!;
    const d = DEC[text.charCodeAt(i + 3) & 0xff]!;
    // charCodeAt > 0xff would alias after masking: check the high bits too.
    const hi =
      text.charCodeAt(i) | text.charCodeAt(i + 1) | text.charCodeAt(i + 2) | text.charCodeAt(i + 3);
    if ((a | b | c | d) < 0 || hi > 0xff) throw invalid(`bad character near offset ${i}`);
    const v = (a << 18) | (b << 12) | (c << 6) | d;
    out[o++] = v >>> 16;
    out[o++] = (v >>> 8) & 0xff;
    out[o++] = v & 0xff;
  }
  if (pad > 0) {
    const i = body;
    const c0 = text.charCodeAt(i);
    const c1 = text.charCodeAt(i + 1);
    const c2 = text.charCodeAt(i + 2);
    const a = c0 > 0xff ? -1 : DEC[c0]!;
    const b = c1 > 0xff ? -1 : DEC[c1]!;
    if (a < 0 || b < 0) throw invalid(`bad character near offset ${i}`);
    if (pad === 2) {
      if ((b & 15) !== 0) throw invalid("non-zero pad bits");
      out[o++] = (a << 2) | (b >>> 4);
    } else {
      const c = c2 > 0xff ? -1 : DEC[c2]!;
      if (c < 0) throw invalid(`bad character near offset ${i + 2}`);
      if ((c & 3) !== 0) throw invalid("non-zero pad bits");
      out[o++] = (a << 2) | (b >>> 4);
      out[o++] = ((b & 15) << 4) | (c >>> 2);
    }
  }
  return out;
}

// ---- platform selection --------------------------------------------------

/** Standard padded base64 of `bytes`. */
export const encodeBase64: (bytes: Uint8Array) => string =
  typeof protoToBase64 === "function"
    ? (bytes) => protoToBase64.call(bytes)
    : NodeBuffer !== undefined
      ? (bytes) =>
          NodeBuffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64")
      : encodeBase64Portable;

/**
 * Decodes strict standard base64; throws a `ComputerError` with code `EINVAL`
 * for anything that is not the canonical encoding of some bytes.
 */
export const decodeBase64: (text: string) => Uint8Array =
  typeof nativeFromBase64 === "function"
    ? (text) => {
        if (text.length % 4 !== 0) throw invalid("length is not a multiple of 4");
        let out: Uint8Array;
        try {
          out = nativeFromBase64.call(Uint8Array, text, { lastChunkHandling: "strict" });
        } catch {
          throw invalid("bad character or padding");
        }
        // fromBase64 skips ASCII whitespace even in strict mode: a shorter
        // result than the length implies means some was skipped.
        const pad = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
        if (out.length !== (text.length / 4) * 3 - pad) throw invalid("whitespace");
        return out;
      }
    : NodeBuffer !== undefined
      ? (text) =>
          // All-ASCII text (UTF-8 length = UTF-16 length, measured natively)
          // takes the checks of decodeBase64Ascii, ~2x faster than proving the
          // decode canonical by re-encoding it, which is what text with other
          // characters gets: Buffer reads a character above U+00FF by its low
          // byte ("\u0141" as "A"), so only re-encoding catches those.
          NodeBuffer.byteLength(text, "utf8") === text.length
            ? decodeAsciiNode(NodeBuffer, text)
            : decodeReencodeNode(NodeBuffer, text)
      : decodeBase64Portable;

function decodeReencodeNode(B: NodeBufferLike, text: string): Uint8Array {
  if (text.length % 4 !== 0) throw invalid("length is not a multiple of 4");
  const out = B.from(text, "base64");
  const canonical = B.from(out.buffer, out.byteOffset, out.byteLength).toString("base64");
  if (canonical !== text) throw invalid("bad character or padding");
  // A plain Uint8Array view: Buffer's `slice` shares memory where
  // Uint8Array's copies, a trap for callers expecting the standard type.
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

/**
 * Strict decoding with Buffer's lenient decoder, for text whose every
 * character is ASCII or U+FFFD: instead of re-encoding to prove the input
 * canonical, it checks what that decoder could have glossed over. On such
 * input it skips characters outside its alphabet (so fewer bytes come out
 * than the length implies), stops at a "=" (same), and reads "-" and "_" as
 * 62 and 63 (checked apart); U+FFFD maps to no letter (skipped). Pad bits are
 * checked here. A property test holds this equal to the portable decoder.
 */
function decodeAsciiNode(B: NodeBufferLike, text: string): Uint8Array {
  const len = text.length;
  if (len % 4 !== 0) throw invalid("length is not a multiple of 4");
  let pad = 0;
  if (len > 0 && text.charCodeAt(len - 1) === PAD) {
    pad = text.charCodeAt(len - 2) === PAD ? 2 : 1;
    const last = DEC[text.charCodeAt(len - 1 - pad) & 0xff]!;
    if (last < 0 || (pad === 2 ? last & 15 : last & 3) !== 0) {
      throw invalid("bad character or non-zero pad bits");
    }
  }
  const out = B.from(text, "base64");
  if (out.length !== (len / 4) * 3 - pad || text.indexOf("-") !== -1 || text.indexOf("_") !== -1) {
    throw invalid("bad character or padding");
  }
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

/**
 * Decodes the strict base64 held as bytes in `b[start, end)`, without first
 * decoding a whole line of them as UTF-8 (the exec-wire decoder's byte fast
 * path, for large `b64` frames). Only where Node's Buffer can make the bytes a
 * latin1 string in one copy; undefined elsewhere (callers take the text path).
 * Bytes 0x80-0xFF become characters Buffer's decoder skips like any other
 * non-alphabet character, which the length check of decodeBase64Ascii catches
 * (a property test holds the byte path equal to the text path).
 */
export const decodeBase64Bytes:
  | ((b: Uint8Array, start: number, end: number) => Uint8Array)
  | undefined =
  NodeBuffer === undefined
    ? undefined
    : (b, start, end) =>
        decodeBase64Ascii(
          NodeBuffer.from(b.buffer, b.byteOffset + start, end - start).toString("latin1"),
        );

/**
 * `decodeBase64` for text whose every character is ASCII or U+FFFD (the
 * caller knows: e.g. text decoded from as many bytes as it has characters):
 * same result and errors, without decodeBase64's check for other characters.
 */
export const decodeBase64Ascii: (text: string) => Uint8Array =
  NodeBuffer === undefined || typeof nativeFromBase64 === "function"
    ? decodeBase64
    : (text) => decodeAsciiNode(NodeBuffer, text);
