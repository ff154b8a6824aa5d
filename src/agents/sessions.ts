// The unified-exec tools: exec_command, write_stdin, read_output,
// kill_session, list_sessions. A session is an execution; its id is the
// session_id. Decisions:
// - A call returns as soon as the command exits, or when its yield time
//   passes with a session_id: it never waits out the window after the exit.
// - "Output since your last call" is exact because the event log numbers
//   every chunk: this object keeps, per session, the last seq it returned
//   (`seen`), and the next write_stdin reads from there. Calls on one session
//   are serialized so two concurrent polls cannot both claim the same range.
//   read_output reads any retained range and leaves `seen` alone.
// - Commands get stdin as a pipe that stays open, so write_stdin can feed
//   them; "\u0004" (Ctrl-D) in chars closes it, as EOF does on a terminal.
// - stdout and stderr are interleaved in seq order (output.ts); a fast exit
//   loses nothing, since the read starts at seq 0 of the log, not at "now".
// - tty: true runs the command on a pseudo-terminal (TTY_SIZE, TERM
//   xterm-256color): programs that insist on a terminal work, and the input
//   of write_stdin goes to the terminal as typed, so "\u0003" is Ctrl-C and
//   "\u0004" is EOF through the line discipline rather than closing a pipe.

import type { ComputerApi, ExecHandle, ExecRecord } from "../runtime/types.js";
import { hasCode } from "../wire/errors.js";
import type { LoggedEvent } from "../wire/types.js";
import { type DrainResult, drain } from "./drain.js";
import { asBytes, decodePieces, OutputBudget } from "./output.js";
import { toWorkspacePath } from "./paths.js";
import { startProgress } from "./progress.js";
import {
  DEFAULT_EXEC_YIELD_MS,
  DEFAULT_MAX_OUTPUT_BYTES,
  DEFAULT_POLL_YIELD_MS,
  type ToolInput,
} from "./schemas.js";
import { fail, ok, type ToolCallContext, type ToolResult } from "./types.js";

/** How long kill_session waits for the exit (the runtime SIGKILLs after its grace, 5 s by default). */
const KILL_WAIT_MS = 10_000;
/** Bound on reading what an execution that just ended wrote after the caller's deadline. */
const FINAL_READ_MS = 5000;
/** Sessions list_sessions shows at most (newest). */
const LIST_LIMIT = 100;
const EOT = "\u0004";
/** The terminal a tty session gets: wide enough that tools rarely wrap. */
export const TTY_SIZE = { cols: 120, rows: 40 } as const;

export interface SessionToolsOptions {
  computer: ComputerApi;
  /** The absolute paths the workspace is known by (see paths.ts). */
  roots(): Promise<string[]>;
  progressIntervalMs: number;
}

export class SessionTools {
  /** Per session: the last seq returned to this caller by exec_command/write_stdin/kill_session. */
  private readonly seen = new Map<string, number>();
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(private readonly options: SessionToolsOptions) {}

  async execCommand(input: ToolInput<"exec_command">, ctx: ToolCallContext): Promise<ToolResult> {
    const cwd =
      input.workdir === undefined
        ? undefined
        : toWorkspacePath(input.workdir, await this.options.roots());
    const started = Date.now();
    const handle = await this.options.computer.exec(input.cmd, {
      ...(cwd !== undefined ? { cwd } : {}),
      ...(input.env ? { env: input.env } : {}),
      ...(input.timeout_ms !== undefined ? { timeoutMs: input.timeout_ms } : {}),
      stdin: "pipe",
      encoding: "b64",
      ...(input.tty ? { pty: { ...TTY_SIZE } } : {}),
    });
    this.seen.set(handle.id, 0);
    return this.serialized(handle.id, () =>
      this.follow(handle, input.yield_time_ms ?? DEFAULT_EXEC_YIELD_MS, input, ctx, started, []),
    );
  }

  async writeStdin(input: ToolInput<"write_stdin">, ctx: ToolCallContext): Promise<ToolResult> {
    const handle = await this.options.computer.get(input.session_id);
    return this.serialized(handle.id, async () => {
      const started = Date.now();
      const notes: string[] = [];
      const chars = input.chars ?? "";
      if (chars !== "" && (await handle.info()).pty) {
        // A terminal: every character goes to it as typed (Ctrl-C, Ctrl-D included).
        try {
          await handle.write(chars);
        } catch (err) {
          if (!hasCode(err, "ECLOSED") && !hasCode(err, "EINVAL")) throw err;
          notes.push(`Input not sent: ${(err as Error).message}.`);
        }
      } else if (chars !== "") {
        const eot = chars.indexOf(EOT);
        const data = eot === -1 ? chars : chars.slice(0, eot);
        try {
          if (data !== "") await handle.write(data);
          if (eot !== -1) await handle.end();
          if (eot !== -1 && eot < chars.length - 1) {
            notes.push("Text after Ctrl-D was not sent: stdin is closed now.");
          }
        } catch (err) {
          if (!hasCode(err, "ECLOSED") && !hasCode(err, "EINVAL")) throw err;
          notes.push(`Input not sent: ${(err as Error).message}.`);
        }
      }
      return this.follow(
        handle,
        input.yield_time_ms ?? DEFAULT_POLL_YIELD_MS,
        input,
        ctx,
        started,
        notes,
      );
    });
  }

