// Tests for A@UI validation (docs/protocol.md §3): the render/update/destroy table row
// by row, and agreement between validateCommand / validateUiEvent and the
// shipped JSON Schemas (checked with a real validator, Ajv) on a hand-written
// corpus plus random commands, so other-language implementations that use the
// schemas accept exactly what we accept.
import { readFileSync } from "node:fs";
import { Ajv } from "ajv";
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import type { Manifest } from "./types.js";
import { isPlainObject, validateCommand, validateUiEvent } from "./validate.js";

const schema = (name: string) =>
  JSON.parse(readFileSync(new URL(`../../schemas/${name}`, import.meta.url), "utf8"));

const ajv = new Ajv({ allErrors: true });
const commandSchema = ajv.compile(schema("aui-command.schema.json"));
const eventSchema = ajv.compile(schema("aui-ui-event.schema.json"));
const manifestSchema = ajv.compile(schema("aui-manifest.schema.json"));

const ok = (v: unknown) => expect(validateCommand(v)).toEqual({ ok: true, command: v });
function bad(v: unknown, reason: RegExp) {
  const r = validateCommand(v);
  expect(r.ok).toBe(false);
  if (!r.ok) expect(r.reason).toMatch(reason);
}

describe("validateCommand: the table of docs/protocol.md §3", () => {
  test("render: type + non-empty component; params optional", () => {
    ok({ type: "render", component: "SearchBox" });
    ok({ type: "render", component: "SearchBox", params: {} });
    ok({ type: "render", component: "SearchBox", params: { q: "x", n: [1] } });
  });

  test("render: component required, must be a non-empty string", () => {
    bad({ type: "render" }, /"component" is required/);
    bad({ type: "render", component: "" }, /must not be empty/);
    bad({ type: "render", component: 7 }, /must be a string/);
  });

  test("render: params must be a plain object (not array, not null)", () => {
    bad({ type: "render", component: "A", params: [] }, /plain object, got an array/);
    bad({ type: "render", component: "A", params: null }, /plain object, got null/);
    bad({ type: "render", component: "A", params: "x" }, /plain object/);
  });

  test("render: widgetId is forbidden", () => {
    bad({ type: "render", component: "A", widgetId: "w1" }, /"widgetId" is not allowed/);
  });

  test("update: type + non-empty widgetId + params (plain object), all required", () => {
    ok({ type: "update", widgetId: "w1", params: { q: 1 } });
    ok({ type: "update", widgetId: "w1", params: {} });
    bad({ type: "update", widgetId: "w1" }, /"params" is required/);
    bad({ type: "update", params: {} }, /"widgetId" is required/);
    bad({ type: "update", widgetId: "", params: {} }, /must not be empty/);
    bad({ type: "update", widgetId: "w1", params: [1] }, /plain object, got an array/);
    bad({ type: "update", widgetId: "w1", params: null }, /plain object, got null/);
  });

  test("update: component is forbidden", () => {
    bad(
      { type: "update", widgetId: "w1", params: {}, component: "A" },
      /"component" is not allowed/,
    );
  });

  test("destroy: type + non-empty widgetId", () => {
    ok({ type: "destroy", widgetId: "w1" });
    bad({ type: "destroy" }, /"widgetId" is required/);
    bad({ type: "destroy", widgetId: 1 }, /must be a string/);
  });

  test("destroy: component and params are forbidden", () => {
    bad({ type: "destroy", widgetId: "w1", component: "A" }, /"component" is not allowed/);
    bad({ type: "destroy", widgetId: "w1", params: {} }, /"params" is not allowed/);
  });

  test("the value must be a plain object with a known type", () => {
    bad(null, /JSON object, got null/);
    bad([], /JSON object, got an array/);
    bad("render", /JSON object, got a string/);
    bad(new Date(0), /JSON object, got a non-plain object/);
    bad({}, /"type" is required/);
    bad({ type: "mount", component: "A" }, /"type" must be/);
    bad({ type: 1 }, /"type" must be/);
  });

  test("unknown extra members are allowed and passed through unchanged", () => {
    ok({ type: "render", component: "A", note: "x" });
  });

  test("plain objects include null-prototype objects; class instances are not plain", () => {
    expect(isPlainObject(Object.create(null))).toBe(true);
    expect(isPlainObject(new (class X {})())).toBe(false);
    expect(isPlainObject(new Map())).toBe(false);
  });
});

describe("validateUiEvent", () => {
  test("accepts the protocol doc's example and a payload-less event", () => {
    const e = {
      type: "ArticleList:open",
      widgetId: "w1",
      payload: { id: 3 },
      timestamp: 1716020000000,
    };
    expect(validateUiEvent(e)).toEqual({ ok: true, event: e });
    expect(validateUiEvent({ type: "A:x", widgetId: "w1", timestamp: 1 }).ok).toBe(true);
  });

  test("rejects missing or mistyped fields", () => {
    for (const v of [
      null,
      [],
      { widgetId: "w1", timestamp: 1 },
      { type: "", widgetId: "w1", timestamp: 1 },
      { type: "A:x", timestamp: 1 },
      { type: "A:x", widgetId: 1, timestamp: 1 },
      { type: "A:x", widgetId: "w1" },
      { type: "A:x", widgetId: "w1", timestamp: "1" },
    ]) {
      expect(validateUiEvent(v).ok).toBe(false);
    }
  });
});

