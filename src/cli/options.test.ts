// What every CLI command shares, without a server: option parsers refuse bad
// values with commander's usage error, CliError carries its exit code and the
// EINVAL code, the server URL comes from --url, then the env, then the
// default, and describeError gives one line per error code.
import { InvalidArgumentError } from "commander";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { DEFAULT_URL, ENV } from "../host/defaults.js";
import { ComputerError } from "../wire/errors.js";
import {
  act,
  CliError,
  collectEnv,
  collectList,
  describeError,
  EXIT_ERROR,
  EXIT_USAGE,
  exitState,
  intOption,
  makeClient,
  serverUrl,
} from "./options.js";

describe("intOption", () => {
  it("accepts decimal integers at or above the minimum", () => {
    expect(intOption("--n")("0")).toBe(0);
    expect(intOption("--n", 1)("1")).toBe(1);
    expect(intOption("--n")("0042")).toBe(42);
  });

  it("refuses signs, fractions, words, blanks and values under the minimum with a usage error naming the option", () => {
    for (const bad of ["-1", "+1", "1.5", "1e3", "abc", "", " 1", "0x10"]) {
      expect(() => intOption("--timeout")(bad)).toThrow(InvalidArgumentError);
    }
    expect(() => intOption("--grace", 1)("0")).toThrow(/--grace must be an integer >= 1/);
  });

  it("with a maximum, accepts the bounds and refuses what lies outside, naming both", () => {
    const parse = intOption("--helpers", 1, 16);
    expect(parse("1")).toBe(1);
    expect(parse("16")).toBe(16);
    for (const bad of ["0", "17"]) {
      expect(() => parse(bad)).toThrow(/--helpers must be an integer from 1 to 16/);
    }
  });

  it("returns exactly the number written, for any integer at or above the minimum (property)", () => {
    fc.assert(
      fc.property(fc.nat(1_000_000), fc.nat(1_000_000), (min, n) => {
        const parse = intOption("--x", min);
        if (n >= min) expect(parse(String(n))).toBe(n);
        else expect(() => parse(String(n))).toThrow(InvalidArgumentError);
      }),
    );
  });
});

describe("collectEnv and collectList", () => {
  it("splits K=V at the first '=' and adds to (without changing) the previous overlay", () => {
    const prev = { A: "1" };
    const next = collectEnv("B=x=y", prev);
    expect(next).toEqual({ A: "1", B: "x=y" });
    expect(prev).toEqual({ A: "1" });
    expect(collectEnv("A=", next)).toEqual({ A: "", B: "x=y" });
  });

  it("refuses a value without a name or without '='", () => {
    for (const bad of ["=x", "AB", ""])
      expect(() => collectEnv(bad, {})).toThrow(InvalidArgumentError);
  });

  it("collects repeated values in order", () => {
    expect(collectList("b", collectList("a", []))).toEqual(["a", "b"]);
  });
});

describe("CliError", () => {
  it("is an EINVAL ComputerError exiting 1 unless told otherwise", () => {
    const e = new CliError("bad");
    expect(e).toBeInstanceOf(ComputerError);
    expect(e).toMatchObject({
      name: "CliError",
      code: "EINVAL",
      message: "bad",
      exitCode: EXIT_ERROR,
    });
    expect(new CliError("usage", EXIT_USAGE).exitCode).toBe(2);
    expect([EXIT_ERROR, EXIT_USAGE]).toEqual([1, 2]);
  });
});

describe("server URL", () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it("takes --url first, then the environment, then the default", () => {
    vi.stubEnv(ENV.url, "http://env:1");
    expect(serverUrl({ url: "http://flag:2" })).toBe("http://flag:2");
    expect(serverUrl({})).toBe("http://env:1");
    vi.stubEnv(ENV.url, undefined);
    expect(serverUrl()).toBe(DEFAULT_URL);
  });

  it("makes a client for a valid URL and refuses an invalid one with a usage exit", () => {
    vi.stubEnv(ENV.token, undefined);
    expect(makeClient({ url: "http://127.0.0.1:9/" }).url).toBe("http://127.0.0.1:9");
    expect(() => makeClient({ url: "not a url" })).toThrow(
      expect.objectContaining({
        name: "CliError",
        exitCode: EXIT_USAGE,
        message: "invalid server URL: not a url",
      }),
    );
  });
});

describe("describeError", () => {
  it("explains an unreachable server and where its URL comes from", () => {
    const line = describeError(new ComputerError("ENETWORK", "fetch failed"), "http://h:1");
    expect(line).toContain("fetch failed");
    expect(line).toContain(ENV.url);
    expect(line).toContain("--url");
  });

  it("names the token settings on EUNAUTHORIZED, and says forbidden on EFORBIDDEN", () => {
    expect(describeError(new ComputerError("EUNAUTHORIZED", "x"))).toContain(ENV.token);
    expect(describeError(new ComputerError("EFORBIDDEN", "origin"))).toBe("forbidden: origin");
  });

  it("gives the message of ENOENT, the message and code of other errors, and plain values as text", () => {
    expect(describeError(new ComputerError("ENOENT", "no such execution: x"))).toBe(
      "no such execution: x",
    );
    expect(describeError(new ComputerError("EINVAL", "bad id"))).toBe("bad id (EINVAL)");
    expect(describeError(new Error("boom"))).toBe("boom");
    expect(describeError("text")).toBe("text");
    expect(describeError(undefined)).toBe("undefined");
  });

  it("is always one line for a one-line message (property)", () => {
    const codes = [
      "ENETWORK",
      "EUNAUTHORIZED",
      "EFORBIDDEN",
      "ENOENT",
      "EINVAL",
      "EABORTED",
    ] as const;
    fc.assert(
      fc.property(
        fc.constantFrom(...codes),
        fc.string().filter((s) => !/[\r\n]/.test(s)),
        (code, msg) => {
          expect(describeError(new ComputerError(code, msg))).not.toMatch(/[\r\n]/);
        },
      ),
    );
  });
});

describe("act", () => {
  it("turns the number an action returns into the exit code, anything else into 0", async () => {
    await act(async () => 3)();
    expect(exitState.code).toBe(3);
    await act(async () => "done")();
    expect(exitState.code).toBe(0);
    await expect(act(async () => Promise.reject(new Error("x")))()).rejects.toThrow("x");
  });
});
