// @vitest-environment happy-dom
// The widget runtime's rules, in a DOM (happy-dom): config checks, dispatch
// rules, lifecycle flags, id minting and containers, shallow merge, warnings,
// payload checks and widget-ready reports. The real-browser suite repeats the
// render/update/destroy flow in Chromium.
import { beforeEach, describe, expect, it } from "vitest";
import {
  type AAtUIComponent,
  type AAtUIError,
  createAAtUIRuntime,
  jsonProblem,
  relayWidgetId,
  WIDGET_READY,
} from "./runtime.js";
import type { Manifest, UiEvent } from "./types.js";

function spec(name: string, lifecycle = { render: true, update: true, destroy: true }) {
  return { name, description: name, params: { type: "object" }, events: [], lifecycle };
}

const manifest: Manifest = {
  specVersion: "1.0",
  library: "test",
  components: [spec("Label"), spec("Sticky", { render: true, update: false, destroy: false })],
};

interface Probe {
  mounts: { el: HTMLElement; props: Record<string, unknown> }[];
  updates: Record<string, unknown>[];
  destroyed: number;
  emit?: (e: { type: string; payload?: unknown }) => void;
}

function label(probe: Probe): AAtUIComponent {
  return {
    mount(el, props, emit) {
      probe.mounts.push({ el, props });
      probe.emit = emit;
      const span = document.createElement("span");
      span.textContent = String(props.text ?? "");
      el.append(span);
      return {
        update(p) {
          probe.updates.push(p);
          span.textContent = String(p.text ?? "");
        },
        destroy() {
          probe.destroyed++;
        },
      };
    },
  };
}

function setup(extra: Partial<Parameters<typeof createAAtUIRuntime>[0]> = {}) {
  const probe: Probe = { mounts: [], updates: [], destroyed: 0 };
  const events: UiEvent[] = [];
  const errors: AAtUIError[] = [];
  const ready: unknown[] = [];
  const root = document.createElement("div");
  document.body.append(root);
  const rt = createAAtUIRuntime({
    manifest,
    components: { Label: label(probe), Sticky: label(probe) },
    mountTarget: root,
    onEvent: (e) => events.push(e),
    onError: (e) => errors.push(e),
    onWidgetReady: (r) => ready.push(r),
    ...extra,
  });
  return { rt, probe, events, errors, ready, root };
}

beforeEach(() => {
  document.body.innerHTML = "";
});

describe("createAAtUIRuntime config", () => {
  it("throws and reports source config for a manifest component without implementation", () => {
    const errors: AAtUIError[] = [];
    expect(() =>
      createAAtUIRuntime({
        manifest,
        components: { Label: label({ mounts: [], updates: [], destroyed: 0 }) },
        mountTarget: document.body,
        onEvent: () => {},
        onError: (e) => errors.push(e),
      }),
    ).toThrow(/Sticky/);
    expect(errors[0]).toMatchObject({ source: "config", level: "error" });
  });

  it("throws for an implementation missing from the manifest", () => {
    const p = { mounts: [], updates: [], destroyed: 0 };
    expect(() =>
      createAAtUIRuntime({
        manifest,
        components: { Label: label(p), Sticky: label(p), Extra: label(p) },
        mountTarget: document.body,
        onEvent: () => {},
      }),
    ).toThrow(/Extra/);
  });

  it("throws when the mount target does not exist", () => {
    const errors: AAtUIError[] = [];
    const p = { mounts: [], updates: [], destroyed: 0 };
    expect(() =>
      createAAtUIRuntime({
        manifest,
        components: { Label: label(p), Sticky: label(p) },
        mountTarget: "#nope",
        onEvent: () => {},
        onError: (e) => errors.push(e),
      }),
    ).toThrow(/mount target/);
    expect(errors[0]?.source).toBe("config");
  });

  it("accepts a selector as mount target", () => {
    document.body.innerHTML = `<main id="app"></main>`;
    const p = { mounts: [], updates: [], destroyed: 0 };
    const rt = createAAtUIRuntime({
      manifest,
      components: { Label: label(p), Sticky: label(p) },
      mountTarget: "#app",
      onEvent: () => {},
    });
    rt.dispatch({ type: "render", component: "Label", params: { text: "x" } });
    expect(document.querySelector("#app [data-widget-id]")?.textContent).toBe("x");
  });
});

