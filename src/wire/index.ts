// Public entry of `agent-computer/wire`: the byte-level codecs. Pure web
// standards (Uint8Array, TextDecoder, web streams): runs in Node, browsers,
// Deno, Bun and Workers.
export * from "./errors.js";
export type * from "./types.js";
