// Cluster mode: many agent-computer nodes sharing one Redis (event logs,
// liveness, control routing). See docs/operations.md for how to run it.
export { ControlChannel, type ControlHandler, type ControlOp } from "./control.js";
export { type LivenessOptions, type NodeInfo, NodeLiveness } from "./liveness.js";
export {
  ClusterNode,
  type ClusterNodeOptions,
  type LocalComputer,
  type RemoteControl,
} from "./node.js";
export { registerClusterRoutes } from "./routes.js";
export {
  defaultNodeId,
  openServeCluster,
  type ServeCluster,
  type ServeClusterOptions,
} from "./serve.js";
