// The dashboard at `/`: an A@UI app driven by the server over its own relay.
//
// - The page (src/server/dashboard/app.ts) is a widget runtime plus four
//   components (RunForm, ExecTable, Terminal, Notice); it renders nothing on
//   its own. A server-side driver here publishes render/update/destroy to the
//   `dashboard` channel from the computer's state (observer hooks for
//   promptness, a 1 s `list()` sweep while a page is connected as the safety
//   net), and turns the UI
//   events pages send back (`Terminal:kill`, `ExecTable:kill`, `RunForm:run`)
//   into kills and execs. Any number of pages, opened at any time, show the
//   same state: the relay replays the channel's compacted state.
// - Widget addressing: the driver keeps the `widgetId` the relay returns for
//   each render (`w<cursor>`, what relay pages mint), so it can update and
//   destroy without waiting for a page (docs/ui.md).
// - Terminal output does not go through the relay: each Terminal widget reads
//   its execution's own SSE stream (`/v1/execs/:id/events`), which is already
//   a bounded, resumable log; copying bytes into A@UI params would store them
//   twice and fight shallow-merge semantics.
// - Serving: the HTML shell and the JavaScript are public (they hold no data;
//   every data route needs the token). `/?token=` sets the HttpOnly cookie and
//   redirects to `/`, so the token leaves the address bar. The browser modules
//   are the package's own compiled files (dist/aui, dist/wire,
//   dist/server/dashboard), served from the package folder at runtime; when
//   running from source (tests), the .ts file is transpiled on request with
//   the TypeScript compiler (a dev dependency), so no build step is needed.

import { existsSync, readFileSync, statSync } from "node:fs";
import type { ServerResponse } from "node:http";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ComputerApi, ExecRecord } from "../runtime/types.js";
import { ComputerError } from "../wire/errors.js";
import type { Router } from "./http/router.js";
import { type LoggedUiEvent, registerUiRoutes, relayOf, type UiRelay } from "./ui-relay.js";

export const DASHBOARD_CHANNEL = "dashboard";

export interface DashboardDeps {
  computer: ComputerApi;
  /** The relay to publish on (default: the one registerUiRoutes mounted on this router). */
  relay?: UiRelay;
  /** Terminals shown for the newest executions (default 12). */
  maxTerminals?: number;
  /** Rows in the execution table (default 200). */
  maxRows?: number;
  /** Safety-net sweep interval (default 1000 ms). */
  sweepMs?: number;
}

export interface Dashboard {
  /** Observer hooks: call from the computer's observer so the page updates at once. */
  started(rec: ExecRecord): void;
  finished(rec: ExecRecord): void;
  /** Re-reads the computer and publishes what changed (coalesced). */
  refresh(): Promise<void>;
  close(): void;
}

interface Row {
  id: string;
  command: string;
  state: string;
  exitCode: number | null;
  signal: string | null;
  startedAt: number;
  endedAt: number | null;
}

function toRow(rec: ExecRecord): Row {
  return {
    id: rec.id,
    command: Array.isArray(rec.command) ? rec.command.join(" ") : rec.command,
    state: rec.state,
    exitCode: rec.exitCode ?? null,
    signal: rec.signal ?? null,
    startedAt: rec.startedAt,
    endedAt: rec.endedAt ?? null,
  };
}

/** Publishes the dashboard from the computer's state and acts on the page's events. */
export class DashboardDriver implements Dashboard {
  private readonly channel;
  private formId: string | undefined;
  private tableId: string | undefined;
  private tableJson = "";
  private readonly terminals = new Map<string, { widgetId: string; json: string }>();
  private running: Promise<void> | undefined;
  private again = false;
  private readonly timer: ReturnType<typeof setInterval>;
  private readonly unsubscribe: () => void;
  private closed = false;

