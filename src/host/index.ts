// Public entry of `agent-computer/host`: run a whole node (server, computer,
// event log, cluster membership) from your own process with one call — the
// same composition `agent-computer serve` runs.

export {
  type ConfinementInfo,
  type ConfineOptions,
  parseNetwork,
} from "./confine.js";
export * from "./defaults.js";
export { type NodeOptions, type RunningNode, startNode } from "./start-node.js";
