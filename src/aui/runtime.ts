// The framework-free A@UI widget runtime (docs/protocol.md §3): it turns validated
// render/update/destroy commands into mounted components inside a mount
// target, and turns what components emit into UI events for the agent.
//
// Shape decisions:
// - A component is a plain object `{ mount(el, props, emit) → { update, destroy } }`
//   so React, Vue, Lit or vanilla code wraps in a few lines; the runtime owns the
//   container element (one per widget, tagged `data-widget-id`) and the props
//   (shallow-merged on update), the component owns only what is inside it.
// - Every input is untrusted (it arrives over a network): dispatch validates
//   each command with the protocol's own validator and never throws; problems
//   go to `onError` with a `source` so a page can show them. Only configuration
//   mistakes at creation throw (and are reported with source "config"), because
//   they are programming errors that no command can fix.
// - Widget ids are minted here (crypto.randomUUID by default). A transport that
//   knows the command's stream position passes it to `dispatch`, and it goes to
//   `createWidgetId` and to the widget-ready report; `relayWidgetId` mints
//   `w<position>` so every page on a relay channel, and every replay, agrees on
//   the id the relay already told the agent (see docs/ui.md).
// - DOM use is limited to `document.createElement`, `append`, `remove` and
//   `dataset`, so happy-dom, jsdom and real browsers behave the same.

import { ComputerError } from "../wire/errors.js";
import type { Manifest, UiEvent } from "./types.js";
import { validateCommand } from "./validate.js";

/** What a component's `mount` returns: the live instance the runtime drives. */
export interface AAtUIInstance<P = Record<string, unknown>> {
  update(props: P): void;
  destroy(): void;
}

/** What a component may emit; the runtime adds `widgetId` and `timestamp`. */
export interface ComponentEmission {
  type: string;
  payload?: unknown;
}

export type Emit = (event: ComponentEmission) => void;

/** A whitelisted component implementation. */
export interface AAtUIComponent<P = Record<string, unknown>> {
  mount(el: HTMLElement, props: P, emit: Emit): AAtUIInstance<P>;
}

/** Where a problem came from: creation-time configuration, a command, or a component's emit. */
export type AAtUIErrorSource = "config" | "dispatch" | "event";

export interface AAtUIError {
  source: AAtUIErrorSource;
  /** "error" for a rejected input, "warning" for a skipped one (update of an unknown widget). */
  level: "error" | "warning";
  code: string;
  message: string;
  /** The command being dispatched (source "dispatch"). */
  command?: unknown;
  /** The emission being sent (source "event"). */
  event?: unknown;
  widgetId?: string;
}

/** A new widget, reported to `onWidgetReady` and as a `aui:widget-ready` UI event. */
export interface WidgetReady {
  widgetId: string;
  component: string;
  /** The render command's stream position (cursor / SSE id), when the transport knows it. */
  position?: number | string;
}

/** Extra facts a transport knows about a command. */
export interface DispatchMeta {
  position?: number | string;
}

export interface CreateWidgetIdContext {
  component: string;
  position?: number | string;
}

export interface AAtUIRuntimeOptions {
  manifest: Manifest;
  components: Record<string, AAtUIComponent>;
  /** The element (or a CSS selector for it) that receives widget containers. */
  mountTarget: HTMLElement | string;
  /** Every UI event: component emissions and widget-ready reports. */
  onEvent: (event: UiEvent) => void;
  onError?: (error: AAtUIError) => void;
  onWidgetReady?: (info: WidgetReady) => void;
  createWidgetId?: (ctx: CreateWidgetIdContext) => string;
  /** Document to create containers in (defaults to the mount target's). */
  document?: Document;
}

export interface AAtUIRuntime {
  /** Apply one command. Returns the new widgetId for a successful render, else undefined. Never throws. */
  dispatch(command: unknown, meta?: DispatchMeta): string | undefined;
  /** Live widgets: id → component name and current (merged) params. */
  widgets(): Map<string, { component: string; params: Record<string, unknown> }>;
  /** Destroy every widget (used when a transport must start over from a snapshot). */
  reset(): void;
  /** Destroy every widget and stop accepting commands. */
  close(): void;
}

