// An interactive session with a pty execution from this terminal, like ssh or
// tmux attach: our terminal in raw mode, every keystroke (Ctrl-C included: it
// is the byte 0x03 for the remote line discipline) sent as stdin, the remote
// terminal resized with ours (SIGWINCH), its output written as is. Ctrl-]
// detaches and leaves it running; `agent-computer attach ID` comes back,
// redrawing the current screen from the server's snapshot first.

import type { ComputerClient, RemoteExecHandle } from "../client/client.js";
import type { ComputerError } from "../wire/errors.js";
import { describeError } from "./options.js";

/** The detach key: Ctrl-] (0x1d), as telnet and `docker attach` use it. */
const DETACH = 0x1d;

/** The shell `shell` starts: the server's login shell, interactive. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion, not a template
export const SHELL_COMMAND = 'exec "${SHELL:-/bin/sh}" -i';

/** The size of our terminal, or 80x24 when stdout is not one. */
export function localSize(): { cols: number; rows: number } {
  const out = process.stdout;
  return out.isTTY && out.columns && out.rows
    ? { cols: out.columns, rows: out.rows }
    : { cols: 80, rows: 24 };
}

/**
 * Runs the session until the execution exits (resolves with its exit code)
 * or the user detaches (resolves with 0). `redraw`: start from the server's
 * screen snapshot instead of replaying from the first event.
 */
export async function interact(
  client: ComputerClient,
  id: string,
  options: { redraw: boolean },
): Promise<number> {
  const handle = await client.get(id);
  const stdin = process.stdin;
  const stdout = process.stdout;
  const raw = stdin.isTTY === true;
  const ac = new AbortController();
  let detached = false;

  let after = 0;
  if (options.redraw) {
    const snap = await handle.screen();
    // Clear screen and scrollback, then draw the snapshot.
    stdout.write(`\x1b[H\x1b[2J\x1b[3J${snap.data}`);
    after = snap.seq;
  }
  if (stdout.isTTY) await handle.resize(localSize()).catch(() => {});
  const onWinch = () => void handle.resize(localSize()).catch(() => {});
  process.on("SIGWINCH", onWinch);

  // Keystrokes go out one write at a time, in order.
  let sending: Promise<void> = Promise.resolve();
  const send = (chunk: Uint8Array) => {
    sending = sending.then(() =>
      handle.write(chunk).catch((err) => {
        if ((err as { code?: string }).code !== "ECLOSED") {
          process.stderr.write(`\r\nagent-computer: stdin: ${describeError(err)}\r\n`);
        }
      }),
    );
  };
  const onData = (chunk: Buffer) => {
    const at = chunk.indexOf(DETACH);
    if (at >= 0) {
      if (at > 0) send(chunk.subarray(0, at));
      detached = true;
      ac.abort();
      return;
    }
    send(chunk);
  };
  if (raw) stdin.setRawMode(true);
  stdin.on("data", onData);
  stdin.resume();

  try {
    const code = await pipeOutput(handle, after, ac.signal);
    return detached ? 0 : code;
  } finally {
    process.off("SIGWINCH", onWinch);
    stdin.off("data", onData);
    if (raw) stdin.setRawMode(false);
    stdin.pause();
    await sending;
    if (detached) {
      process.stderr.write(
        `\r\nagent-computer: detached from ${id} (agent-computer attach ${id} to come back)\r\n`,
      );
    }
  }
}

/** Writes the terminal's output until its exit (its code) or the abort (0). */
async function pipeOutput(
  handle: RemoteExecHandle,
  after: number,
  signal: AbortSignal,
): Promise<number> {
  const onTruncated = (err: ComputerError): number => {
    if (typeof err.earliestSeq !== "number") throw err;
    return err.earliestSeq - 1;
  };
  const reader = handle.events({ after, heartbeats: false, signal, onTruncated }).getReader();
  try {
    for (;;) {
      const { value: ev, done } = await reader.read();
      if (done) return (await handle.info()).exitCode ?? 0;
      if (ev.name === "exit") return ev.value;
      if (ev.name === "stdout" || ev.name === "stderr") {
        const v = ev.value;
        if (!process.stdout.write(typeof v === "string" ? v : Buffer.from(v))) {
          await new Promise((r) => process.stdout.once("drain", r));
        }
      }
    }
  } catch (err) {
    if (signal.aborted) return 0;
    throw err;
  }
}
