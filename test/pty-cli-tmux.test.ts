// `agent-computer shell`, `attach` and `exec -t` driven as a person would:
// the built CLI (dist/cli/main.js) running inside a real tmux pane, keys sent
// with `tmux send-keys`, the pane read with `tmux capture-pane`. Checks typing,
// Ctrl-C on the remote shell, detaching with Ctrl-] (the shell keeps running
// on the server) and attaching again (the screen comes back).

import { execFileSync, spawnSync } from "node:child_process";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureDistBuilt } from "./support/dist.js";
import { type Harness, startServer } from "./support/server-harness.js";

const root = path.resolve(import.meta.dirname, "..");
const cli = path.join(root, "dist/cli/main.js");
const haveTmux = spawnSync("tmux", ["-V"]).status === 0;
const socket = `ac-pty-test-${process.pid}`;

let h: Harness;
beforeAll(async () => {
  ensureDistBuilt();
  h = await startServer({ computer: { killGraceMs: 1000 } });
}, 120_000);
afterAll(async () => {
  spawnSync("tmux", ["-L", socket, "kill-server"]);
  await h?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function tmux(...args: string[]): string {
  return execFileSync("tmux", ["-L", socket, ...args], { encoding: "utf8" });
}

/**
 * Starts `cmd` in a new detached tmux session of 100x30 with the server's
 * address. The pane's shell prints the CLI's exit status when it ends:
 * tmux's own "Pane is dead" depends on tmux reaping its child, which tmux
 * 3.3a under load sometimes never does (the CLI stays a zombie).
 */
function startPane(name: string, cmd: string): void {
  tmux(
    "new-session",
    "-d",
    "-s",
    name,
    "-x",
    "100",
    "-y",
    "30",
    "-e",
    `AGENT_COMPUTER_URL=${h.url}`,
    "-e",
    `AGENT_COMPUTER_TOKEN=${h.token}`,
    `${cmd}; echo "[cli exited with status $?]"`,
    ";",
    "set-option",
    "-t",
    name,
    "remain-on-exit",
    "on",
  );
}

function pane(name: string): string {
  // With some history: the last lines scroll the screen.
  return tmux("capture-pane", "-p", "-S", "-50", "-t", name);
}

async function until(name: string, pattern: RegExp, ms = 30_000): Promise<string> {
  const end = Date.now() + ms;
  for (;;) {
    const text = pane(name);
    if (pattern.test(text)) return text;
    if (Date.now() > end) throw new Error(`timed out waiting for ${pattern}; pane:\n${text}`);
    await sleep(50);
  }
}

describe.skipIf(!haveTmux)("the CLI on a pty, in tmux", () => {
  it("shell: type, Ctrl-C, detach with Ctrl-], attach again", async () => {
    startPane(
      "s1",
      `${process.execPath} ${cli} shell --id tmux-shell --command "exec bash --norc --noprofile -i" -e PS1='remote$ '`,
    );
    await until("s1", /remote\$\s*$/m);
    tmux("send-keys", "-t", "s1", "stty size; tty", "Enter");
    await until("s1", /^30 100$/m);
    await until("s1", /^\/dev\/pts\/\d+$/m);
    // Ctrl-C reaches the remote foreground job; the shell survives.
    tmux("send-keys", "-t", "s1", "sleep 30; echo not-interrupted", "Enter");
    await sleep(500);
    tmux("send-keys", "-t", "s1", "C-c");
    tmux("send-keys", "-t", "s1", "echo survived-$((6*7))", "Enter");
    await until("s1", /^survived-42$/m);
    expect(pane("s1")).not.toMatch(/^not-interrupted$/m);
    // Detach: the CLI ends, the shell keeps running on the server.
    tmux("send-keys", "-t", "s1", "echo marker-before-detach", "Enter");
    await until("s1", /^marker-before-detach$/m);
    tmux("send-keys", "-t", "s1", "C-]");
    await until("s1", /detached from tmux-shell/);
    expect((await (await h.client.get("tmux-shell")).info()).state).toBe("running");
    // Attach from another pane of another size: the screen is back, typing works.
    startPane("s2", `${process.execPath} ${cli} attach tmux-shell`);
    tmux("resize-window", "-t", "s2", "-x", "90", "-y", "25");
    await until("s2", /^marker-before-detach$/m);
    tmux("send-keys", "-t", "s2", "stty size; echo attached-ok", "Enter");
    await until("s2", /^attached-ok$/m);
    await until("s2", /^2[45] 90$/m);
    tmux("send-keys", "-t", "s2", "exit 7", "Enter");
    await until("s2", /^\[cli exited with status 7\]$/m);
  });

  it("exec -t runs a command on a pty and exits with its code", async () => {
    startPane(
      "s3",
      `${process.execPath} ${cli} exec -t -- sh -c 'sleep 0.5; tty; stty size; exit 3'`,
    );
    await until("s3", /^\[cli exited with status 3\]$/m);
    const text = pane("s3");
    expect(text).toMatch(/^\/dev\/pts\/\d+$/m);
    expect(text).toMatch(/^30 100$/m);
  });
});
