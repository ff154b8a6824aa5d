// Public entry of `agent-computer`: the in-process computer and shared types.

export {
  Computer,
  type ComputerObserver,
  type ComputerOptions,
  type RemoteControl,
} from "./runtime/computer.js";
export { defaultBaseEnv } from "./runtime/exec-spec.js";
export { resolveInWorkspace } from "./runtime/paths.js";
export type * from "./runtime/types.js";
export { MemoryEventLog } from "./store/memory-log.js";
export { type EventLogSpec, openEventLog } from "./store/open-log.js";
export type * from "./store/types.js";
export * from "./wire/index.js";
