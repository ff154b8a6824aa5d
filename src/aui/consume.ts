// The A@UI SSE stream consumer (docs/protocol.md §3, rules 1–6): reads an agent's
// command stream and hands each valid command to an adapter (usually the UI
// runtime), every problem to the adapter's error channel. Nothing is dropped
// silently.
//
// Deliberately NOT the WHATWG SSE parser (src/wire/sse.ts): A@UI specifies a
// simpler line rule (`\r?\n` only, lines trimmed, one command per `data:`
// line) that other A@UI implementations follow, and we must accept exactly
// what they accept. The mechanics are the fast ones of the SSE parser: byte
// chunks decoded with the shared non-streaming Utf8ChunkDecoder (a character
// split across chunks survives), LF found with native indexOf, a partial line
// kept as pieces joined once (linear on one huge line in tiny chunks), and
// `data:` lines sliced straight out of the decoded chunk.
//
// Resume positions (an addition the rules leave room for): servers may put
// `id:` lines in a block. The consumer still ignores them for the rules, but
// passes the block's id to `dispatch(command, { position })` when the id line
// came before the data line, and calls `adapter.onPosition(id)` when a block
// carrying an id ends (blank line): that value is what a reconnect sends as
// Last-Event-ID.

import { ComputerError } from "../wire/errors.js";
import { Utf8ChunkDecoder } from "../wire/sse.js";
import type { Command } from "./types.js";
import { validateCommand } from "./validate.js";

/** Why a payload was reported: EJSON (not JSON), EINVAL (not a valid command), ETRAILING (partial last line). */
export type StreamErrorCode = "EJSON" | "EINVAL" | "ETRAILING";

export interface StreamErrorContext {
  source: "stream";
  /** The raw payload (after `data:` and trimming), or the trailing partial line for ETRAILING. */
  raw: string;
  /** The parsed value, when the payload was JSON but not a valid command (EINVAL). */
  command?: unknown;
}

/** Facts the stream knows about a dispatched command. */
export interface StreamDispatchMeta {
  /** The `id:` of the command's SSE block, when the server sent one before the `data:` line. */
  position?: string;
}

export interface AAtUIStreamAdapter {
  /**
   * Receives each valid command in stream order. A returned promise is awaited
   * (with any others from the same chunk) before the next chunk is read; a
   * throw or rejection stops consumption and rejects `consumeAAtUIStream`.
   */
  dispatch(command: Command, meta: StreamDispatchMeta): unknown;
  /** Receives every problem; `error.code` says which rule fired. Same await/throw rules as `dispatch`. */
  handleError(error: ComputerError, context: StreamErrorContext): unknown;
  /** Called when an SSE block with an `id:` line ends: the resume position (Last-Event-ID). */
  onPosition?(id: string): void;
}

export interface ConsumeResult {
  /** "done": `[DONE]` was read (the stream was cancelled); "end": the stream ended without it. */
  reason: "done" | "end";
  /** Commands dispatched. */
  dispatched: number;
  /** Problems reported to `handleError`. */
  errors: number;
  /** The id of the last completed block that had one ("" if none). */
  lastEventId: string;
}

export type AAtUIStreamSource =
  | ReadableStream<string | Uint8Array>
  | AsyncIterable<string | Uint8Array>;

const D = 100; // "d"

/** Shared meta for commands without a position (frozen: one object, no per-command allocation). */
const NO_META: StreamDispatchMeta = Object.freeze({});