  constructor(
    private readonly computer: ComputerApi,
    relay: UiRelay,
    private readonly opts: { maxTerminals: number; maxRows: number; sweepMs: number },
  ) {
    relay.deleteChannel(DASHBOARD_CHANNEL); // a fresh driver owns the channel
    this.channel = relay.channel(DASHBOARD_CHANNEL);
    this.formId = this.channel.publish({
      type: "render",
      component: "RunForm",
      params: { error: null, pending: false },
    }).widgetId;
    this.tableId = this.channel.publish({
      type: "render",
      component: "ExecTable",
      params: { rows: [] },
    }).widgetId;
    this.unsubscribe = this.channel.onEvent((ev) => void this.onEvent(ev));
    // The sweep runs only while a page is watching: hooks keep the state current
    // otherwise, and a list() per second on a shared (Redis) log is not free.
    this.timer = setInterval(() => {
      if (this.channel.subscriberCount > 0) void this.refresh();
    }, opts.sweepMs);
    this.timer.unref?.();
    void this.refresh();
  }

  started(): void {
    void this.refresh();
  }

  finished(): void {
    void this.refresh();
  }

  /** One sync at a time; calls during a sync coalesce into one more. */
  refresh(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          await this.sync();
        } while (this.again && !this.closed);
      } catch (err) {
        if (!this.closed)
          console.error(JSON.stringify({ msg: "dashboard sync failed", error: String(err) }));
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }

  private publish(command: unknown): string | undefined {
    if (this.closed || this.channel.closed) return undefined;
    return this.channel.publish(command).widgetId;
  }

  private async sync(): Promise<void> {
    const records = await this.computer.list();
    if (this.closed) return;
    const rows = records
      .map(toRow)
      .sort((a, b) => b.startedAt - a.startedAt || (a.id < b.id ? 1 : -1));
    const shownRows = rows.slice(0, this.opts.maxRows);
    const tableJson = JSON.stringify(shownRows);
    if (tableJson !== this.tableJson && this.tableId) {
      this.tableJson = tableJson;
      this.publish({
        type: "update",
        widgetId: this.tableId,
        params: { rows: shownRows, total: rows.length },
      });
    }
    const wanted = new Map(rows.slice(0, this.opts.maxTerminals).map((r) => [r.id, r]));
    for (const [id, t] of this.terminals) {
      if (!wanted.has(id)) {
        this.publish({ type: "destroy", widgetId: t.widgetId });
        this.terminals.delete(id);
      }
    }
    // Oldest first, so render order (and so page order) matches start order.
    for (const row of [...wanted.values()].reverse()) {
      const params = { ...row, execId: row.id };
      const json = JSON.stringify(params);
      const t = this.terminals.get(row.id);
      if (!t) {
        const widgetId = this.publish({ type: "render", component: "Terminal", params });
        if (widgetId) this.terminals.set(row.id, { widgetId, json });
      } else if (t.json !== json) {
        t.json = json;
        this.publish({ type: "update", widgetId: t.widgetId, params });
      }
    }
  }

  private async onEvent(ev: LoggedUiEvent): Promise<void> {
    const payload = (ev.payload ?? {}) as Record<string, unknown>;
    try {
      if (ev.type === "Terminal:kill" || ev.type === "ExecTable:kill") {
        if (typeof payload.id !== "string") return;
        await this.computer.kill(
          payload.id,
          typeof payload.signal === "string" ? payload.signal : "SIGTERM",
        );
      } else if (ev.type === "RunForm:run") {
        const command = payload.command;
        if (typeof command !== "string" || command.trim() === "") {
          this.formError("Type a command to run.");
          return;
        }
        if (this.formId)
          this.publish({
            type: "update",
            widgetId: this.formId,
            params: { pending: true, error: null },
          });
        try {
          await this.computer.exec(command);
          if (this.formId)
            this.publish({
              type: "update",
              widgetId: this.formId,
              params: { pending: false, error: null, lastRun: command },
            });
        } catch (err) {
          this.formError(`Could not start: ${(err as Error).message}`);
        }
      } else {
        return;
      }
    } catch (err) {
      if ((err as { code?: string }).code !== "ENOENT")
        console.error(
          JSON.stringify({ msg: "dashboard action failed", type: ev.type, error: String(err) }),
        );
    }
    await this.refresh();
  }

  private formError(message: string) {
    if (this.formId)
      this.publish({
        type: "update",
        widgetId: this.formId,
        params: { pending: false, error: message },
      });
  }

  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    this.unsubscribe();
  }
}

// ---- static assets ----

