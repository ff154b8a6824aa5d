// HTTP routes for cluster mode, mounted by `serve` when it runs as a node:
// GET /v1/cluster/nodes lists the nodes (id, alive, running count, advertised
// URL) so a client can find the node that owns an execution (its record's
// `node`) and talk to that node directly for node-local things: workspace
// files and A@UI relay channels (docs/operations.md, "Pinning to a node").
// Authenticated like every other /v1 route.

import { sendJson } from "../server/http/errors.js";
import type { Router } from "../server/http/router.js";
import type { ClusterNode } from "./node.js";

export function registerClusterRoutes(router: Router, cluster: ClusterNode): void {
  router.get("/v1/cluster/nodes", async (_req, res) => {
    sendJson(res, 200, { self: cluster.nodeId, nodes: await cluster.nodes() });
  });
}
