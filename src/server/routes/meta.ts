// The server's own routes: GET /healthz (open, for load balancers and
// supervisors: `{"ok": false}` once shutdown began), GET /metrics
// (Prometheus text, behind the token like every other route) and GET /v1/info
// (what this node is and enforces; registered by whoever composes the node,
// since the server itself knows nothing of the sandbox).

import type { ServerDeps } from "../deps.js";
import { sendJson } from "../http/errors.js";
import type { Router } from "../http/router.js";

export function registerMetaRoutes(router: Router, deps: ServerDeps): void {
  router.get("/healthz", (_req, res) => sendJson(res, 200, { ok: !deps.isClosing() }), {
    public: true,
  });
  router.get("/metrics", async (_req, res) => {
    const text = await deps.metrics.registry.metrics();
    res.statusCode = 200;
    res.setHeader("content-type", deps.metrics.registry.contentType);
    res.end(text);
  });
}

/** GET /v1/info: a JSON description of the node (confinement, network, limits), behind the token. */
export function registerInfoRoute(router: Router, info: () => Record<string, unknown>): void {
  router.get("/v1/info", (_req, res) => sendJson(res, 200, info()));
}