/** True for the characters String.prototype.trim removes (ECMAScript WhiteSpace and LineTerminator). */
function isTrimmed(c: number): boolean {
  if (c <= 32) return c === 32 || (c >= 9 && c <= 13);
  if (c < 0xa0) return false;
  return (
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return (
    v !== null &&
    (typeof v === "object" || typeof v === "function") &&
    typeof (v as { then?: unknown }).then === "function"
  );
}

/**
 * The rule engine, synchronous and transport-free: `push` text, get told when
 * `[DONE]` arrived. Exposed for transports that are not a ReadableStream.
 */
export class AAtUIStreamConsumer {
  private readonly adapter: AAtUIStreamAdapter;
  private readonly utf8 = new Utf8ChunkDecoder();
  private pieces: string[] = [];
  private blockId: string | undefined;
  /** Promises returned by the adapter during the current push. */
  pending: PromiseLike<unknown>[] = [];
  done = false;
  dispatched = 0;
  errors = 0;
  lastEventId = "";

  constructor(adapter: AAtUIStreamAdapter) {
    this.adapter = adapter;
  }

  /** Processes one chunk. Returns true once `[DONE]` was seen (later input is ignored). */
  push(chunk: string | Uint8Array): boolean {
    if (this.done) return true;
    let text: string;
    if (typeof chunk === "string") {
      // Text after bytes: an incomplete character held back cannot be completed by text.
      const held = this.utf8.flush();
      text = held === "" ? chunk : held + chunk;
    } else {
      text = this.utf8.decode(chunk);
    }
    const len = text.length;
    let pos = 0;
    while (pos < len) {
      const nl = text.indexOf("\n", pos);
      if (nl === -1) {
        this.pieces.push(pos === 0 ? text : text.slice(pos));
        break;
      }
      if (this.pieces.length > 0) {
        this.pieces.push(text.slice(pos, nl));
        const line = this.pieces.join("");
        this.pieces = [];
        this.line(line, 0, line.length);
      } else {
        this.line(text, pos, nl);
      }
      if (this.done) return true;
      pos = nl + 1;
    }
    return this.done;
  }

  /** End of stream: rule 6 (a non-empty partial line is reported as ETRAILING). */
  end(): void {
    if (this.done) return;
    const tail = this.utf8.flush();
    if (tail !== "") this.pieces.push(tail);
    const partial = this.pieces.join("");
    this.pieces = [];
    if (partial.trim() !== "") {
      this.report(new ComputerError("ETRAILING", "trailing partial SSE frame"), {
        source: "stream",
        raw: partial,
      });
    }
  }

  /** Rules 1–3 for the line t[s, e) (without its LF). */
  private line(t: string, s: number, e: number): void {
    if (s === e) {
      this.blockEnd();
      return;
    }
    // Fast path: a line that starts with "data:" needs no left trim, and
    // trimming the payload also trims the line's end (incl. a CR from CRLF).
    if (
      e - s >= 5 &&
      t.charCodeAt(s) === D &&
      t.charCodeAt(s + 4) === 58 &&
      t.charCodeAt(s + 1) === 97 &&
      t.charCodeAt(s + 2) === 116 &&
      t.charCodeAt(s + 3) === 97
    ) {
      // Trim by index (the same set of characters as String.prototype.trim)
      // so the payload is one slice, not a slice plus a trimmed copy.
      let a = s + 5;
      let b = e;
      while (a < b && isTrimmed(t.charCodeAt(a))) a++;
      while (b > a && isTrimmed(t.charCodeAt(b - 1))) b--;
      this.payload(t.slice(a, b));
      return;
    }
    const line = (s === 0 && e === t.length ? t : t.slice(s, e)).trim();
    if (line === "") {
      this.blockEnd();
      return;
    }
    if (line.startsWith("data:")) {
      this.payload(line.slice(5).trim());
    } else if (line.startsWith("id:")) {
      const id = line.slice(3).trim();
      if (id.indexOf("\0") === -1) this.blockId = id;
    }
    // Rule 2: any other line is skipped silently.
  }

  /** Rule 1 skips empty lines; they also end an SSE block (resume position). */
  private blockEnd(): void {
    if (this.blockId !== undefined) {
      const id = this.blockId;
      this.blockId = undefined;
      this.lastEventId = id;
      this.adapter.onPosition?.(id);
    }
  }

  /** Rules 4 and 5 for one payload. */
  private payload(raw: string): void {
    if (raw === "[DONE]") {
      this.done = true;
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch (err) {
      this.report(
        new ComputerError("EJSON", `A@UI payload is not JSON: ${(err as Error).message}`, {
          cause: err,
        }),
        { source: "stream", raw },
      );
      return;
    }
    const checked = validateCommand(value);
    if (!checked.ok) {
      this.report(new ComputerError("EINVAL", `invalid A@UI command: ${checked.reason}`), {
        source: "stream",
        raw,
        command: value,
      });
      return;
    }
    this.dispatched++;
    const r = this.adapter.dispatch(
      checked.command,
      this.blockId === undefined ? NO_META : { position: this.blockId },
    );
    if (r !== undefined && isThenable(r)) this.pending.push(r);
  }

  private report(error: ComputerError, context: StreamErrorContext): void {
    this.errors++;
    const r = this.adapter.handleError(error, context);
    if (r !== undefined && isThenable(r)) this.pending.push(r);
  }
}

async function drain(consumer: AAtUIStreamConsumer): Promise<void> {
  while (consumer.pending.length > 0) {
    const list = consumer.pending;
    consumer.pending = [];
    await Promise.all(list);
  }
}

function result(consumer: AAtUIStreamConsumer): ConsumeResult {
  return {
    reason: consumer.done ? "done" : "end",
    dispatched: consumer.dispatched,
    errors: consumer.errors,
    lastEventId: consumer.lastEventId,
  };
}

/**
 * Consumes an A@UI SSE command stream (docs/protocol.md §3 rules 1–6) from a
 * ReadableStream (or async iterable) of text or UTF-8 byte chunks split
 * anywhere. Resolves when `[DONE]` arrives (the stream is cancelled at once
 * and nothing further is read) or the stream ends; rejects if the stream
 * errors or the adapter throws (the stream is then cancelled).
 */
export async function consumeAAtUIStream(
  stream: AAtUIStreamSource,
  adapter: AAtUIStreamAdapter,
): Promise<ConsumeResult> {
  const consumer = new AAtUIStreamConsumer(adapter);
  if (typeof (stream as ReadableStream).getReader === "function") {
    const reader = (stream as ReadableStream<string | Uint8Array>).getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) {
          consumer.end();
          await drain(consumer);
          return result(consumer);
        }
        if (consumer.push(value)) {
          // Rule 4: stop reading now. Cancellation is not awaited: a source
          // whose cancel hangs must not keep us from returning.
          reader.cancel().catch(() => {});
          await drain(consumer);
          return result(consumer);
        }
        if (consumer.pending.length > 0) await drain(consumer);
      }
    } catch (err) {
      reader.cancel(err).catch(() => {});
      throw err;
    }
  }
  const iterator = (stream as AsyncIterable<string | Uint8Array>)[Symbol.asyncIterator]();
  try {
    for (;;) {
      const { done, value } = await iterator.next();
      if (done) {
        consumer.end();
        await drain(consumer);
        return result(consumer);
      }
      if (consumer.push(value)) {
        void Promise.resolve(iterator.return?.()).catch(() => {});
        await drain(consumer);
        return result(consumer);
      }
      if (consumer.pending.length > 0) await drain(consumer);
    }
  } catch (err) {
    void Promise.resolve(iterator.return?.()).catch(() => {});
    throw err;
  }
}
