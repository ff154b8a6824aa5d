// Public entry of `agent-computer/wire`: the byte-level codecs. Pure web
// standards (Uint8Array, TextDecoder, web streams): runs in Node, browsers,
// Deno, Bun and Workers.

export {
  base64Implementation,
  decodeBase64,
  encodeBase64,
} from "./base64.js";
export * from "./errors.js";
export {
  decodeExecEvents,
  decodeExecFrame,
  type ExecWireDecodeOptions,
  ExecWireDecoder,
  ExecWireError,
  encodeErrorFrame,
  encodeExecEvent,
  encodeExecEvents,
  errorFrameToJson,
  frameToJson,
  type IterableStream,
} from "./exec-wire/index.js";
export {
  DEFAULT_MAX_LINE_BYTES,
  excerptOf,
  PendingBytes,
  WireLineError,
} from "./lines.js";
export {
  createSseParser,
  formatSseComment,
  formatSseEvent,
  type SseEvent,
  type SseEventInit,
  type SseParser,
  type SseParserOptions,
  SseParserStream,
} from "./sse.js";
export type * from "./types.js";
export {
  type Alloc,
  BINARY_SUBPROTOCOL,
  type BinaryDecodeOptions,
  BinaryFrameError,
  decodeBinaryMessage,
  encodeBinaryMessage,
  encodeBinaryRecord,
  encodeBinaryRecordHeader,
  RECORD_HEADER_BYTES,
  RECORD_KIND,
} from "./ws-binary.js";
