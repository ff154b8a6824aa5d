// Validation of untrusted A@UI values (docs/protocol.md §3). Commands arrive over the
// network from an agent, so every transport checks them with this one
// function before anything is dispatched. Hand-written rather than generated
// from the JSON Schemas: it is on the hot path of every command (no
// allocation on success) and its reasons are written for humans; a test runs
// both over one corpus so they cannot drift apart.
//
// The table, exactly:
//   render:  required type, component (non-empty string); optional params
//            (plain object); forbidden widgetId
//   update:  required type, widgetId (non-empty string), params (plain
//            object); forbidden component
//   destroy: required type, widgetId (non-empty string); forbidden component,
//            params
// Other members are allowed (forward compatibility) and passed through.

import type { Command, JsonObject, UiEvent } from "./types.js";

export type CommandValidation = { ok: true; command: Command } | { ok: false; reason: string };

export type UiEventValidation = { ok: true; event: UiEvent } | { ok: false; reason: string };

const hasOwn = Object.prototype.hasOwnProperty;

/**
 * A plain object: not null, not an array, and created as `{}` / by JSON.parse
 * (prototype Object.prototype or null), so Dates, Maps or class instances,
 * which do not survive JSON, are refused too.
 */
export function isPlainObject(value: unknown): value is JsonObject {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "a non-plain object" : `a ${typeof value}`;
}

function nonEmptyString(obj: JsonObject, key: string, type: string): string | undefined {
  if (!hasOwn.call(obj, key)) return `${type}: "${key}" is required`;
  const v = obj[key];
  if (typeof v !== "string") return `${type}: "${key}" must be a string, got ${describe(v)}`;
  if (v.length === 0) return `${type}: "${key}" must not be empty`;
  return undefined;
}

function plainParams(obj: JsonObject, type: string): string | undefined {
  const v = obj.params;
  return isPlainObject(v)
    ? undefined
    : `${type}: "params" must be a plain object, got ${describe(v)}`;
}

function forbidden(obj: JsonObject, key: string, type: string): string | undefined {
  return hasOwn.call(obj, key) ? `${type}: "${key}" is not allowed` : undefined;
}

/** Checks one command against docs/protocol.md §3's table. Never throws. */
export function validateCommand(value: unknown): CommandValidation {
  if (!isPlainObject(value)) {
    return { ok: false, reason: `command must be a JSON object, got ${describe(value)}` };
  }
  const type = value.type;
  let reason: string | undefined;
  switch (type) {
    case "render":
      reason =
        nonEmptyString(value, "component", type) ??
        (hasOwn.call(value, "params") ? plainParams(value, type) : undefined) ??
        forbidden(value, "widgetId", type);
      break;
    case "update":
      reason =
        nonEmptyString(value, "widgetId", type) ??
        (hasOwn.call(value, "params")
          ? plainParams(value, type)
          : `${type}: "params" is required`) ??
        forbidden(value, "component", type);
      break;
    case "destroy":
      reason =
        nonEmptyString(value, "widgetId", type) ??
        forbidden(value, "component", type) ??
        forbidden(value, "params", type);
      break;
    default:
      reason = hasOwn.call(value, "type")
        ? `"type" must be "render", "update" or "destroy", got ${typeof type === "string" ? JSON.stringify(type) : describe(type)}`
        : `"type" is required`;
  }
  return reason === undefined
    ? { ok: true, command: value as unknown as Command }
    : { ok: false, reason };
}

/**
 * Checks a UI → agent event: `type` non-empty string, `widgetId` string,
 * `timestamp` finite number; `payload` may be any JSON value or absent (a
 * component that emits no payload). Used by relays that accept events from
 * a browser.
 */
export function validateUiEvent(value: unknown): UiEventValidation {
  if (!isPlainObject(value)) {
    return { ok: false, reason: `UI event must be a JSON object, got ${describe(value)}` };
  }
  const reason =
    nonEmptyString(value, "type", "event") ??
    (typeof value.widgetId === "string" ? undefined : `event: "widgetId" must be a string`) ??
    (typeof value.timestamp === "number" && Number.isFinite(value.timestamp)
      ? undefined
      : `event: "timestamp" must be a number (ms since epoch)`);
  return reason === undefined
    ? { ok: true, event: value as unknown as UiEvent }
    : { ok: false, reason };
}