const here = dirname(fileURLToPath(import.meta.url));
/** src/ or dist/: the folder holding aui/, wire/ and server/. */
const codeRoot = join(here, "..");
const requireHere = createRequire(import.meta.url);

function xtermFile(rel: string): string {
  return join(dirname(requireHere.resolve("@xterm/xterm/package.json")), rel);
}

const LIB_RE = /^(aui|wire|server\/dashboard)\/[a-z0-9-]+\.js(\.map)?$/;
const transpiled = new Map<string, { mtimeMs: number; code: string }>();

/** The browser module for `rel` (e.g. "aui/runtime.js"): the compiled file, or the .ts transpiled. */
async function libModule(rel: string): Promise<string> {
  if (!LIB_RE.test(rel)) throw new ComputerError("ENOENT", "no such asset");
  const js = join(codeRoot, rel);
  if (existsSync(js)) return readFileSync(js, "utf8");
  const ts = js.replace(/\.js$/, ".ts");
  if (rel.endsWith(".map"))
    throw new ComputerError("ENOENT", "no source map when running from source");
  if (!existsSync(ts)) throw new ComputerError("ENOENT", "no such asset");
  const mtimeMs = statSync(ts).mtimeMs;
  const cached = transpiled.get(ts);
  if (cached && cached.mtimeMs === mtimeMs) return cached.code;
  const tsc = (await import("typescript")).default;
  const out = tsc.transpileModule(readFileSync(ts, "utf8"), {
    compilerOptions: {
      target: tsc.ScriptTarget.ES2022,
      module: tsc.ModuleKind.ESNext,
      sourceMap: false,
    },
    fileName: ts,
  });
  transpiled.set(ts, { mtimeMs, code: out.outputText });
  return out.outputText;
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

function send(
  res: ServerResponse,
  status: number,
  type: string,
  body: string | Buffer,
  cache = "no-store",
) {
  res.statusCode = status;
  res.setHeader("content-type", type);
  res.setHeader("cache-control", cache);
  res.setHeader("x-content-type-options", "nosniff");
  res.setHeader("content-length", Buffer.byteLength(body));
  res.end(body);
}

function page(message: string | null): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agent-computer</title>
<link rel="stylesheet" href="/assets/xterm.css">
<link rel="stylesheet" href="/assets/dashboard.css">
<script src="/assets/xterm.js" defer></script>
<script type="module" src="/assets/lib/server/dashboard/app.js"></script>
</head>
<body>
<header class="top">
  <div class="brand"><span class="logo">▮</span> agent-computer</div>
  <div class="conn" id="conn" data-state="connecting"><span class="dot"></span><span id="conn-text">connecting…</span></div>
</header>
<div id="notice" class="notice" ${message ? "" : "hidden"}>${message ?? ""}</div>
<main id="app" aria-live="polite"></main>
</body>
</html>`;
}

/** Mounts `/` and `/assets/*` and starts the driver. */
export function registerDashboard(router: Router, deps: DashboardDeps): Dashboard {
  const relay = deps.relay ?? relayOf(router) ?? registerUiRoutes(router);
  const driver = new DashboardDriver(deps.computer, relay, {
    maxTerminals: deps.maxTerminals ?? 12,
    maxRows: deps.maxRows ?? 200,
    sweepMs: deps.sweepMs ?? 1000,
  });

  router.get(
    "/",
    (req, res, _params, ctx) => {
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
          send(
            res,
            401,
            "text/html; charset=utf-8",
            page(
              "This link's token is not valid for this server. Open the URL that <code>agent-computer serve</code> printed.",
            ),
          );
        }
        return;
      }
      send(res, 200, "text/html; charset=utf-8", page(null));
    },
    { public: true },
  );

  router.get(
    "/assets/*",
    async (_req, res, params) => {
      const rel = params["*"] ?? "";
      if (rel === "xterm.js")
        return send(
          res,
          200,
          "text/javascript; charset=utf-8",
          readFileSync(xtermFile("lib/xterm.js")),
          "public, max-age=3600",
        );
      if (rel === "xterm.css")
        return send(
          res,
          200,
          "text/css; charset=utf-8",
          readFileSync(xtermFile("css/xterm.css")),
          "public, max-age=3600",
        );
      if (rel === "dashboard.css") return send(res, 200, "text/css; charset=utf-8", DASHBOARD_CSS);
      if (rel.startsWith("lib/"))
        return send(res, 200, "text/javascript; charset=utf-8", await libModule(rel.slice(4)));
      throw new ComputerError("ENOENT", "no such asset");
    },
    { public: true },
  );

  return driver;
}