/** The event type under which the runtime announces a new widget. */
export const WIDGET_READY = "aui:widget-ready";

/** Widget id derived from the render's stream position: identical across pages and replays. */
export function relayWidgetId(ctx: CreateWidgetIdContext): string {
  return ctx.position === undefined ? randomId() : `w${ctx.position}`;
}

function randomId(): string {
  return globalThis.crypto.randomUUID();
}

/** Reads a manifest's components with their lifecycle flags, accepting array or record form. */
interface ComponentRules {
  render: boolean;
  update: boolean;
  destroy: boolean;
}

function manifestComponents(manifest: Manifest): Map<string, ComponentRules> {
  const out = new Map<string, ComponentRules>();
  const raw = (manifest as { components?: unknown })?.components;
  const add = (name: string, spec: unknown) => {
    const lc = (spec as { lifecycle?: Record<string, unknown> } | undefined)?.lifecycle ?? {};
    // Flags default to allowed: a manifest restricts by saying `false`.
    out.set(name, {
      render: lc.render !== false,
      update: lc.update !== false,
      destroy: lc.destroy !== false,
    });
  };
  if (Array.isArray(raw)) {
    for (const c of raw) {
      const name = (c as { name?: unknown })?.name;
      if (typeof name === "string" && name !== "") add(name, c);
    }
  } else if (raw && typeof raw === "object") {
    for (const [name, spec] of Object.entries(raw)) add(name, spec);
  }
  return out;
}

/**
 * Checks that `value` is JSON data: null, booleans, finite numbers, strings,
 * arrays and plain objects, without cycles. Returns a reason or undefined.
 */
export function jsonProblem(
  value: unknown,
  path = "payload",
  seen = new Set<object>(),
): string | undefined {
  switch (typeof value) {
    case "string":
    case "boolean":
      return undefined;
    case "number":
      return Number.isFinite(value) ? undefined : `${path} is a non-finite number`;
    case "undefined":
      return `${path} is undefined`;
    case "function":
      return `${path} is a function`;
    case "bigint":
    case "symbol":
      return `${path} is a ${typeof value}`;
  }
  if (value === null) return undefined;
  const obj = value as object;
  if (seen.has(obj)) return `${path} contains a cycle`;
  if (Array.isArray(obj)) {
    seen.add(obj);
    for (let i = 0; i < obj.length; i++) {
      const p = jsonProblem(obj[i], `${path}[${i}]`, seen);
      if (p) return p;
    }
    seen.delete(obj);
    return undefined;
  }
  const proto = Object.getPrototypeOf(obj);
  if (proto !== Object.prototype && proto !== null) {
    const name = (proto?.constructor as { name?: string } | undefined)?.name ?? "object";
    return `${path} is a ${name} instance, not plain data`;
  }
  seen.add(obj);
  for (const [k, v] of Object.entries(obj)) {
    // JSON.stringify drops undefined members silently; we reject so nothing is lost unnoticed.
    const p = jsonProblem(v, `${path}.${k}`, seen);
    if (p) return p;
  }
  seen.delete(obj);
  return undefined;
}

/** A runtime built with a bad manifest or components: EINVAL, reported as source "config". */
class ConfigError extends ComputerError {
  readonly source = "config";
  constructor(message: string) {
    super("EINVAL", message);
    this.name = "ConfigError";
  }
}