  async readOutput(input: ToolInput<"read_output">): Promise<ToolResult> {
    const handle = await this.options.computer.get(input.session_id);
    const info = await handle.info();
    const after = input.after_seq ?? 0;
    if (after > info.lastSeq) {
      return fail(
        `after_seq ${after} is past the end of session ${input.session_id}: its last seq is ${info.lastSeq}.`,
      );
    }
    const max = input.max_bytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    const pieces: { stream: "stdout" | "stderr"; bytes: Uint8Array }[] = [];
    let bytes = 0;
    let firstSeq = 0;
    let lastIncluded = after;
    let cut: { seq: number; shown: number; size: number } | undefined;
    let exitLine = "";
    const r = await drain(handle, {
      after,
      untilSeq: info.lastSeq,
      deadline: Date.now() + 5000,
      onEvent: (ev) => {
        if (ev.name === "exit") {
          exitLine = `\n${exitSentence(ev.value, ev.reason, ev.signal)}`;
          lastIncluded = ev.seq;
          return true;
        }
        const value = asBytes(ev.value);
        if (bytes + value.length > max) {
          if (pieces.length === 0) {
            // One event larger than the whole budget: show its head, say how to get it whole.
            pieces.push({ stream: ev.name, bytes: value.subarray(0, max) });
            bytes = max;
            firstSeq = ev.seq;
            lastIncluded = ev.seq;
            cut = { seq: ev.seq, shown: max, size: value.length };
          }
          return true;
        }
        pieces.push({ stream: ev.name, bytes: value });
        bytes += value.length;
        firstSeq ||= ev.seq;
        lastIncluded = ev.seq;
        return false;
      },
    });
    const id = input.session_id;
    const lines: string[] = [];
    if (r.resumedAt !== undefined) {
      lines.push(
        `Seq ${after + 1} to ${r.resumedAt - 1} are no longer retained (the log dropped them); reading from seq ${r.resumedAt}.`,
      );
    }
    const range = firstSeq ? `seq ${firstSeq} to ${lastIncluded}` : `nothing after seq ${after}`;
    let where: string;
    if (cut) {
      where = `seq ${cut.seq} is cut after ${cut.shown} of its ${cut.size} bytes; read_output ${JSON.stringify({ session_id: id, after_seq: cut.seq - 1, max_bytes: cut.size })} returns it whole, ${JSON.stringify({ session_id: id, after_seq: cut.seq })} continues after it.`;
    } else if (lastIncluded < info.lastSeq) {
      where = `More after seq ${lastIncluded}: read_output ${JSON.stringify({ session_id: id, after_seq: lastIncluded })}.`;
    } else {
      where =
        info.state === "running"
          ? `This is all the output so far (the process is still running).`
          : "This is the end of the output.";
    }
    lines.push(`Session ${id}: ${range}, ${bytes} bytes. ${where}`);
    return ok(`${lines.join("\n")}\n${decodePieces(pieces)}${exitLine}`, {
      session_id: id,
      from_seq: firstSeq || null,
      to_seq: lastIncluded,
      bytes,
      last_seq: info.lastSeq,
      running: info.state === "running",
    });
  }

  async killSession(input: ToolInput<"kill_session">, ctx: ToolCallContext): Promise<ToolResult> {
    const handle = await this.options.computer.get(input.session_id);
    return this.serialized(handle.id, async () => {
      const started = Date.now();
      const info = await handle.info();
      const notes: string[] = [];
      if (info.state === "running") await handle.kill(input.signal ?? "SIGTERM");
      else notes.push("The session had already ended.");
      return this.follow(handle, KILL_WAIT_MS, {}, ctx, started, notes);
    });
  }