describe("dispatch", () => {
  it("render mints a UUID, mounts in its own data-widget-id container and reports ready", () => {
    const { rt, probe, events, ready, root } = setup();
    const id = rt.dispatch({ type: "render", component: "Label", params: { text: "hi" } })!;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    const el = root.querySelector(`[data-widget-id="${id}"]`) as HTMLElement;
    expect(el).toBe(probe.mounts[0]!.el);
    expect(el.textContent).toBe("hi");
    expect(ready).toEqual([{ widgetId: id, component: "Label" }]);
    expect(events[0]).toMatchObject({
      type: WIDGET_READY,
      widgetId: id,
      payload: { component: "Label" },
    });
  });

  it("passes the stream position to createWidgetId and the ready report", () => {
    const { rt, events, ready, errors } = setup({ createWidgetId: relayWidgetId });
    expect(rt.dispatch({ type: "render", component: "Label" }, { position: 7 })).toBe("w7");
    expect(ready[0]).toEqual({ widgetId: "w7", component: "Label", position: 7 });
    expect(events[0]!.payload).toEqual({ component: "Label", position: 7 });
    // a replay of the same render (same position) is reported, not mounted twice
    expect(rt.dispatch({ type: "render", component: "Label" }, { position: 7 })).toBeUndefined();
    expect(document.querySelectorAll('[data-widget-id="w7"]').length).toBe(1);
    expect(errors[0]?.code).toBe("EDUPLICATE");
  });

  it("update shallow-merges params", () => {
    const { rt, probe } = setup();
    const id = rt.dispatch({ type: "render", component: "Label", params: { text: "a", n: 1 } })!;
    rt.dispatch({ type: "update", widgetId: id, params: { text: "b" } });
    expect(probe.updates[0]).toEqual({ text: "b", n: 1 });
    expect(rt.widgets().get(id)?.params).toEqual({ text: "b", n: 1 });
  });

  it("destroy unmounts and removes the container; unknown destroy is a no-op", () => {
    const { rt, probe, errors, root } = setup();
    const id = rt.dispatch({ type: "render", component: "Label" })!;
    rt.dispatch({ type: "destroy", widgetId: id });
    expect(probe.destroyed).toBe(1);
    expect(root.children.length).toBe(0);
    rt.dispatch({ type: "destroy", widgetId: id });
    rt.dispatch({ type: "destroy", widgetId: "never" });
    expect(errors).toEqual([]);
    expect(probe.destroyed).toBe(1);
  });

  it("update of an unknown widget is a warning and is skipped", () => {
    const { rt, errors } = setup();
    rt.dispatch({ type: "update", widgetId: "ghost", params: { a: 1 } });
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ source: "dispatch", level: "warning", code: "ENOENT" });
  });

  it("unknown component and invalid commands are dispatch errors carrying the command", () => {
    const { rt, errors } = setup();
    const bad = { type: "render", component: "Nope" };
    expect(rt.dispatch(bad)).toBeUndefined();
    expect(errors[0]).toMatchObject({ source: "dispatch", level: "error", command: bad });
    rt.dispatch({ type: "render", component: "Label", widgetId: "x" });
    rt.dispatch({ type: "explode" });
    rt.dispatch("nope");
    expect(errors).toHaveLength(4);
    expect(errors.map((e) => [e.source, e.code])).toEqual([
      ["dispatch", "EUNKNOWN_COMPONENT"],
      ["dispatch", "EINVAL"],
      ["dispatch", "EINVAL"],
      ["dispatch", "EINVAL"],
    ]);
  });

  it("enforces lifecycle flags from the manifest", () => {
    const { rt, errors, probe } = setup();
    const id = rt.dispatch({ type: "render", component: "Sticky", params: { text: "s" } })!;
    rt.dispatch({ type: "update", widgetId: id, params: { text: "t" } });
    rt.dispatch({ type: "destroy", widgetId: id });
    expect(errors.map((e) => e.code)).toEqual(["ELIFECYCLE", "ELIFECYCLE"]);
    expect(probe.updates).toEqual([]);
    expect(rt.widgets().has(id)).toBe(true);
  });

  it("a component that throws in mount leaves no container behind", () => {
    const root = document.createElement("div");
    const errors: AAtUIError[] = [];
    const p = { mounts: [], updates: [], destroyed: 0 };
    const rt = createAAtUIRuntime({
      manifest,
      components: {
        Label: {
          mount() {
            throw new Error("boom");
          },
        },
        Sticky: label(p),
      },
      mountTarget: root,
      onEvent: () => {},
      onError: (e) => errors.push(e),
    });
    expect(rt.dispatch({ type: "render", component: "Label" })).toBeUndefined();
    expect(root.children.length).toBe(0);
    expect(errors[0]).toMatchObject({ source: "dispatch", code: "EMOUNT" });
  });

  it("reset and close destroy every widget; close refuses further commands", () => {
    const { rt, probe, errors, root } = setup();
    rt.dispatch({ type: "render", component: "Label" });
    rt.dispatch({ type: "render", component: "Sticky" });
    rt.reset();
    expect(probe.destroyed).toBe(2);
    expect(root.children.length).toBe(0);
    rt.close();
    rt.dispatch({ type: "render", component: "Label" });
    expect(errors.at(-1)?.code).toBe("ECLOSED");
  });
});

