// The A@UI protocol's data types (docs/protocol.md §3): the three agent → UI commands,
// the UI → agent event, and the component manifest a UI publishes so an agent
// knows what it may render. Types only; `validate.ts` checks untrusted values
// against the same rules, and `schemas/*.json` states them for other languages.

/** Plain JSON object (what `params` and most payloads are). */
export type JsonObject = { [key: string]: unknown };

/** Mount a new widget of `component`; the UI runtime mints its `widgetId`. */
export interface RenderCommand {
  type: "render";
  /** Component name from the manifest (non-empty). */
  component: string;
  /** Initial params (a plain object). */
  params?: JsonObject;
}

/** Shallow-merge `params` into a live widget's params. */
export interface UpdateCommand {
  type: "update";
  /** Non-empty id the runtime minted on render. */
  widgetId: string;
  params: JsonObject;
}

/** Unmount a widget. */
export interface DestroyCommand {
  type: "destroy";
  widgetId: string;
}

/** An agent → UI command. */
export type Command = RenderCommand | UpdateCommand | DestroyCommand;

export type CommandType = Command["type"];

/**
 * A UI → agent event, e.g. `{"type":"ArticleList:open","widgetId":"w1",
 * "payload":{...},"timestamp":1716020000000}`. Components emit `type` and
 * `payload`; the runtime adds `widgetId` and `timestamp` (ms since epoch).
 */
export interface UiEvent<P = unknown> {
  /** Conventionally `Component:event`; the runtime's own reports use the `aui:` prefix. */
  type: string;
  widgetId: string;
  /** JSON-serializable data only; absent when the component emitted none. */
  payload?: P;
  timestamp: number;
}

/** Which commands a component accepts (render is always meaningful; false on update/destroy forbids them). */
export interface ComponentLifecycle {
  render: boolean;
  update: boolean;
  destroy: boolean;
}

/** One event a component can emit. */
export interface ComponentEventSpec {
  /** The part after "Component:" in the UI event's `type`, e.g. "open". */
  name: string;
  description?: string;
  /** JSON Schema of the event's `payload`. */
  payload?: JsonObject;
}

/** One component a UI offers. */
export interface ComponentSpec {
  /** The name `render` commands use (non-empty). */
  name: string;
  /** What it shows, written for the agent (an LLM reads it). */
  description: string;
  /** JSON Schema (type "object") of the params `render`/`update` accept. */
  params: JsonObject;
  events: ComponentEventSpec[];
  lifecycle: ComponentLifecycle;
}

/** The component manifest: everything an agent may render in this UI. */
export interface Manifest {
  /** Version of the A@UI spec the manifest follows, e.g. "1.0". */
  specVersion: string;
  /** Name of the component library, e.g. "acme-widgets". */
  library: string;
  components: ComponentSpec[];
}