export function createAAtUIRuntime(options: AAtUIRuntimeOptions): AAtUIRuntime {
  const { onEvent } = options;
  const onError = options.onError ?? (() => {});
  const fail = (message: string): never => {
    onError({ source: "config", level: "error", code: "EINVAL", message });
    throw new ConfigError(message);
  };

  if (typeof onEvent !== "function") fail("onEvent must be a function");
  const rules = manifestComponents(options.manifest);
  const impls = options.components ?? {};
  for (const name of rules.keys()) {
    const impl = impls[name];
    if (!impl || typeof impl.mount !== "function") {
      fail(`manifest component "${name}" has no implementation with a mount() function`);
    }
  }
  for (const name of Object.keys(impls)) {
    if (!rules.has(name)) fail(`component "${name}" is implemented but not in the manifest`);
  }
  let target: HTMLElement | null = null;
  if (typeof options.mountTarget === "string") {
    const doc = options.document ?? globalThis.document;
    target = doc ? (doc.querySelector(options.mountTarget) as HTMLElement | null) : null;
    if (!target) fail(`mount target "${options.mountTarget}" does not exist`);
  } else {
    target = options.mountTarget ?? null;
    if (!target || typeof (target as HTMLElement).append !== "function") {
      fail("mount target is missing or not an element");
    }
  }
  const mountTarget = target as HTMLElement;
  const doc = options.document ?? mountTarget.ownerDocument;
  const mintId = options.createWidgetId ?? (() => randomId());

  interface Live {
    component: string;
    params: Record<string, unknown>;
    el: HTMLElement;
    instance: AAtUIInstance;
    alive: boolean;
  }
  const live = new Map<string, Live>();
  let closed = false;

  const dispatchError = (command: unknown, code: string, message: string, widgetId?: string) => {
    onError({ source: "dispatch", level: "error", code, message, command, widgetId });
  };

  const safeOnEvent = (event: UiEvent) => {
    try {
      onEvent(event);
    } catch (err) {
      onError({
        source: "event",
        level: "error",
        code: "EINTERNAL",
        message: `onEvent threw: ${String(err)}`,
        event,
      });
    }
  };

  const makeEmit =
    (widgetId: string): Emit =>
    (emission) => {
      const w = live.get(widgetId);
      if (!w?.alive) {
        onError({
          source: "event",
          level: "warning",
          code: "ECLOSED",
          message: "emit after destroy ignored",
          event: emission,
          widgetId,
        });
        return;
      }
      if (
        !emission ||
        typeof emission !== "object" ||
        typeof emission.type !== "string" ||
        emission.type === ""
      ) {
        onError({
          source: "event",
          level: "error",
          code: "EINVAL",
          message: "an event needs a non-empty string type",
          event: emission,
          widgetId,
        });
        return;
      }
      const event: UiEvent = { type: emission.type, widgetId, timestamp: Date.now() };
      if (emission.payload !== undefined) {
        const problem = jsonProblem(emission.payload);
        if (problem) {
          onError({
            source: "event",
            level: "error",
            code: "EINVAL",
            message: `event "${emission.type}" not sent: ${problem}`,
            event: emission,
            widgetId,
          });
          return;
        }
        event.payload = emission.payload;
      }
      safeOnEvent(event);
    };

  function render(
    command: { component: string; params?: Record<string, unknown> },
    meta?: DispatchMeta,
  ) {
    const rule = rules.get(command.component);
    if (!rule) {
      dispatchError(
        command,
        "EUNKNOWN_COMPONENT",
        `component "${command.component}" is not in the manifest`,
      );
      return undefined;
    }
    if (!rule.render) {
      dispatchError(
        command,
        "ELIFECYCLE",
        `component "${command.component}" does not accept render`,
      );
      return undefined;
    }
    let widgetId: string;
    try {
      widgetId = mintId({ component: command.component, position: meta?.position });
    } catch (err) {
      dispatchError(command, "EINTERNAL", `createWidgetId threw: ${String(err)}`);
      return undefined;
    }
    if (live.has(widgetId)) {
      // A replayed render with a position-derived id: the widget is already on screen.
      dispatchError(command, "EDUPLICATE", `widget "${widgetId}" already exists`, widgetId);
      return undefined;
    }
    const el = doc.createElement("div");
    el.dataset.widgetId = widgetId;
    el.dataset.component = command.component;
    const params = { ...(command.params ?? {}) };
    mountTarget.append(el);
    const entry: Live = {
      component: command.component,
      params,
      el,
      instance: undefined as never,
      alive: true,
    };
    live.set(widgetId, entry);
    try {
      const instance = impls[command.component]!.mount(el, { ...params }, makeEmit(widgetId));
      if (
        !instance ||
        typeof instance.update !== "function" ||
        typeof instance.destroy !== "function"
      ) {
        throw new Error("mount() must return { update, destroy }");
      }
      entry.instance = instance;
    } catch (err) {
      live.delete(widgetId);
      entry.alive = false;
      el.remove();
      dispatchError(
        command,
        "EMOUNT",
        `mounting "${command.component}" failed: ${errText(err)}`,
        widgetId,
      );
      return undefined;
    }
    const ready: WidgetReady = { widgetId, component: command.component };
    if (meta?.position !== undefined) ready.position = meta.position;
    try {
      options.onWidgetReady?.(ready);
    } catch (err) {
      onError({
        source: "dispatch",
        level: "error",
        code: "EINTERNAL",
        message: `onWidgetReady threw: ${errText(err)}`,
        command,
        widgetId,
      });
    }
    const payload: Record<string, unknown> = { component: command.component };
    if (meta?.position !== undefined) payload.position = meta.position;
    safeOnEvent({ type: WIDGET_READY, widgetId, payload, timestamp: Date.now() } as UiEvent);
    return widgetId;
  }

  function update(command: { widgetId: string; params: Record<string, unknown> }) {
    const w = live.get(command.widgetId);
    if (!w) {
      onError({
        source: "dispatch",
        level: "warning",
        code: "ENOENT",
        message: `update of unknown widget "${command.widgetId}" skipped`,
        command,
        widgetId: command.widgetId,
      });
      return;
    }
    if (!rules.get(w.component)!.update) {
      dispatchError(
        command,
        "ELIFECYCLE",
        `component "${w.component}" does not accept update`,
        command.widgetId,
      );
      return;
    }
    w.params = { ...w.params, ...command.params };
    try {
      w.instance.update({ ...w.params });
    } catch (err) {
      dispatchError(
        command,
        "EUPDATE",
        `updating "${command.widgetId}" failed: ${errText(err)}`,
        command.widgetId,
      );
    }
  }

  function destroyWidget(widgetId: string, command?: unknown, force = false) {
    const w = live.get(widgetId);
    if (!w) return; // destroy of an unknown widget is a no-op (it may be a compacted replay)
    if (!force && !rules.get(w.component)!.destroy) {
      dispatchError(
        command,
        "ELIFECYCLE",
        `component "${w.component}" does not accept destroy`,
        widgetId,
      );
      return;
    }
    live.delete(widgetId);
    w.alive = false;
    try {
      w.instance.destroy();
    } catch (err) {
      if (command !== undefined)
        dispatchError(
          command,
          "EDESTROY",
          `destroying "${widgetId}" failed: ${errText(err)}`,
          widgetId,
        );
    }
    w.el.remove();
  }

  return {
    dispatch(command, meta) {
      if (closed) {
        dispatchError(command, "ECLOSED", "runtime is closed");
        return undefined;
      }
      const checked = validateCommand(command);
      if (!checked.ok) {
        dispatchError(command, "EINVAL", checked.reason);
        return undefined;
      }
      const cmd = checked.command;
      switch (cmd.type) {
        case "render":
          return render(cmd, meta);
        case "update":
          update(cmd as { widgetId: string; params: Record<string, unknown> });
          return undefined;
        case "destroy":
          destroyWidget(cmd.widgetId, cmd);
          return undefined;
      }
      return undefined;
    },
    widgets() {
      const out = new Map<string, { component: string; params: Record<string, unknown> }>();
      for (const [id, w] of live) out.set(id, { component: w.component, params: { ...w.params } });
      return out;
    },
    reset() {
      for (const id of [...live.keys()]) destroyWidget(id, undefined, true);
    },
    close() {
      closed = true;
      for (const id of [...live.keys()]) destroyWidget(id, undefined, true);
    },
  };
}

function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
