// The dashboard page's code (runs in the browser). Built by `npm run build`
// with the DOM-only tsconfig.dashboard.json (no Node types, so a `node:`
// import or a Node global does not compile) into dist/dashboard-assets/,
// together with the aui/ and wire/ modules it imports, and served from there
// as ES modules by src/server/dashboard-assets.ts. It exposes nothing to
// tests: they watch the page through its DOM (data-* attributes, xterm's
// rows) and the network, as a user would.
//
// It owns no state of its own: it is an A@UI runtime with three
// whitelisted components, fed by the server over the `dashboard` relay
// channel. Everything shown comes from render/update/destroy commands; every
// action (run, kill) goes back as a UI event the server acts on.
//
// Terminal output is read straight from the executions' own event streams
// (one multiplexed WebSocket, /v1/ws, resumable by seq), decoded as UTF-8 with
// a streaming decoder and written to xterm.js, so ANSI colours and Unicode
// render as in a terminal. Control bytes a terminal would not print (NUL and
// friends, which binary output is full of) are shown as visible symbols
// instead, so binary output cannot garble the terminal state.
// Auth: the page carries no token; the HttpOnly cookie set by `/?token=` does.

import { type ConnectionState, connectAAtUI } from "../../aui/connect.js";
import { type AAtUIComponent, createAAtUIRuntime, relayWidgetId } from "../../aui/runtime.js";
import type { Manifest } from "../../aui/types.js";
import { ComputerError, codeOf, toErrorCode } from "../../wire/errors.js";
import { type BatchQueue, batchQueue, resumable } from "../../wire/resume.js";

interface XTerm {
  open(el: HTMLElement): void;
  write(data: string | Uint8Array): void;
  dispose(): void;
  focus(): void;
  loadAddon(addon: unknown): void;
  onData(f: (data: string) => void): void;
  onResize(f: (size: { cols: number; rows: number }) => void): void;
  cols: number;
  rows: number;
}
type XTermCtor = new (options: Record<string, unknown>) => XTerm;
/** @xterm/addon-fit, loaded by /assets/addon-fit.js as the global FitAddon. */
type FitAddonCtor = new () => { fit(): void };

const lifecycle = { render: true, update: true, destroy: true };
const manifest: Manifest = {
  specVersion: "1.0",
  library: "agent-computer-dashboard",
  components: [
    {
      name: "RunForm",
      description: "A form to run a shell command in the workspace.",
      params: {
        type: "object",
        properties: { error: {}, pending: { type: "boolean" }, lastRun: { type: "string" } },
      },
      events: [
        { name: "run", payload: { type: "object", properties: { command: { type: "string" } } } },
        { name: "terminal", payload: { type: "object", properties: {} } },
      ],
      lifecycle,
    },
    {
      name: "ExecTable",
      description: "The list of executions: id, command, status, exit code, start time.",
      params: {
        type: "object",
        properties: { rows: { type: "array" }, total: { type: "number" } },
      },
      events: [
        { name: "kill", payload: { type: "object", properties: { id: { type: "string" } } } },
      ],
      lifecycle,
    },
    {
      name: "Terminal",
      description:
        "One execution's live output in a terminal, with a kill button; interactive when it runs on a pty.",
      params: {
        type: "object",
        properties: {
          execId: { type: "string" },
          state: { type: "string" },
          pty: { type: "boolean" },
        },
      },
      events: [
        { name: "kill", payload: { type: "object", properties: { id: { type: "string" } } } },
      ],
      lifecycle,
    },
  ],
};

function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  ...children: (Node | string)[]
) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  el.append(...children);
  return el;
}

function time(ms: unknown): string {
  return typeof ms === "number" ? new Date(ms).toLocaleTimeString([], { hour12: false }) : "";
}

function badge(state: string, exitCode: unknown): HTMLElement {
  const fail = state === "exited" && typeof exitCode === "number" && exitCode !== 0;
  const label = state === "timeout" ? "timed out" : state;
  return h("span", { class: `badge ${state}${fail ? " fail" : ""}`, "data-state": state }, label);
}

function exitText(p: Record<string, unknown>): string {
  if (p.state === "running") return "";
  if (typeof p.signal === "string" && p.signal)
    return p.exitCode == null ? p.signal : `${p.exitCode} (${p.signal})`;
  return p.exitCode == null ? "" : String(p.exitCode);
}