  async listSessions(): Promise<ToolResult> {
    const all = await this.options.computer.list();
    const recs = all.slice(-LIST_LIMIT).reverse();
    if (recs.length === 0) return ok("No sessions.", { sessions: [] });
    const lines = recs.map((rec) => {
      const seen = this.seen.get(rec.id);
      const unread =
        seen !== undefined && rec.lastSeq > seen ? `, ${rec.lastSeq - seen} unread seqs` : "";
      const state =
        rec.state === "running" ? "running" : `${rec.state}, exit code ${rec.exitCode ?? "?"}`;
      return `${rec.id}  [${state}]  seq ${rec.lastSeq}${unread}  ${commandText(rec)}`;
    });
    const more = all.length > recs.length ? `\n(${all.length - recs.length} older not shown)` : "";
    return ok(`${lines.join("\n")}${more}`, {
      sessions: recs.map((rec) => ({
        session_id: rec.id,
        state: rec.state,
        exit_code: rec.exitCode ?? null,
        command: rec.command,
        last_seq: rec.lastSeq,
        seen_seq: this.seen.get(rec.id) ?? null,
      })),
    });
  }

  /** Reads from this caller's position until exit or the yield, and reports. */
  private async follow(
    handle: ExecHandle,
    yieldMs: number,
    input: { max_output_bytes?: number },
    ctx: ToolCallContext,
    started: number,
    notes: string[],
  ): Promise<ToolResult> {
    const id = handle.id;
    const after = this.seen.get(id) ?? 0;
    const budget = new OutputBudget(input.max_output_bytes ?? DEFAULT_MAX_OUTPUT_BYTES);
    const progress = startProgress(ctx, id, this.options.progressIntervalMs);
    const onEvent = (ev: LoggedEvent) => {
      if (ev.name !== "exit") {
        budget.add(ev.seq, ev.name, asBytes(ev.value));
        progress.output(budget.total, ev.seq);
      }
      return false;
    };
    let r: DrainResult;
    let exit: { code: number; reason?: string; signal?: string } | undefined;
    try {
      r = await drain(handle, {
        after,
        deadline: Date.now() + yieldMs,
        signal: ctx.signal,
        onEvent,
      });
      if (!r.exit) {
        const info = await handle.info();
        if (info.state !== "running" && info.lastSeq > r.lastSeq) {
          // It ended between the deadline and this look: what it wrote after
          // the last event read (and its exit) belongs in this answer, or the
          // caller would be told it exited without its last output.
          const rest = await drain(handle, {
            after: r.lastSeq,
            untilSeq: info.lastSeq,
            deadline: Date.now() + FINAL_READ_MS,
            signal: ctx.signal,
            onEvent,
          });
          r = { ...rest, resumedAt: r.resumedAt ?? rest.resumedAt };
        }
        if (!r.exit && info.state !== "running" && r.lastSeq >= info.lastSeq) {
          // Polling a session whose exit was reported by an earlier call.
          exit = { code: info.exitCode ?? -1, reason: info.state, signal: info.signal };
        }
      }
    } finally {
      progress.stop();
    }
    this.seen.set(id, r.lastSeq);
    if (r.resumedAt !== undefined) {
      notes.unshift(
        `Seq ${after + 1} to ${r.resumedAt - 1} are no longer retained (the log dropped them); output continues from seq ${r.resumedAt}.`,
      );
    }
    if (r.exit) exit = { code: r.exit.value, reason: r.exit.reason, signal: r.exit.signal };
    const wall = `${((Date.now() - started) / 1000).toFixed(1)} s`;
    const status = exit
      ? `${exitSentence(exit.code, exit.reason, exit.signal)} Wall time ${wall}.`
      : `Process running with session_id ${JSON.stringify(id)} (seq ${r.lastSeq} reached, wall time ${wall}). Poll or send input with write_stdin; stop it with kill_session.`;
    const body = budget.total === 0 ? "No new output." : `Output:\n${budget.render(id)}`;
    const elided = budget.elision();
    return ok([status, ...notes, body].join("\n"), {
      session_id: id,
      running: !exit,
      ...(exit ? { exit_code: exit.code, reason: exit.reason ?? "exited" } : {}),
      ...(exit?.signal ? { signal: exit.signal } : {}),
      seq: r.lastSeq,
      output_bytes: budget.total,
      ...(elided ? { elided } : {}),
    });
  }

  /** Runs calls on one session one after another. */
  private serialized<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.queues.get(id) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const settled = next.catch(() => {});
    this.queues.set(id, settled);
    settled.then(() => {
      if (this.queues.get(id) === settled) this.queues.delete(id);
    });
    return next;
  }
}

export function exitSentence(code: number, reason?: string, signal?: string): string {
  const why = reason && reason !== "exited" ? ` (${reason}${signal ? ` by ${signal}` : ""})` : "";
  return `Process exited with code ${code}${why}.`;
}

function commandText(rec: ExecRecord): string {
  const c = Array.isArray(rec.command) ? rec.command.join(" ") : rec.command;
  return c.length > 120 ? `${c.slice(0, 117)}...` : c;
}
