// The node's defaults agree with each other: the client's default URL is the
// address `serve` binds by default, that address is loopback only, and the
// environment variable names are distinct and share one prefix.
import { describe, expect, it } from "vitest";
import {
  DEFAULT_EVENT_LOG,
  DEFAULT_HOST,
  DEFAULT_PORT,
  DEFAULT_URL,
  DEFAULT_WORKSPACE,
  ENV,
} from "./defaults.js";

describe("defaults", () => {
  it("DEFAULT_URL is http on DEFAULT_HOST:DEFAULT_PORT", () => {
    const u = new URL(DEFAULT_URL);
    expect(u.protocol).toBe("http:");
    expect(u.hostname).toBe(DEFAULT_HOST);
    expect(Number(u.port)).toBe(DEFAULT_PORT);
    expect(u.pathname).toBe("/");
  });

  it("binds loopback only, on a valid unprivileged port", () => {
    expect(DEFAULT_HOST).toMatch(/^127\./);
    expect(Number.isInteger(DEFAULT_PORT)).toBe(true);
    expect(DEFAULT_PORT).toBeGreaterThanOrEqual(1024);
    expect(DEFAULT_PORT).toBeLessThanOrEqual(65535);
  });

  it("keeps the workspace relative and the event log in memory", () => {
    expect(DEFAULT_WORKSPACE.startsWith("/")).toBe(false);
    expect(DEFAULT_EVENT_LOG).toBe("memory");
  });

  it("names distinct AGENT_COMPUTER_* environment variables", () => {
    const names = Object.values(ENV);
    expect(new Set(names).size).toBe(names.length);
    for (const n of names) expect(n).toMatch(/^AGENT_COMPUTER_[A-Z_]+$/);
  });
});
