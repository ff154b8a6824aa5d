// Public entry of `agent-computer`: the in-process computer and shared types.

export type * from "./runtime/types.js";
export type * from "./store/types.js";
export * from "./wire/index.js";
