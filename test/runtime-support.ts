// Helpers for the runtime tests: a fresh workspace per test, collecting an
// event stream, and decoding output chunks. Kept tiny so the tests read as
// plain sequences of real process runs.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach } from "vitest";
import { Computer } from "../src/runtime/computer.js";
import type { ExecEvent } from "../src/wire/types.js";

export function tempDir(prefix = "ac-rt-"): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A fresh workspace for each test of the file, and the Computers made in it
 * (`make`, kill grace 300 ms) closed after the test. `ws.dir` is the current
 * workspace; `forget(c)` for a test that closes `c` itself.
 */
export function computerFixture() {
  let current: ReturnType<typeof tempDir> | undefined;
  const computers: Computer[] = [];
  beforeEach(() => {
    current = tempDir();
  });
  afterEach(async () => {
    while (computers.length) await computers.pop()!.close();
    current?.cleanup();
  });
  return {
    ws: {
      get dir(): string {
        return current!.dir;
      },
    },
    make(o: Partial<ConstructorParameters<typeof Computer>[0]> = {}): Computer {
      const c = new Computer({ workspace: current!.dir, killGraceMs: 300, ...o });
      computers.push(c);
      return c;
    },
    forget(c: Computer): void {
      const i = computers.indexOf(c);
      if (i >= 0) computers.splice(i, 1);
    },
  };
}

export async function collect<T>(
  stream: ReadableStream<T>,
  max = Number.POSITIVE_INFINITY,
): Promise<T[]> {
  const out: T[] = [];
  const reader = stream.getReader();
  try {
    while (out.length < max) {
      const { value, done } = await reader.read();
      if (done) break;
      out.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  return out;
}

/** Error (with code) a stream ends with, plus what it yielded before. */
export async function collectUntilError<T>(
  stream: ReadableStream<T>,
): Promise<{ events: T[]; error: unknown }> {
  const events: T[] = [];
  const reader = stream.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { events, error: undefined };
      events.push(value);
    }
  } catch (error) {
    return { events, error };
  }
}

export function textOf(events: ExecEvent[], name: "stdout" | "stderr" = "stdout"): string {
  const dec = new TextDecoder();
  return events
    .filter((e) => e.name === name)
    .map((e) =>
      typeof e.value === "string" ? e.value : dec.decode(e.value as Uint8Array, { stream: true }),
    )
    .join("");
}

export function logged(events: ExecEvent[]): ExecEvent[] {
  return events.filter((e) => e.name !== "heartbeat");
}

export function expectGapFree(events: ExecEvent[], from = 1): void {
  const seqs = logged(events).map((e) => e.seq);
  seqs.forEach((s, i) => {
    if (s !== from + i) throw new Error(`gap: expected seq ${from + i}, got ${s} (at ${i})`);
  });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function eventually(
  check: () => boolean | Promise<boolean>,
  ms = 10_000,
): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await sleep(20);
  }
  throw new Error("condition not met in time");
}

/** The `code` of the error `p` rejects with, or undefined when it resolves. */
export async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code;
  }
}
