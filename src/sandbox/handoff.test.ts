// The hand-off script, run by a real /bin/sh outside any sandbox: the command
// gets exactly its argv, environment, directory and stdin, whatever the text.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { canHandOff, handoffScript, WARM_INIT_ARGV } from "./handoff.js";

const dir = mkdtempSync(path.join(tmpdir(), "ac-handoff-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Run the init as a warm sandbox would (control on fd 3, stdin on fd 0), with `script` on fd 3. */
function runInit(script: string, stdin: string): { out: string; code: number | null } {
  // Through a here-document fd 3 is a file: close enough to the socket for the script's logic.
  const r = spawnSync(
    "/bin/sh",
    ["-c", `{ ${WARM_INIT_ARGV[2]!}; } 3<<'AGENT_COMPUTER_EOF'\n${script}AGENT_COMPUTER_EOF\n`],
    { input: stdin, encoding: "utf8", env: { PATH: "/init/only" } },
  );
  return { out: r.stdout + r.stderr, code: r.status };
}

const printer = [
  "/bin/sh",
  "-c",
  // argv, the directory, the environment exactly as exec'd (NUL-separated → "|"), stdin.
  'for a; do printf "[%s]" "$a"; done; echo; pwd; tr "\\0" "|" </proc/$$/environ; echo; cat',
  "argv0",
];

describe("warm sandbox hand-off", () => {
  it("runs the command with exactly its argv, env, cwd and stdin (quotes, newlines, spaces)", () => {
    const env = { PATH: "/usr/bin:/bin", A: 'it\'s "quoted"\nand $HOME `x`', EMPTY: "" };
    const script = handoffScript({
      argv: [...printer, "one two", "it's", "$(echo no)", "line\nbreak", ""],
      cwd: dir,
      env,
      stdin: "pipe",
    });
    const r = runInit(script, "from stdin\n");
    expect(r.code).toBe(0);
    const lines = r.out.split("\n");
    expect(r.out).toContain("[one two][it's][$(echo no)][line\nbreak][]");
    expect(lines).toContain(dir);
    // Exactly the execution's environment: nothing of the init's (its PATH, PWD, OLDPWD).
    const start = r.out.indexOf(`${dir}\n`) + dir.length + 1;
    const environ = r.out.slice(start, r.out.lastIndexOf("|\n"));
    const vars = environ.split("|").filter(Boolean).sort();
    expect(vars).toEqual(
      Object.entries(env)
        .map(([k, v]) => `${k}=${v}`)
        .sort(),
    );
    expect(r.out.endsWith("from stdin\n")).toBe(true);
  });

  it('with stdin "ignore" the command reads /dev/null', () => {
    const script = handoffScript({ argv: printer, cwd: dir, env: {}, stdin: "ignore" });
    const r = runInit(script, "must not be read\n");
    expect(r.code).toBe(0);
    expect(r.out).not.toContain("must not be read");
  });

  it("a variable the shell cannot export goes through env -i", () => {
    const script = handoffScript({
      argv: ["/usr/bin/env"],
      cwd: dir,
      env: { "ODD.NAME": "1", PATH: "/bin" },
      stdin: "ignore",
    });
    expect(script).toContain("/usr/bin/env -i --");
    const r = runInit(script, "");
    expect(r.out.split("\n").filter(Boolean).sort()).toEqual(["ODD.NAME=1", "PATH=/bin"]);
  });

  it("a directory that cannot be entered fails the execution", () => {
    const script = handoffScript({
      argv: ["/bin/echo", "ran"],
      cwd: path.join(dir, "missing"),
      env: {},
      stdin: "ignore",
    });
    const r = runInit(script, "");
    expect(r.code).toBe(1);
    expect(r.out).not.toContain("ran");
  });

  it("refuses what a script cannot carry (NUL, a name with =)", () => {
    expect(canHandOff({ argv: ["a\0b"], cwd: "/", env: {} })).toBe(false);
    expect(canHandOff({ argv: ["a"], cwd: "/", env: { "A=B": "c" } })).toBe(false);
    expect(canHandOff({ argv: ["a"], cwd: "/", env: { A: "x\0" } })).toBe(false);
    expect(canHandOff({ argv: ["a"], cwd: "/", env: { A: "b" } })).toBe(true);
  });
});
