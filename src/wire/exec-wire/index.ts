// exec-wire: a command's events as JSON lines (docs/protocol.md §1). The
// codec in four parts: encode.ts (event -> canonical line), decode.ts (one
// line -> event, the canonical-shape scanner and the JSON.parse authority),
// decoder.ts (the push decoder: chunks split anywhere -> events) and
// stream.ts (both as web streams).

export { DEFAULT_MAX_LINE_BYTES } from "../lines.js";
export { decodeExecFrame, type ExecWireDecodeOptions, ExecWireError } from "./decode.js";
export { ExecWireDecoder } from "./decoder.js";
export { encodeErrorFrame, encodeExecEvent, errorFrameToJson, frameToJson } from "./encode.js";
export { decodeExecEvents, encodeExecEvents, type IterableStream } from "./stream.js";