const DASHBOARD_CSS = `
:root {
  --bg: #f6f7f9; --panel: #fff; --ink: #1d2330; --muted: #6b7385; --line: #e3e6ec;
  --accent: #2f6fed; --ok: #1f9d55; --bad: #d64545; --warn: #c98a0b; --term: #14171f;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); }
code, .mono { font-family: ui-monospace, "SF Mono", Menlo, Consolas, monospace; }
.top { display: flex; align-items: center; justify-content: space-between; padding: 12px 24px;
  background: var(--panel); border-bottom: 1px solid var(--line); position: sticky; top: 0; z-index: 5; }
.brand { font-weight: 650; letter-spacing: .2px; font-size: 15px; }
.logo { color: var(--accent); }
.conn { display: flex; gap: 8px; align-items: center; color: var(--muted); font-size: 13px; }
.conn .dot { width: 8px; height: 8px; border-radius: 50%; background: var(--warn); }
.conn[data-state=open] .dot { background: var(--ok); }
.conn[data-state=unauthorized] .dot, .conn[data-state=closed] .dot { background: var(--bad); }
.notice { margin: 16px 24px 0; padding: 12px 16px; border-radius: 8px; background: #fff4e5;
  border: 1px solid #f3d19c; color: #6b4a00; }
.notice.error { background: #fdecec; border-color: #f2b8b8; color: #8a1f1f; }
.notice[hidden] { display: none; }
#app { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 16px; padding: 16px 24px 32px; }
#app > [data-component=RunForm], #app > [data-component=ExecTable] { grid-column: 1 / -1; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; overflow: hidden; }
.card h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .6px; color: var(--muted); margin: 0 0 10px; font-weight: 600; }
.runform { padding: 14px 16px; }
.runform form { display: flex; gap: 10px; }
.runform input { flex: 1; padding: 9px 12px; border: 1px solid var(--line); border-radius: 7px; font: 14px ui-monospace, Menlo, monospace; }
.runform input:focus { outline: 2px solid color-mix(in srgb, var(--accent) 35%, transparent); border-color: var(--accent); }
button { font: inherit; border-radius: 7px; border: 1px solid var(--line); background: var(--panel); padding: 7px 14px; cursor: pointer; }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; font-weight: 600; }
button.danger { color: var(--bad); border-color: #f0c4c4; padding: 3px 10px; font-size: 12px; }
button.danger:hover { background: #fdecec; }
button:disabled { opacity: .5; cursor: default; }
.runform .err { color: var(--bad); margin-top: 8px; font-size: 13px; }
.table { padding: 14px 16px 6px; }
table { width: 100%; border-collapse: collapse; font-size: 13px; }
th { text-align: left; color: var(--muted); font-weight: 500; padding: 6px 8px; border-bottom: 1px solid var(--line); }
td { padding: 7px 8px; border-bottom: 1px solid var(--line); vertical-align: middle; }
tr:last-child td { border-bottom: 0; }
td.cmd { max-width: 420px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
tr.row { cursor: pointer; } tr.row:hover { background: #f9fafb; }
.empty { color: var(--muted); padding: 10px 8px 14px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 600; }
.badge.running { background: #e6efff; color: var(--accent); }
.badge.exited { background: #e7f6ed; color: var(--ok); }
.badge.exited.fail { background: #fdecec; color: var(--bad); }
.badge.killed, .badge.timeout, .badge.lost { background: #fdecec; color: var(--bad); }
.term-head { display: flex; align-items: center; gap: 10px; padding: 9px 12px; border-bottom: 1px solid var(--line); }
.term-head .cmd { flex: 1; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; font-weight: 600; }
.term-head .meta { color: var(--muted); font-size: 12px; white-space: nowrap; }
.term-body { background: var(--term); padding: 8px 0 8px 10px; }
.term-body .xterm-viewport { background-color: var(--term) !important; }
`;
