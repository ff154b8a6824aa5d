// The server's own routes: GET /healthz (open, for load balancers and
// supervisors: 200 `{"ok": true}`; 503 `{"ok": false, "reason"}` once
// shutdown began or while the event-log backend is unreachable), GET /metrics
// (Prometheus text, behind the token like every other route) and GET /v1/info
// (what this node is and enforces; registered by whoever composes the node,
// since the server itself knows nothing of the sandbox).

import type { ServerDeps } from "../deps.js";
import { sendJson } from "../http/errors.js";
import type { Router } from "../http/router.js";

export function registerMetaRoutes(router: Router, deps: ServerDeps): void {
  router.get(
    "/healthz",
    async (_req, res) => {
      if (deps.isClosing()) {
        sendJson(res, 503, { ok: false, reason: "the server is shutting down" });
        return;
      }
      const h = (await deps.computer.health?.(0)) ?? { ok: true };
      if (h.ok) sendJson(res, 200, { ok: true });
      else sendJson(res, 503, { ok: false, reason: `the event log is unavailable: ${h.reason}` });
    },
    { public: true },
  );
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
