// The sandbox's entry point for the runtime and the CLI: create a sandbox for
// a server, prepare each execution through it, probe the host for `doctor`.
// Nothing here builds on the runtime or the server; they build on it.

export { startEgressProxy } from "./egress-proxy.js";
export { builtInMaxima, DEFAULT_LIMITS } from "./limits.js";
export { allowed, checkPolicy, describe as describeNetwork, narrowPolicy } from "./network.js";
export { probeHost } from "./probe.js";
export { createSandbox, verdictOf } from "./sandbox.js";
export type * from "./types.js";
