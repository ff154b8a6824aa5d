// result() over a fake event source: it keeps the LAST maxBytes of each
// stream (whole characters for text), says `truncated` exactly when output was
// cut or the log had dropped events, carries on after ELOG_TRUNCATED from the
// earliest retained seq, and reports exit code, signal and state.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ExecRecord } from "../store/types.js";
import { ComputerError } from "../wire/errors.js";
import type { ExecEvent, LoggedEvent } from "../wire/types.js";
import { collectResult, type ResultSource } from "./result.js";

function record(encoding: "b64" | "utf8", over: Partial<ExecRecord> = {}): ExecRecord {
  return {
    id: "e",
    command: "x",
    cwd: "",
    encoding,
    node: "local",
    state: "exited",
    startedAt: 0,
    lastSeq: 0,
    earliestSeq: 1,
    ...over,
  };
}

/** A source replaying `events`; reads starting before `earliest` fail with ELOG_TRUNCATED. */
function source(
  events: LoggedEvent[],
  rec: ExecRecord,
  earliest = 1,
): ResultSource & { afters: number[] } {
  const afters: number[] = [];
  return {
    afters,
    info: async () => rec,
    events(_id, options) {
      const after = options.after as number;
      afters.push(after);
      let i = 0;
      const pending = events.filter((e) => e.seq > after);
      return new ReadableStream<ExecEvent>({
        pull(controller) {
          if (after + 1 < earliest) {
            controller.error(
              new ComputerError("ELOG_TRUNCATED", "dropped", { earliestSeq: earliest }),
            );
            return;
          }
          const ev = pending[i++];
          if (ev) controller.enqueue(ev);
          else controller.close();
        },
      });
    },
  };
}

const out = (
  seq: number,
  value: Uint8Array | string,
  name: "stdout" | "stderr" = "stdout",
): LoggedEvent => ({
  id: "e",
  seq,
  name,
  value,
});
const exit = (seq: number, value: number, extra: Partial<LoggedEvent> = {}): LoggedEvent =>
  ({ id: "e", seq, name: "exit", value, ...extra }) as LoggedEvent;

describe("collectResult", () => {
  it("does not say truncated when exactly the bound was written after an empty chunk", async () => {
    const evs = [out(1, new Uint8Array(0)), out(2, new Uint8Array([1, 2, 3])), exit(3, 0)];
    const r = await collectResult(source(evs, record("b64", { lastSeq: 3 })), "e", 3);
    expect(r.stdout).toEqual(new Uint8Array([1, 2, 3]));
    expect(r.truncated).toBe(false);
  });

  it("returns both streams, the exit code and the state", async () => {
    const evs = [
      out(1, "hel"),
      out(2, "oops\n", "stderr"),
      out(3, "lo\n"),
      exit(4, 3, { reason: "exited" }),
    ];
    const r = await collectResult(source(evs, record("utf8")), "e", 1024);
    expect(r).toEqual({
      id: "e",
      status: "exited",
      exitCode: 3,
      stdout: "hello\n",
      stderr: "oops\n",
      truncated: false,
    });
  });

  it("keeps the last maxBytes of byte output, truncated exactly when more was written (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.uint8Array({ minLength: 1, maxLength: 40 }), { maxLength: 20 }),
        fc.integer({ min: 1, max: 200 }),
        async (chunks, max) => {
          const evs: LoggedEvent[] = chunks.map((c, i) => out(i + 1, c));
          evs.push(exit(chunks.length + 1, 0));
          const r = await collectResult(source(evs, record("b64")), "e", max);
          const all = Buffer.concat(chunks);
          expect(Buffer.from(r.stdout as Uint8Array)).toEqual(
            all.subarray(Math.max(0, all.length - max)),
          );
          expect(r.truncated).toBe(all.length > max);
        },
      ),
      { numRuns: 50 },
    );
  });

  it("keeps a suffix of text output of whole characters within maxBytes (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.string({ unit: "grapheme", minLength: 1, maxLength: 10 }), { maxLength: 15 }),
        fc.integer({ min: 4, max: 60 }),
        async (chunks, max) => {
          const evs: LoggedEvent[] = chunks.map((c, i) => out(i + 1, c));
          evs.push(exit(chunks.length + 1, 0));
          const r = await collectResult(source(evs, record("utf8")), "e", max);
          const all = chunks.join("");
          const kept = r.stdout as string;
          expect(all.endsWith(kept)).toBe(true);
          const bytes = Buffer.byteLength(kept);
          expect(bytes).toBeLessThanOrEqual(max);
          if (Buffer.byteLength(all) > max) expect(bytes).toBeGreaterThan(max - 4);
          else expect(kept).toBe(all);
          expect(r.truncated).toBe(Buffer.byteLength(all) > max);
        },
      ),
      { numRuns: 50 },
    );
  });

  it("does not start text in the middle of a character", async () => {
    const evs = [out(1, "aé€"), exit(2, 0)]; // 1 + 2 + 3 bytes
    const r = await collectResult(source(evs, record("utf8")), "e", 4);
    expect(r.stdout).toBe("€");
    expect(r.truncated).toBe(true);
  });

  it("carries on from the earliest retained seq after ELOG_TRUNCATED and says truncated", async () => {
    const evs = [out(3, "kept"), exit(4, 0)];
    const src = source(evs, record("utf8"), 3);
    const r = await collectResult(src, "e", 1024);
    expect(src.afters).toEqual([0, 2]);
    expect(r.stdout).toBe("kept");
    expect(r.truncated).toBe(true);
  });

  it("reports the signal of a killed execution", async () => {
    const evs = [exit(1, 137, { signal: "SIGKILL", reason: "killed" })];
    const r = await collectResult(source(evs, record("b64", { state: "killed" })), "e", 16);
    expect(r).toMatchObject({ status: "killed", exitCode: 137, signal: "SIGKILL" });
  });

  it("gives no exit code for a lost execution, and the record's signal when no exit carries one", async () => {
    const lost = await collectResult(
      source([exit(1, -1, { reason: "lost" })], record("b64", { state: "lost" })),
      "e",
      16,
    );
    expect(lost.exitCode).toBeNull();
    expect(lost.status).toBe("lost");
    const noExit = await collectResult(source([], record("b64", { signal: "SIGTERM" })), "e", 16);
    expect(noExit).toMatchObject({ exitCode: null, signal: "SIGTERM" });
  });

  it("passes other stream errors through", async () => {
    const src: ResultSource = {
      info: async () => record("b64"),
      events: () =>
        new ReadableStream({
          pull(c) {
            c.error(new ComputerError("ENOENT", "gone"));
          },
        }),
    };
    await expect(collectResult(src, "e", 16)).rejects.toMatchObject({ code: "ENOENT" });
  });
});
