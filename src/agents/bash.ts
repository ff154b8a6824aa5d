// The `bash` tool (Anthropic's bash tool semantics): one persistent shell per
// tool set, so `cd`, exports and functions carry over between calls.
//
// The shell is an ordinary execution with stdin "pipe" (so it is visible in
// list_sessions and its output is in the event log like any other). Each
// command is sent as ONE line, `eval '<command, single-quoted>' </dev/null`,
// followed by printing a marker unique to the shell and the command number,
// with the exit status and $PWD, on stdout and on stderr. Hence:
// - boundaries are reliable: a command with an unclosed quote or a syntax
//   error cannot swallow the marker (eval reports the error and returns 2),
//   and a command reading stdin reads /dev/null instead of our next lines;
// - the command is done when both markers arrived, so stderr written just
//   before the end is never attributed to the next command;
// - per-command exit status is the marker's number.
// A command still running at the timeout is not interrupted but the shell is
// killed (its whole process group) and restarted on the next call in the last
// known directory; the result says so. Interrupting only the foreground job
// would need signals the runtime reserves for ending an execution, and a
// loop would carry on with its next step after an interrupt, which is worse
// than a clean restart.

import { randomUUID } from "node:crypto";
import type { ComputerApi, ExecHandle } from "../runtime/types.js";
import { hasCode } from "../wire/errors.js";
import type { LoggedEvent } from "../wire/types.js";
import { drain } from "./drain.js";
import { asBytes, OutputBudget } from "./output.js";
import { startProgress } from "./progress.js";
import type { ToolInput } from "./schemas.js";
import { fail, ok, type ToolCallContext, type ToolResult } from "./types.js";

/** Default bound of one bash command (ms), like common agent harnesses. */
export const DEFAULT_BASH_TIMEOUT_MS = 120_000;

const START_SHELL =
  "command -v bash >/dev/null 2>&1 && exec bash --noprofile --norc || exec /bin/sh";

export interface BashOptions {
  computer: ComputerApi;
  timeoutMs: number;
  maxOutputBytes: number;
  progressIntervalMs: number;
}

interface Segment {
  seq: number;
  offset: number;
  bytes: Uint8Array;
}

export class BashShell {
  private handle: ExecHandle | undefined;
  private nonce = "";
  private count = 0;
  /** Last seq of the shell's log that a command consumed. */
  private seen = 0;
  /** Directory to return to when a new shell starts after a kill. */
  private cwd: string | undefined;
  /** Bytes read after a marker (background jobs): they open the next command's output. */
  private leftovers: { stream: "stdout" | "stderr"; seg: Segment }[] = [];
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: BashOptions) {}

  run(input: ToolInput<"bash">, ctx: ToolCallContext): Promise<ToolResult> {
    const next = this.queue.then(
      () => this.runNow(input, ctx),
      () => this.runNow(input, ctx),
    );
    this.queue = next.catch(() => {});
    return next;
  }

  /** Kills the shell (the tool set is closing). */
  async close(): Promise<void> {
    await this.stopShell();
  }

  private async runNow(input: ToolInput<"bash">, ctx: ToolCallContext): Promise<ToolResult> {
    if (input.restart) {
      await this.stopShell();
      this.cwd = undefined;
      if (input.command === undefined) return ok("The shell has been restarted.");
    }
    if (input.command === undefined || input.command.trim() === "") {
      return fail('bash needs a "command" (or "restart": true to start a fresh shell).');
    }
    const { handle, mark } = await this.send(input.command);
    const budget = new OutputBudget(this.options.maxOutputBytes);
    const emit = (stream: "stdout" | "stderr", s: Segment) =>
      budget.add(s.seq, stream, s.bytes, s.offset);
    for (const l of this.leftovers) emit(l.stream, l.seg);
    this.leftovers = [];
    const out = new MarkerScanner(enc(`\n${mark} `), (s) => emit("stdout", s));
    const err = new MarkerScanner(enc(`\n${mark}\n`), (s) => emit("stderr", s));
    let status: { code: number; pwd: string } | undefined;
    const progress = startProgress(ctx, handle.id, this.options.progressIntervalMs);
    let r: Awaited<ReturnType<typeof drain>>;
    try {
      r = await drain(handle, {
        after: this.seen,
        deadline: Date.now() + this.options.timeoutMs,
        signal: ctx.signal,
        onEvent: (ev: LoggedEvent) => {
          if (ev.name === "exit") return true;
          (ev.name === "stdout" ? out : err).push(ev.seq, asBytes(ev.value));
          progress.output(budget.total, ev.seq);
          status ??= out.status();
          return status !== undefined && err.found;
        },
      });
    } catch (e) {
      // Cancelled (or the shell broke): the command may still run; start over next time.
      await this.stopShell();
      throw e;
    } finally {
      progress.stop();
    }
    this.seen = r.lastSeq;
    if (status && err.found) {
      this.cwd = status.pwd;
      this.leftovers = [
        ...out.after().map((seg) => ({ stream: "stdout" as const, seg })),
        ...err.after().map((seg) => ({ stream: "stderr" as const, seg })),
      ];
      return ok(`${text(budget, handle.id)}[exit status ${status.code}]`, {
        exit_code: status.code,
        cwd: status.pwd,
        session_id: handle.id,
        output_bytes: budget.total,
      });
    }
    out.flush();
    err.flush();
    if (r.exit) {
      this.handle = undefined;
      return ok(
        `${text(budget, handle.id)}[the shell exited with code ${r.exit.value}; the next command starts a new shell]`,
        { exit_code: r.exit.value, session_id: handle.id, shell_exited: true },
      );
    }
    await this.stopShell();
    const where = this.cwd ? ` in ${this.cwd}` : "";
    return ok(
      `${text(budget, handle.id)}[timed out after ${this.options.timeoutMs / 1000} s: the command was still running, so the shell was killed; the next command starts a fresh shell${where} (exports and functions are reset). Run long commands with exec_command, which returns a session_id to poll.]`,
      { timed_out: true, session_id: handle.id, output_bytes: budget.total },
    );
  }

  /** Writes the command line; a shell that ended meanwhile (killed from outside) is replaced once. */
  private async send(command: string): Promise<{ handle: ExecHandle; mark: string }> {
    for (let attempt = 0; ; attempt++) {
      const handle = await this.shell();
      const mark = `__ac_${this.nonce}_${++this.count}`;
      const line = `eval ${shQuote(command)} </dev/null\n__ac_s=$?; printf '\\n${mark} %d %s\\n' "$__ac_s" "$PWD"; printf '\\n${mark}\\n' >&2\n`;
      try {
        await handle.write(line);
        return { handle, mark };
      } catch (err) {
        if (attempt > 0 || !hasCode(err, "ECLOSED")) throw err;
        this.handle = undefined;
      }
    }
  }

  private async shell(): Promise<ExecHandle> {
    if (this.handle) return this.handle;
    this.nonce = randomUUID().replace(/-/g, "").slice(0, 12);
    this.count = 0;
    this.seen = 0;
    this.leftovers = [];
    const handle = await this.options.computer.exec(
      { argv: ["/bin/sh", "-c", START_SHELL] },
      { id: `bash-${this.nonce}`, stdin: "pipe", encoding: "b64" },
    );
    this.handle = handle;
    if (this.cwd) await handle.write(`cd ${shQuote(this.cwd)} 2>/dev/null\n`);
    return handle;
  }

  private async stopShell(): Promise<void> {
    const h = this.handle;
    this.handle = undefined;
    if (h) await h.kill("SIGKILL").catch(() => {});
  }
}

