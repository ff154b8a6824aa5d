// The hand-off to a warm sandbox (warm-pool.ts): the tiny init a pooled
// sandbox runs while it waits, and the request the server writes to it. Pure:
// text in, text out, so it can be read and tested without running anything.
//
// Why a shell and why this shape:
// - The init must exec the command in place (no extra process stays), which
//   rules out node; /bin/sh is always inside the sandbox and costs nothing
//   while it waits. It must read the request from the control fd (3) without
//   an exec on the hand-off path: the init is `sh -c 'exec sh -s 4<&0 0<&3
//   3<&-'`, so the second shell reads its script from the control socket (fd
//   0 while it waits; Node's stdio "pipes" are socket pairs, which cannot be
//   reopened through /dev/fd) and keeps the command's real stdin on fd 4.
// - The request is that script: `cd` to the execution's directory, unset
//   what the shell itself exports (its PATH, PWD, OLDPWD), `export` the
//   execution's variables (the init is spawned with an empty environment, so
//   nothing else is exported), then `exec` the command with stdin put back on fd
//   0 (or /dev/null) and fd 4 closed: the command's environment is exactly
//   the execution's (its marker, AGENT_COMPUTER_EXEC_KEY, included), nothing
//   of the init's. A variable whose name the shell cannot export goes through
//   `exec /usr/bin/env -i -- NAME=VALUE… argv…` instead (one exec more).
//   Every word is single-quoted, so any text is safe.
// - The rlimits, cgroups, mounts, uid and network were set when the sandbox
//   was spawned; a request only runs in a sandbox whose profile matches it
//   (the pool's key), so nothing is applied or widened at hand-off.

/** The init's argv (after bubblewrap and `env --default-signal`). */
export const WARM_INIT_ARGV = ["/bin/sh", "-c", "exec /bin/sh -s 4<&0 0<&3 3<&-"];

/** The control fd of a warm sandbox, as the server spawns it (stdio index). */
export const CONTROL_FD = 3;

/** A single-quoted shell word. */
export function shellWord(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

export interface HandoffRequest {
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  /** "ignore": the command's stdin is /dev/null (what spawn's "ignore" gives). */
  stdin: "pipe" | "ignore";
}

/** Whether a request can be written as a script (NUL cannot be in argv or env). */
export function canHandOff(req: Omit<HandoffRequest, "stdin">): boolean {
  const bad = (s: string) => s.includes("\0");
  if (req.argv.length === 0 || req.argv.some(bad) || bad(req.cwd)) return false;
  for (const [k, v] of Object.entries(req.env)) {
    if (bad(k) || bad(v) || k.includes("=") || k === "") return false;
  }
  return true;
}

const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The script the init runs: change directory, then become the command. */
export function handoffScript(req: HandoffRequest): string {
  const env = Object.entries(req.env).map(([k, v]) => shellWord(`${k}=${v}`));
  const argv = req.argv.map(shellWord).join(" ");
  const stdin = req.stdin === "pipe" ? "0<&4" : "0</dev/null";
  const cd = `cd -- ${shellWord(req.cwd)} || exit 1\n`;
  if (Object.keys(req.env).every((k) => SHELL_NAME.test(k))) {
    // The shell sets the environment itself (one exec less on the hand-off):
    // what it exported of its own (PATH from its spawn, PWD/OLDPWD from `cd`)
    // is unset first, so the command's environment is exactly req.env.
    const exports = env.length > 0 ? `export ${env.join(" ")}\n` : "";
    return `${cd}unset PATH PWD OLDPWD\n${exports}exec ${stdin} 4<&- ${argv}\n`;
  }
  return `${cd}exec ${stdin} 4<&- /usr/bin/env -i -- ${env.join(" ")} ${argv}\n`;
}