describe("events", () => {
  it("adds widgetId and timestamp to emissions", () => {
    const { rt, probe, events } = setup();
    const id = rt.dispatch({ type: "render", component: "Label" })!;
    probe.emit!({ type: "Label:click", payload: { x: [1, "a", null, true] } });
    probe.emit!({ type: "Label:ping" });
    const [ev, ping] = events.slice(1);
    expect(ev).toMatchObject({
      type: "Label:click",
      widgetId: id,
      payload: { x: [1, "a", null, true] },
    });
    expect(typeof ev!.timestamp).toBe("number");
    expect(ping).not.toHaveProperty("payload");
  });

  it("rejects payloads that are not JSON data", () => {
    const { rt, probe, events, errors } = setup();
    rt.dispatch({ type: "render", component: "Label" });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    for (const payload of [
      () => 1,
      document.createElement("div"),
      cyclic,
      new Date(),
      { a: new Map() },
      Number.NaN,
      { u: undefined },
    ]) {
      probe.emit!({ type: "Label:bad", payload });
    }
    expect(events).toHaveLength(1); // only the widget-ready report
    expect(errors).toHaveLength(7);
    expect(errors.every((e) => e.source === "event" && e.code === "EINVAL")).toBe(true);
  });

  it("emits after destroy are ignored with a warning", () => {
    const { rt, probe, events, errors } = setup();
    const id = rt.dispatch({ type: "render", component: "Label" })!;
    rt.dispatch({ type: "destroy", widgetId: id });
    probe.emit!({ type: "Label:late" });
    expect(events).toHaveLength(1);
    expect(errors[0]).toMatchObject({ source: "event", level: "warning" });
  });

  it("jsonProblem accepts shared (non-cyclic) references", () => {
    const shared = { a: 1 };
    expect(jsonProblem({ x: shared, y: shared, z: [shared, shared] })).toBeUndefined();
    expect(jsonProblem(Object.create(null))).toBeUndefined();
  });
});