/**
 * Finds a sentinel in a stream of chunks, emitting everything before it with
 * its exact (seq, offset) and holding back only a tail that could be the
 * sentinel's beginning. Exported for its property test.
 */
export class MarkerScanner {
  private carry: Segment[] = [];
  private rest: Segment[] = [];
  found = false;

  constructor(
    private readonly sentinel: Uint8Array,
    private readonly emit: (s: Segment) => void,
  ) {}

  push(seq: number, bytes: Uint8Array): void {
    if (this.found) {
      this.rest.push({ seq, offset: 0, bytes });
      return;
    }
    const segs = [...this.carry, { seq, offset: 0, bytes }];
    const buf = concat(segs.map((s) => s.bytes));
    const i = indexOf(buf, this.sentinel);
    if (i >= 0) {
      for (const s of slice(segs, 0, i)) this.emit(s);
      this.rest = slice(segs, i + this.sentinel.length, buf.length);
      this.carry = [];
      this.found = true;
      return;
    }
    const keep = partialSuffix(buf, this.sentinel);
    for (const s of slice(segs, 0, buf.length - keep)) this.emit(s);
    this.carry = slice(segs, buf.length - keep, buf.length);
  }

  /** stdout's marker line: "<status> <pwd>\n" after the sentinel, once complete. */
  status(): { code: number; pwd: string } | undefined {
    if (!this.found) return undefined;
    const buf = concat(this.rest.map((s) => s.bytes));
    const nl = buf.indexOf(10);
    if (nl < 0) return undefined;
    const line = new TextDecoder().decode(buf.subarray(0, nl));
    const sp = line.indexOf(" ");
    return { code: Number(line.slice(0, sp)), pwd: line.slice(sp + 1) };
  }

  /** What came after the marker (and after stdout's status line). */
  after(): Segment[] {
    const all = this.rest;
    const total = all.reduce((n, s) => n + s.bytes.length, 0);
    const buf = concat(all.map((s) => s.bytes));
    const skip = this.sentinel[this.sentinel.length - 1] === 10 ? 0 : buf.indexOf(10) + 1;
    return slice(all, skip, total);
  }

  /** The command did not finish: whatever was held back is output. */
  flush(): void {
    for (const s of this.carry) this.emit(s);
    this.carry = [];
  }
}

function text(budget: OutputBudget, id: string): string {
  const body = budget.render(id);
  return body === "" || body.endsWith("\n") ? body : `${body}\n`;
}

/** The segments covering bytes [from, to) of their concatenation, with exact offsets. */
function slice(segs: Segment[], from: number, to: number): Segment[] {
  const out: Segment[] = [];
  let pos = 0;
  for (const s of segs) {
    const start = Math.max(from, pos);
    const end = Math.min(to, pos + s.bytes.length);
    if (start < end) {
      out.push({
        seq: s.seq,
        offset: s.offset + (start - pos),
        bytes: s.bytes.subarray(start - pos, end - pos),
      });
    }
    pos += s.bytes.length;
  }
  return out;
}

/** Length of the longest suffix of `buf` that is a proper prefix of `pat`. */
function partialSuffix(buf: Uint8Array, pat: Uint8Array): number {
  for (let k = Math.min(buf.length, pat.length - 1); k > 0; k--) {
    let match = true;
    for (let j = 0; j < k; j++) {
      if (buf[buf.length - k + j] !== pat[j]) {
        match = false;
        break;
      }
    }
    if (match) return k;
  }
  return 0;
}

function indexOf(buf: Uint8Array, pat: Uint8Array): number {
  return Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).indexOf(pat);
}

function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  return Buffer.concat(parts);
}

function enc(s: string): Uint8Array {
  return new TextEncoder().encode(s);
}

/** A single-quoted shell word: safe for any text. */
export function shQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}