const RunForm: AAtUIComponent = {
  mount(el, props, emit) {
    el.className = "card runform";
    const input = h("input", {
      name: "command",
      placeholder: "Run a command, e.g.  ls -la  or  npm test",
      autocomplete: "off",
      spellcheck: "false",
      "aria-label": "Command",
    });
    const button = h("button", { class: "primary", type: "submit" }, "Run");
    const err = h("div", { class: "err", role: "alert" });
    const newTerminal = h(
      "button",
      { type: "button", "data-action": "terminal", title: "Open an interactive shell" },
      "New terminal",
    );
    newTerminal.addEventListener("click", () => emit({ type: "RunForm:terminal", payload: {} }));
    const form = h("form", {}, input, button, newTerminal);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      emit({ type: "RunForm:run", payload: { command: input.value } });
    });
    el.append(h("h2", {}, "Run a command"), form, err);
    let last = props.lastRun;
    const apply = (p: Record<string, unknown>) => {
      button.disabled = p.pending === true;
      err.textContent = typeof p.error === "string" ? p.error : "";
      if (p.lastRun !== undefined && p.lastRun !== last) {
        last = p.lastRun;
        input.value = "";
      }
    };
    apply(props);
    return { update: apply, destroy() {} };
  },
};

const ExecTable: AAtUIComponent = {
  mount(el, props, emit) {
    el.className = "card table";
    const body = h("tbody");
    const empty = h(
      "div",
      { class: "empty" },
      "No commands yet. Run one above, or with ",
      h("code", {}, "agent-computer exec -- …"),
      ".",
    );
    const title = h("h2", {}, "Executions");
    el.append(
      title,
      h(
        "table",
        {},
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ...["Status", "Command", "Id", "Started", "Exit", ""].map((t) => h("th", {}, t)),
          ),
        ),
        body,
      ),
      empty,
    );
    const apply = (p: Record<string, unknown>) => {
      const rows = Array.isArray(p.rows) ? (p.rows as Record<string, unknown>[]) : [];
      title.textContent =
        typeof p.total === "number" && p.total > rows.length
          ? `Executions (${rows.length} of ${p.total})`
          : "Executions";
      empty.hidden = rows.length > 0;
      body.replaceChildren(
        ...rows.map((r) => {
          const id = String(r.id);
          const kill = h(
            "button",
            { class: "danger", type: "button", "data-action": "kill" },
            "Kill",
          );
          kill.addEventListener("click", (e) => {
            e.stopPropagation();
            kill.disabled = true;
            emit({ type: "ExecTable:kill", payload: { id } });
          });
          const tr = h(
            "tr",
            { class: "row", "data-exec-id": id },
            h("td", {}, badge(String(r.state), r.exitCode)),
            h("td", { class: "cmd mono", title: String(r.command) }, String(r.command)),
            h("td", { class: "mono" }, id.length > 14 ? `${id.slice(0, 12)}…` : id),
            h("td", {}, time(r.startedAt)),
            h("td", { class: "mono" }, exitText(r)),
            h("td", {}, r.state === "running" ? kill : ""),
          );
          tr.addEventListener("click", () =>
            document
              .querySelector(`.term[data-exec-id="${CSS.escape(id)}"]`)
              ?.scrollIntoView({ behavior: "smooth", block: "center" }),
          );
          return tr;
        }),
      );
    };
    apply(props);
    return { update: apply, destroy() {} };
  },
};

/** C0 controls a terminal would act on invisibly (binary output) → visible control pictures. */
function printable(text: string): string {
  // keep \b \t \n \r and ESC (ANSI sequences); BEL too (ends OSC sequences)
  return text.replace(/[\x00-\x06\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]/g, (c) =>
    String.fromCharCode(c === "\x7f" ? 0x2421 : 0x2400 + c.charCodeAt(0)),
  );
}

