// What exec accepts before anything is spawned: shell lines and argvs become
// the program to run, ids/env/signals are checked, and every refusal is EINVAL;
// the default base environment carries only the documented variables.
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { checkEnv, checkId, checkSignal, defaultBaseEnv, parseSpec } from "./exec-spec.js";
import type { ExecSpec } from "./types.js";

const einval = expect.objectContaining({ code: "EINVAL" });

describe("parseSpec", () => {
  it("runs a command string (bare or as { command }) through /bin/sh -c and records it as given", () => {
    expect(parseSpec("echo hi")).toEqual({
      file: "/bin/sh",
      args: ["-c", "echo hi"],
      command: "echo hi",
    });
    expect(parseSpec({ command: "ls -l" })).toEqual({
      file: "/bin/sh",
      args: ["-c", "ls -l"],
      command: "ls -l",
    });
  });

  it("runs an argv without a shell and records a copy of it", () => {
    const argv = ["printf", "%s\\n", "a b"];
    const r = parseSpec({ argv });
    expect(r).toEqual({ file: "printf", args: ["%s\\n", "a b"], command: argv });
    expect(r.command).not.toBe(argv);
  });

  it("keeps any non-empty argv of NUL-free strings intact (property)", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.string().filter((s) => !s.includes("\0")),
          { minLength: 1, maxLength: 6 },
        ),
        (argv) => {
          fc.pre(argv[0] !== "");
          const r = parseSpec({ argv });
          expect([r.file, ...r.args]).toEqual(argv);
          expect(r.command).toEqual(argv);
        },
      ),
    );
  });

  it("refuses empty commands, bad argvs and other shapes with EINVAL", () => {
    const bad: unknown[] = [
      "",
      { command: "" },
      { argv: [] },
      { argv: [""] },
      { argv: ["ls", 3] },
      { argv: ["ls", "a\0b"] },
      { argv: "ls" },
      { command: 5 },
      {},
      null,
      undefined,
      42,
    ];
    for (const spec of bad) expect(() => parseSpec(spec as ExecSpec)).toThrow(einval);
  });
});

describe("checkId", () => {
  it("accepts 1-128 characters of [A-Za-z0-9._:-] starting with a letter or digit", () => {
    for (const id of ["a", "Z9", "build-1.2:3_x", "0", "a".repeat(128)])
      expect(checkId(id)).toBe(id);
  });

  it("refuses empty, over-long, leading punctuation, other characters and non-strings", () => {
    for (const id of [
      "",
      "a".repeat(129),
      "-a",
      ".a",
      "a/b",
      "a b",
      "é",
      "a\n",
      5,
      null,
      undefined,
    ]) {
      expect(() => checkId(id)).toThrow(einval);
    }
  });
});

describe("checkEnv", () => {
  it("treats an absent overlay as empty and copies a valid one", () => {
    expect(checkEnv(undefined)).toEqual({});
    const env = { A: "1", B_2: "", "x.y": "with=equals" };
    const out = checkEnv(env);
    expect(out).toEqual(env);
    expect(out).not.toBe(env);
  });

  it("refuses empty names, '=' or NUL in names, __proto__, NUL or non-strings in values, and non-objects", () => {
    const bad: unknown[] = [
      { "": "x" },
      { "A=B": "x" },
      { "A\0": "x" },
      { A: "x\0" },
      { A: 1 },
      { A: undefined },
      JSON.parse('{"__proto__": "x"}'),
      null,
      "A=1",
    ];
    for (const env of bad) expect(() => checkEnv(env as Record<string, string>)).toThrow(einval);
  });
});

describe("checkSignal", () => {
  it("accepts the host's signal names and refuses anything else", () => {
    for (const s of ["SIGTERM", "SIGKILL", "SIGINT", "SIGHUP"]) expect(checkSignal(s)).toBe(s);
    for (const s of ["TERM", "sigterm", "SIGNOPE", "", "9"])
      expect(() => checkSignal(s)).toThrow(einval);
    expect(() => checkSignal(9 as unknown as string)).toThrow(einval);
  });
});

describe("defaultBaseEnv", () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it("carries only the documented variables, never the rest of the server's environment", () => {
    vi.stubEnv("AGENT_SECRET_FOR_TEST", "s3cret");
    vi.stubEnv("HOME", "/home/test");
    vi.stubEnv("TZ", "UTC");
    const env = defaultBaseEnv();
    expect(env).not.toHaveProperty("AGENT_SECRET_FOR_TEST");
    expect(env.HOME).toBe("/home/test");
    expect(env.TZ).toBe("UTC");
    const allowed = ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "TZ", "TMPDIR"];
    for (const k of Object.keys(env)) expect(allowed).toContain(k);
  });

  it("fills in a standard PATH and LANG=C.UTF-8 when the server has none", () => {
    vi.stubEnv("PATH", undefined);
    vi.stubEnv("LANG", undefined);
    const env = defaultBaseEnv();
    expect(env.PATH).toBe("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    expect(env.LANG).toBe("C.UTF-8");
  });

  it("keeps the server's own PATH and LANG when set", () => {
    vi.stubEnv("PATH", "/opt/bin");
    vi.stubEnv("LANG", "de_DE.UTF-8");
    expect(defaultBaseEnv()).toMatchObject({ PATH: "/opt/bin", LANG: "de_DE.UTF-8" });
  });
});