// ---- agreement with the JSON Schemas ----

const commandCorpus: unknown[] = [
  { type: "render", component: "SearchBox", params: { q: "" } },
  { type: "render", component: "SearchBox" },
  { type: "render", component: "\u{1F600}" },
  { type: "render", component: "A", extra: [1, 2] },
  { type: "update", widgetId: "w1", params: { a: { b: null } } },
  { type: "destroy", widgetId: "w1" },
  { type: "destroy", widgetId: "w1", note: 1 },
  { type: "render" },
  { type: "render", component: "" },
  { type: "render", component: null },
  { type: "render", component: "A", params: [] },
  { type: "render", component: "A", params: null },
  { type: "render", component: "A", params: 1 },
  { type: "render", component: "A", widgetId: "w1" },
  { type: "render", component: "A", widgetId: null },
  { type: "update", widgetId: "w1" },
  { type: "update", params: {} },
  { type: "update", widgetId: "", params: {} },
  { type: "update", widgetId: "w1", params: [] },
  { type: "update", widgetId: "w1", params: null },
  { type: "update", widgetId: "w1", params: {}, component: "A" },
  { type: "destroy" },
  { type: "destroy", widgetId: "" },
  { type: "destroy", widgetId: 5 },
  { type: "destroy", widgetId: "w1", component: "A" },
  { type: "destroy", widgetId: "w1", params: {} },
  { type: "destroy", widgetId: "w1", params: null },
  { type: "Render", component: "A" },
  { type: null },
  {},
  [],
  [{ type: "destroy", widgetId: "w1" }],
  null,
  "render",
  42,
  true,
];

// Random JSON commands: random subsets of the relevant members with values of
// every JSON kind, biased toward the ones that make a command valid.
const jsonValue = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.constantFrom("", "w1", "A"),
  fc.constant([]),
  fc.constant({}),
  fc.constant({ x: 1 }),
);
const randomCommand = fc.oneof(
  fc.record(
    {
      type: fc.oneof(fc.constantFrom("render", "update", "destroy"), jsonValue),
      component: fc.oneof(fc.constantFrom("SearchBox", ""), jsonValue),
      widgetId: fc.oneof(fc.constantFrom("w1", ""), jsonValue),
      params: fc.oneof(fc.constantFrom({}, { a: 1 }), jsonValue),
      other: jsonValue,
    },
    { requiredKeys: [] },
  ),
  jsonValue,
);

describe("JSON Schemas agree with the validators", () => {
  test("command corpus: validateCommand and aui-command.schema.json agree on every entry", () => {
    let valid = 0;
    for (const v of commandCorpus) {
      const ours = validateCommand(v).ok;
      expect([v, commandSchema(v)]).toEqual([v, ours]);
      if (ours) valid++;
    }
    expect(valid).toBe(7);
  });

  test("random commands: validateCommand and the schema agree", () => {
    fc.assert(
      fc.property(randomCommand, (v) => {
        expect(commandSchema(v)).toBe(validateCommand(v).ok);
      }),
      { numRuns: 3000 },
    );
  });

  test("UI event corpus: validateUiEvent and aui-ui-event.schema.json agree", () => {
    const corpus: unknown[] = [
      { type: "ArticleList:open", widgetId: "w1", payload: { id: 3 }, timestamp: 1716020000000 },
      { type: "aui:widget-ready", widgetId: "w1", payload: { component: "A" }, timestamp: 1 },
      { type: "A:x", widgetId: "", timestamp: 0, payload: null },
      { type: "A:x", widgetId: "w1", timestamp: 1 },
      { type: "", widgetId: "w1", timestamp: 1 },
      { widgetId: "w1", timestamp: 1 },
      { type: "A:x", timestamp: 1 },
      { type: "A:x", widgetId: "w1" },
      { type: "A:x", widgetId: "w1", timestamp: "1" },
      { type: 1, widgetId: "w1", timestamp: 1 },
      [],
      null,
    ];
    for (const v of corpus) expect([v, eventSchema(v)]).toEqual([v, validateUiEvent(v).ok]);
  });

  test("manifest schema: accepts a full manifest, rejects broken ones", () => {
    const manifest: Manifest = {
      specVersion: "1.0",
      library: "demo-widgets",
      components: [
        {
          name: "SearchBox",
          description: "A search field with a result count.",
          params: {
            type: "object",
            properties: { query: { type: "string" }, count: { type: "integer" } },
          },
          events: [
            {
              name: "submit",
              description: "The user pressed enter.",
              payload: { type: "object", properties: { query: { type: "string" } } },
            },
          ],
          lifecycle: { render: true, update: true, destroy: true },
        },
      ],
    };
    expect(manifestSchema(manifest)).toBe(true);
    const c = manifest.components[0]!;
    for (const broken of [
      { ...manifest, specVersion: undefined },
      { ...manifest, library: 3 },
      { ...manifest, components: {} },
      { ...manifest, components: [{ ...c, name: "" }] },
      {
        ...manifest,
        components: [{ ...c, lifecycle: { render: true, update: "yes", destroy: true } }],
      },
      { ...manifest, components: [{ ...c, events: [{ description: "no name" }] }] },
      { ...manifest, components: [{ ...c, params: [] }] },
    ]) {
      expect(manifestSchema(JSON.parse(JSON.stringify(broken)))).toBe(false);
    }
  });
});
