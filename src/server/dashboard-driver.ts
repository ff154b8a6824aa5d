// The dashboard's server half: publishes the computer's state to the
// `dashboard` relay channel and turns the UI events pages send back into
// kills and execs. The page renders nothing on its own (its code is
// src/server/dashboard/app.ts), so every page, opened at any time, shows the
// same state: the relay replays the channel's compacted state.
//
// - Promptness comes from the computer's observer hooks (`started`/`finished`);
//   a `list()` sweep (1 s by default) while a page is connected is the safety
//   net, and also catches executions started on other cluster nodes.
// - Widget addressing: the driver keeps the `widgetId` the relay returns for
//   each render (`w<cursor>`, what relay pages mint), so it can update and
//   destroy without waiting for a page (docs/ui.md).
// - Terminal output does not go through the relay: each Terminal widget reads
//   its execution's own event stream, which is already a bounded, resumable
//   log; copying bytes into A@UI params would store them twice and fight
//   shallow-merge semantics.

import type { ComputerApi, ExecRecord } from "../runtime/types.js";
import type { LoggedUiEvent } from "./relay/channel.js";
import type { UiRelay } from "./relay/registry.js";

const DASHBOARD_CHANNEL = "dashboard";
/** Least time between two syncs triggered by starts and exits. */
const SYNC_GAP_MS = 100;

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
  /** Runs on a pseudo-terminal: its Terminal widget is interactive. */
  pty: boolean;
}

/** What "New terminal" runs: the server's login shell, interactive, on a pty. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion, not a template
const SHELL_COMMAND = 'exec "${SHELL:-/bin/sh}" -i';
/** The pty's size until the page's terminal fits it to its pane. */
const INITIAL_PTY = { cols: 100, rows: 24 };

function toRow(rec: ExecRecord): Row {
  return {
    id: rec.id,
    command: Array.isArray(rec.command) ? rec.command.join(" ") : rec.command,
    state: rec.state,
    exitCode: rec.exitCode ?? null,
    signal: rec.signal ?? null,
    startedAt: rec.startedAt,
    endedAt: rec.endedAt ?? null,
    pty: rec.pty !== undefined,
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
  private soonTimer: ReturnType<typeof setTimeout> | undefined;
  private lastSyncAt = 0;
  /** Run requests from the form so far (the latest one's outcome is shown). */
  private formRuns = 0;
  private readonly timer: ReturnType<typeof setInterval>;
  private readonly unsubscribe: () => void;
  private readonly unwatched: () => void;
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
    // Syncs run only while a page is watching (a list() per second, or per
    // start and exit, is not free, on a shared Redis log least of all); a
    // page that starts watching gets one at once.
    this.unwatched = this.channel.onWatched(() => this.soon());
    this.timer = setInterval(() => {
      if (this.channel.watched) void this.refresh();
    }, opts.sweepMs);
    this.timer.unref?.();
    void this.refresh();
  }

  started(): void {
    this.soon();
  }

  finished(): void {
    this.soon();
  }

  /**
   * A sync after a start or an exit, at most one per SYNC_GAP_MS, while a
   * page watches: each sync lists every execution, so one per event cost the
   * server a list per execution under a burst of short commands (a fifth of
   * its CPU at 70 execs/s); a page sees the change at most that much later.
   */
  private soon(): void {
    if (this.closed || this.soonTimer) return;
    // Nobody watching: the sweep catches up within sweepMs once a page
    // subscribes (a list per start and exit cost ~10% of the server's CPU
    // under a stream of short commands with no page open).
    if (!this.channel.watched) return;
    const wait = Math.max(0, this.lastSyncAt + SYNC_GAP_MS - Date.now());
    this.soonTimer = setTimeout(() => {
      this.soonTimer = undefined;
      void this.refresh();
    }, wait);
    this.soonTimer.unref?.();
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
          this.lastSyncAt = Date.now();
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
      } else if (ev.type === "RunForm:terminal") {
        try {
          await this.computer.exec(SHELL_COMMAND, { pty: INITIAL_PTY });
        } catch (err) {
          this.formError(`Could not open a terminal: ${(err as Error).message}`);
        }
      } else if (ev.type === "RunForm:run") {
        const command = payload.command;
        // The form shows the latest run request's outcome: an earlier run that
        // finishes starting later must not overwrite it (e.g. clear the error
        // of an empty command submitted meanwhile).
        const run = ++this.formRuns;
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
          if (this.formId && run === this.formRuns)
            this.publish({
              type: "update",
              widgetId: this.formId,
              params: { pending: false, error: null, lastRun: command },
            });
        } catch (err) {
          if (run === this.formRuns) this.formError(`Could not start: ${(err as Error).message}`);
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
    clearTimeout(this.soonTimer);
    this.unsubscribe();
    this.unwatched();
  }
}
