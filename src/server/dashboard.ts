// The dashboard at `/`: mounts the page's routes and starts the driver that
// feeds it (dashboard-driver.ts). The page is an A@UI app (its browser code
// is src/server/dashboard/app.ts, built by `npm run build` and served as
// static files by dashboard-assets.ts); see docs/ui.md.
//
// The HTML shell and the assets are public: they hold no data, and every data
// route needs the token. `/?token=` sets the HttpOnly cookie and redirects to
// `/`, so the token leaves the address bar. The shell is generated here, not
// a static file, because it carries the server's explanation when something
// is wrong (a bad token, a missing build) even before any script runs.

import type { ServerResponse } from "node:http";
import type { ComputerApi } from "../runtime/types.js";
import { APP_MODULE, assetsBuilt, serveAsset } from "./dashboard-assets.js";
import { type Dashboard, DashboardDriver } from "./dashboard-driver.js";
import type { Router } from "./http/router.js";
import type { UiRelay } from "./relay/registry.js";

export type { Dashboard } from "./dashboard-driver.js";

export interface DashboardDeps {
  computer: ComputerApi;
  /** The server's relay (the one registerUiRoutes mounted on this router) to publish on. */
  relay: UiRelay;
  /** Terminals shown for the newest executions (default 12). */
  maxTerminals?: number;
  /** Rows in the execution table (default 200). */
  maxRows?: number;
  /** Safety-net sweep interval (default 1000 ms). */
  sweepMs?: number;
}

const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  // xterm.js positions its rows with inline styles
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join("; ");

function sendPage(res: ServerResponse, status: number, message: string | null) {
  const body = page(message);
  res.statusCode = status;
  res.setHeader("content-type", "text/html; charset=utf-8");
  res.setHeader("cache-control", "no-store");
  res.setHeader("x-content-type-options", "nosniff");
  res.setHeader("content-length", Buffer.byteLength(body));
  res.end(body);
}

/** The shell the page's code fills; `message` (trusted HTML) shows in the notice bar. */
function page(message: string | null): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agent-computer</title>
<link rel="stylesheet" href="/assets/xterm.css">
<link rel="stylesheet" href="/assets/lib/server/dashboard/app.css">
<script src="/assets/xterm.js" defer></script>
<script src="/assets/addon-fit.js" defer></script>
<script type="module" src="/assets/lib/${APP_MODULE}"></script>
</head>
<body>
<header class="top">
  <div class="brand"><span class="logo">▮</span> agent-computer</div>
  <div class="conn" id="conn" data-state="connecting"><span class="dot"></span><span id="conn-text">connecting…</span></div>
</header>
<div id="confinement" class="confinement" hidden></div>
<div id="notice" class="notice" ${message ? "" : "hidden"}>${message ?? ""}</div>
<main id="app" aria-live="polite"></main>
</body>
</html>`;
}

/** Mounts `/` and `/assets/*` and starts the driver. */
export function registerDashboard(router: Router, deps: DashboardDeps): Dashboard {
  const driver = new DashboardDriver(deps.computer, deps.relay, {
    maxTerminals: deps.maxTerminals ?? 12,
    maxRows: deps.maxRows ?? 200,
    sweepMs: deps.sweepMs ?? 1000,
  });

  router.get(
    "/",
    async (req, res, _params, ctx) => {
      res.setHeader("content-security-policy", CSP);
      res.setHeader("referrer-policy", "no-referrer");
      if (ctx.url.searchParams.has("token")) {
        try {
          const r = router.auth.check(req, ctx.url);
          if (r.setCookie) res.setHeader("set-cookie", r.setCookie);
          // Keep the transport choice (tests, bench), drop the token from the address bar.
          const rest = new URLSearchParams(ctx.url.searchParams);
          rest.delete("token");
          const qs = rest.toString();
          res.statusCode = 303;
          res.setHeader("location", qs ? `/?${qs}` : "/");
          res.end();
        } catch {
          sendPage(
            res,
            401,
            "This link's token is not valid for this server. Open the URL that <code>agent-computer serve</code> printed.",
          );
        }
        return;
      }
      if (!(await assetsBuilt())) {
        sendPage(
          res,
          503,
          "The dashboard's browser code is not built. Run <code>npm run build</code> and reload.",
        );
        return;
      }
      sendPage(res, 200, null);
    },
    { public: true },
  );

  router.get("/assets/*", (req, res, params) => serveAsset(req, res, params["*"] ?? ""), {
    public: true,
  });

  return driver;
}