function b64bytes(b64: string): Uint8Array {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

interface ExecFrame {
  id?: string;
  seq?: number;
  name: string;
  enc?: string;
  value?: unknown;
  signal?: string;
  reason?: string;
  code?: string;
  message?: string;
  earliestSeq?: number;
}

/**
 * All terminals share ONE WebSocket to /v1/ws (executions multiplexed by id):
 * a browser allows only 6 HTTP/1.1 connections per host, so one EventSource
 * per terminal would starve the page (and its relay stream) with a handful of
 * running commands. Each subscription is the project's resume loop
 * (wire/resume.ts) whose "connection" is a subscribe/resume message on the
 * shared socket: when the socket closes, every subscription reconnects (the
 * first one opens a new socket, the others join it) and resumes after its last
 * seq, so output is neither lost nor repeated. An error frame for an id is
 * that subscription's error: retried when it means "try again" (ELAGGING),
 * otherwise shown as the end of the output.
 */
class ExecStreams {
  private ws: WebSocket | undefined;
  private opening: Promise<WebSocket> | undefined;
  /** The open connection of each subscription (and the socket it is on), fed by the socket's messages. */
  private readonly queues = new Map<string, { queue: BatchQueue<ExecFrame>; ws: WebSocket }>();

  subscribe(id: string, onFrame: (f: ExecFrame) => void, after = 0): () => void {
    const ac = new AbortController();
    const frames = resumable<ExecFrame>({
      after,
      connect: (after, signal) => this.connect(id, after, signal),
      seqOf: (f) => f.seq,
      isEnd: (f) => f.name === "exit",
      // A page keeps its terminals live for as long as it is open.
      retry: { maxRetries: Number.POSITIVE_INFINITY, initialDelayMs: 250, maxDelayMs: 5000 },
      signal: ac.signal,
    }).getReader();
    void (async () => {
      try {
        for (;;) {
          const { value, done } = await frames.read();
          if (done) return;
          onFrame(value);
        }
      } catch (err) {
        if (!ac.signal.aborted) onFrame({ name: "error", code: codeOf(err) ?? "error" });
      }
    })();
    return () => ac.abort();
  }

  /** Sends a message (a pty's keystrokes or size) on the shared socket, in order. */
  send(message: Record<string, unknown>): void {
    this.sending = this.sending
      .then(() => this.socket())
      .then((ws) => ws.send(JSON.stringify(message)))
      .catch(() => {}); // the socket closed: the keystroke is lost, as on a dropped ssh link
  }
  private sending: Promise<void> = Promise.resolve();

  /** Opens (or joins) the shared socket; rejects when it closes before opening. */
  private socket(): Promise<WebSocket> {
    if (this.ws?.readyState === WebSocket.OPEN) return Promise.resolve(this.ws);
    if (this.ws?.readyState === WebSocket.CONNECTING && this.opening) return this.opening;
    const ws = new WebSocket(
      `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}/v1/ws`,
    );
    this.ws = ws;
    const opening = new Promise<WebSocket>((resolve, reject) => {
      ws.onopen = () => resolve(ws);
      ws.onmessage = (ev) => this.route(String(ev.data));
      ws.onclose = () => {
        if (this.ws === ws) this.ws = undefined;
        const cut = new ComputerError("ENETWORK", "the dashboard's WebSocket closed");
        reject(cut);
        for (const [id, entry] of this.queues) {
          if (entry.ws !== ws) continue;
          this.queues.delete(id);
          entry.queue.fail(cut);
        }
      };
    });
    this.opening = opening;
    return opening;
  }

  /** One subscription's connection: a subscribe (or resume) message, then its frames. */
  private async connect(id: string, after: number, signal: AbortSignal) {
    const ws = await this.socket();
    if (signal.aborted) throw new ComputerError("EABORTED", "aborted");
    const entry = { queue: batchQueue<ExecFrame>(), ws };
    this.queues.set(id, entry);
    signal.addEventListener(
      "abort",
      () => {
        if (this.queues.get(id) !== entry) return;
        this.queues.delete(id);
        // Left before its exit or error frame (the page dropped the terminal): stop the server's pump.
        if (!entry.queue.settled && ws.readyState === WebSocket.OPEN)
          ws.send(JSON.stringify({ type: "unsubscribe", id }));
      },
      { once: true },
    );
    ws.send(
      JSON.stringify(
        after > 0
          ? { type: "resume", id, after }
          : { type: "subscribe", id, after: 0, heartbeats: false },
      ),
    );
    return entry.queue;
  }

  /** Hands each exec-wire line of a message to its subscription. */
  private route(data: string) {
    for (const line of data.split("\n")) {
      if (line === "") continue;
      let f: ExecFrame;
      try {
        f = JSON.parse(line);
      } catch {
        continue;
      }
      const queue = f.id === undefined ? undefined : this.queues.get(f.id)?.queue;
      if (!queue || f.name === "heartbeat") continue;
      if (f.name === "error") {
        queue.fail(
          new ComputerError(toErrorCode(f.code), f.message ?? String(f.code), {
            earliestSeq: f.earliestSeq,
          }),
        );
        continue;
      }
      queue.push(f);
      if (f.name === "exit") queue.end();
    }
  }
}

const execStreams = new ExecStreams();

const Terminal: AAtUIComponent = {
  mount(el, props, emit) {
    const execId = String(props.execId);
    el.className = "card term";
    el.dataset.execId = execId;
    // Newest first, after the form and the table (order 0): CSS order is a 32-bit int.
    el.style.order = String(2_000_000_000 - Math.floor(Number(props.startedAt ?? 0) / 1000));
    const status = h("span");
    const meta = h("span", { class: "meta mono" });
    const kill = h("button", { class: "danger", type: "button", "data-action": "kill" }, "Kill");
    kill.addEventListener("click", () => {
      kill.disabled = true;
      emit({ type: "Terminal:kill", payload: { id: execId } });
    });
    const cmd = h(
      "span",
      { class: "cmd mono", title: String(props.command) },
      String(props.command),
    );
    const screen = h("div", { class: "term-body" });
    el.append(h("div", { class: "term-head" }, status, cmd, meta, kill), screen);

    const apply = (p: Record<string, unknown>) => {
      status.replaceChildren(badge(String(p.state), p.exitCode));
      const ex = exitText(p);
      meta.textContent = `${execId.length > 14 ? `${execId.slice(0, 12)}…` : execId} · ${time(p.startedAt)}${ex ? ` · exit ${ex}` : ""}`;
      kill.hidden = p.state !== "running";
    };
    apply(props);
    if (props.pty === true) {
      el.dataset.pty = "true";
      const pty = mountPty(screen, execId);
      return { update: apply, destroy: pty.destroy };
    }
    const Ctor = (globalThis as { Terminal?: XTermCtor }).Terminal;
    const cols = Math.max(40, Math.floor(((el.clientWidth || 720) - 24) / 7.85));
    const term: XTerm | undefined = Ctor
      ? new Ctor({
          cols,
          rows: 15,
          convertEol: true,
          disableStdin: true,
          cursorBlink: false,
          scrollback: 5000,
          fontSize: 13,
          fontFamily: 'ui-monospace, "SF Mono", Menlo, Consolas, monospace',
          theme: { background: "#14171f", foreground: "#d7dae0", cursor: "#14171f" },
        })
      : undefined;
    if (term) term.open(screen);
    else screen.textContent = "terminal library failed to load";
    const write = (s: string) => term?.write(s);

    const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
    const unsubscribe = execStreams.subscribe(execId, (f) => {
      if (f.name === "stdout" || f.name === "stderr") {
        const text =
          f.enc === "utf8"
            ? String(f.value)
            : decoders[f.name].decode(b64bytes(String(f.value)), { stream: true });
        write(printable(text));
      } else if (f.name === "exit") {
        const why =
          f.reason === "killed"
            ? `killed${f.signal ? ` (${f.signal})` : ""}`
            : f.reason === "timeout"
              ? "timed out"
              : `exited with code ${f.value}`;
        write(`\r\n\x1b[2m── ${why} ──\x1b[0m\r\n`);
      } else if (f.name === "error") {
        write(`\r\n\x1b[2m(output unavailable: ${f.code ?? "error"})\x1b[0m\r\n`);
      }
    });

    return {
      update: apply,
      destroy() {
        unsubscribe();
        term?.dispose();
      },
    };
  },
};

/**
 * An interactive terminal of a pty execution: drawn from the server's screen
 * snapshot, then fed its events from the snapshot's seq (so a reload or a
 * second browser shows the same live terminal); keystrokes, paste and Ctrl-C
 * go to its stdin and the pane's size to the pty (addon-fit), both over the
 * shared WebSocket.
 */
function mountPty(screen: HTMLElement, execId: string): { destroy(): void } {
  const Ctor = (globalThis as { Terminal?: XTermCtor }).Terminal;
  const Fit = (globalThis as { FitAddon?: { FitAddon: FitAddonCtor } }).FitAddon?.FitAddon;
  if (!Ctor || !Fit) {
    screen.textContent = "terminal library failed to load";
    return { destroy() {} };
  }
  screen.style.height = "22rem";
  const term = new Ctor({
    cols: 100,
    rows: 24,
    cursorBlink: true,
    scrollback: 5000,
    fontSize: 13,
    fontFamily: 'ui-monospace, "SF Mono", Menlo, Consolas, monospace',
    theme: { background: "#14171f", foreground: "#d7dae0" },
  });
  const fit = new Fit();
  term.loadAddon(fit);
  term.open(screen);
  const id = encodeURIComponent(execId);
  let unsubscribe = () => {};
  let gone = false;
  const fitNow = () => {
    try {
      fit.fit();
    } catch {
      // not laid out yet
    }
  };
  void (async () => {
    let after = 0;
    try {
      const res = await fetch(`/v1/execs/${id}/screen`, { credentials: "same-origin" });
      if (res.ok) {
        const snap = (await res.json()) as {
          data: string;
          cols: number;
          rows: number;
          seq: number;
        };
        term.write(snap.data);
        after = snap.seq;
      }
    } catch {
      // no snapshot: replay from the start
    }
    if (gone) return;
    unsubscribe = execStreams.subscribe(
      execId,
      (f) => {
        if (f.name === "stdout" || f.name === "stderr") {
          term.write(f.enc === "utf8" ? String(f.value) : b64bytes(String(f.value)));
        } else if (f.name === "exit") {
          term.write(`\r\n\x1b[2m── exited with code ${f.value} ──\x1b[0m\r\n`);
        } else if (f.name === "error") {
          term.write(`\r\n\x1b[2m(output unavailable: ${f.code ?? "error"})\x1b[0m\r\n`);
        }
      },
      after,
    );
    term.onResize(({ cols, rows }) => execStreams.send({ type: "resize", id: execId, cols, rows }));
    fitNow();
    execStreams.send({ type: "resize", id: execId, cols: term.cols, rows: term.rows });
  })();
  term.onData((data) => execStreams.send({ type: "stdin", id: execId, data }));
  const observer = new ResizeObserver(() => fitNow());
  observer.observe(screen);
  return {
    destroy() {
      gone = true;
      observer.disconnect();
      unsubscribe();
      term.dispose();
    },
  };
}

const connEl = document.getElementById("conn")!;
const connText = document.getElementById("conn-text")!;
const notice = document.getElementById("notice")!;
const STATE_TEXT: Record<ConnectionState, string> = {
  connecting: "connecting…",
  open: "live",
  reconnecting: "reconnecting…",
  done: "ended",
  closed: "disconnected",
  unauthorized: "not signed in",
};

function showNotice(html: string, error = true) {
  notice.innerHTML = html;
  notice.classList.toggle("error", error);
  notice.hidden = false;
}

const transport = (new URLSearchParams(location.search).get("transport") ?? "sse") as
  | "sse"
  | "websocket"
  | "poll";
let connection: ReturnType<typeof connectAAtUI> | undefined;
const runtime = createAAtUIRuntime({
  manifest,
  components: { RunForm, ExecTable, Terminal },
  mountTarget: "#app",
  createWidgetId: relayWidgetId,
  onEvent: (event) => void connection?.send(event),
  onError: (e) => console.warn("A@UI", e.source, e.code, e.message),
});
connection = connectAAtUI("/v1/ui/dashboard", runtime, {
  transport,
  onState(state, detail) {
    connEl.dataset.state = state;
    connText.textContent = STATE_TEXT[state];
    if (state === "unauthorized") {
      const why = detail?.message ? ` (server: ${detail.message.replace(/[<>&]/g, "")})` : "";
      showNotice(
        `<strong>This page needs the server's access token.</strong> Open the link that <code>agent-computer serve</code> printed: it ends in <code>/?token=…</code>. Nothing is shown without it${why}.`,
      );
    } else if (state === "open" && notice.classList.contains("error")) {
      notice.hidden = true;
    }
  },
});

/**
 * One line under the header from GET /v1/info: what confines the commands
 * (or a warning that nothing does), the network and the default limits.
 * Absent on servers that do not offer the route (an embedded server).
 */
async function showConfinement(): Promise<void> {
  const el = document.getElementById("confinement");
  const res = await fetch("/v1/info").catch(() => undefined);
  if (!el || !res?.ok) return;
  const info = (await res.json()) as {
    confinement?: {
      confined: boolean;
      mode: string;
      summary: string;
      why?: string;
      network: unknown;
      limits: { defaults: { memoryBytes: number; pids: number } };
    };
  };
  const c = info.confinement;
  if (!c) return;
  const gib = (n: number) => `${(n / 1024 ** 3).toFixed(1)} GiB`;
  const net = typeof c.network === "string" ? c.network : "allow-list";
  el.textContent = c.confined
    ? `Commands confined (${c.mode}) · network ${net} · memory ${gib(c.limits.defaults.memoryBytes)}, ${c.limits.defaults.pids} processes per command`
    : `Commands NOT confined (${c.mode}${c.why ? `: ${c.why}` : ""}) — run \`agent-computer doctor\``;
  el.classList.toggle("warn", !c.confined && c.mode !== "off");
  el.hidden = false;
}
void showConfinement();
