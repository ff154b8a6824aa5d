// The resume loop against a scripted fake transport: each connection plays a
// list of steps (a batch, an error, a clean end, a hang), so cuts, overlaps,
// gaps, truncation, abort, retry budgets and backpressure are exercised
// exactly, without sockets or timing luck.

import { describe, expect, it } from "vitest";
import { ComputerError } from "./errors.js";
import { batchQueue, isRetryable, type ResumableOptions, resumable, retrying } from "./resume.js";

interface Item {
  seq?: number;
  end?: boolean;
  tag?: string;
}

type Step = Item[] | ComputerError | Error | "hang";

const item = (seq: number, extra: Partial<Item> = {}): Item => ({ seq, ...extra });
const items = (...seqs: number[]) => seqs.map((s) => item(s));
const fail = (code: ConstructorParameters<typeof ComputerError>[0], earliestSeq?: number) =>
  new ComputerError(code, code, earliestSeq === undefined ? undefined : { earliestSeq });

const FAST = { initialDelayMs: 1, maxDelayMs: 2 };

/** A transport whose n-th connection plays script[n] (then ends cleanly); records what was asked. */
function fake(script: Step[][]) {
  const calls: number[] = [];
  const log: string[] = [];
  let nexts = 0;
  let returned = 0;
  const connect = async (after: number, _signal: AbortSignal): Promise<AsyncIterable<Item[]>> => {
    const n = calls.length;
    calls.push(after);
    log.push(`connect ${after}`);
    const steps = script[n] ?? [[]];
    if (steps[0] instanceof Error) throw steps[0];
    return {
      [Symbol.asyncIterator]() {
        let i = 0;
        return {
          async next() {
            nexts++;
            const step = steps[i++];
            if (step === undefined) return { value: undefined, done: true };
            if (step === "hang") return new Promise<IteratorResult<Item[]>>(() => {});
            if (step instanceof Error) throw step;
            log.push(`batch ${step.map((s) => s.seq).join(",")}`);
            return { value: step, done: false };
          },
          async return() {
            returned++;
            return { value: undefined, done: true };
          },
        };
      },
    };
  };
  return {
    calls,
    log,
    get nexts() {
      return nexts;
    },
    get returned() {
      return returned;
    },
    connect,
  };
}

function open(f: ReturnType<typeof fake>, extra: Partial<ResumableOptions<Item>> = {}) {
  return resumable<Item>({
    connect: f.connect,
    seqOf: (i) => i.seq,
    isEnd: (i) => i.end === true,
    retry: FAST,
    ...extra,
  });
}

/** Reads until the stream ends or fails: the seqs (or tags) read, and the error. */
async function drain(stream: ReadableStream<Item>) {
  const got: (number | string | undefined)[] = [];
  const reader = stream.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { got, error: undefined as ComputerError | undefined };
      got.push(value.tag ?? value.seq);
    }
  } catch (error) {
    return { got, error: error as ComputerError };
  }
}

describe("resumable", () => {
  it("resumes a cut stream from the last seq delivered", async () => {
    const f = fake([
      [items(1, 2), items(3), fail("ENETWORK")],
      [items(4), [item(5, { end: true })]],
    ]);
    const r = await drain(open(f));
    expect(r).toEqual({ got: [1, 2, 3, 4, 5], error: undefined });
    expect(f.calls).toEqual([0, 3]);
  });

  it("a clean end without the end item is a cut (reconnect) unless `ended` says it is complete", async () => {
    const f = fake([[items(1)], [items(2)], [items(3)]]);
    let asked: number[] = [];
    const r = await drain(
      open(f, {
        ended: (after) => {
          asked.push(after);
          return after === 3;
        },
      }),
    );
    expect(r).toEqual({ got: [1, 2, 3], error: undefined });
    expect(f.calls).toEqual([0, 1, 2]);
    expect(asked).toEqual([1, 2, 3]);
    asked = [];
  });

  it("starts after the given seq, or after the position a function pins (retried like a connect)", async () => {
    const f = fake([[[item(8, { end: true })]]]);
    expect((await drain(open(f, { after: 7 }))).got).toEqual([8]);
    expect(f.calls).toEqual([7]);

    const g = fake([[[item(43, { end: true })]]]);
    let pins = 0;
    const r = await drain(
      open(g, {
        after: async () => {
          if (pins++ === 0) throw fail("ENETWORK");
          return 42;
        },
      }),
    );
    expect(r.got).toEqual([43]);
    expect(pins).toBe(2);
    expect(g.calls).toEqual([42]);
  });

  it("drops duplicates from the overlap after a resume", async () => {
    const f = fake([
      [items(1, 2, 3), fail("ELAGGING")],
      [items(2, 3, 4), [item(3), item(5, { end: true })]],
    ]);
    expect((await drain(open(f))).got).toEqual([1, 2, 3, 4, 5]);
    expect(f.calls).toEqual([0, 3]);
  });

  it("items without a seq pass through and do not move the cursor", async () => {
    const f = fake([
      [[item(1), { tag: "hb" }, item(2)], fail("ENETWORK")],
      [[{ tag: "hb2" }, item(3, { end: true })]],
    ]);
    expect((await drain(open(f))).got).toEqual([1, "hb", 2, "hb2", 3]);
    expect(f.calls).toEqual([0, 2]);
  });

  it("a gap is EGAP, raised only after every item before it was delivered", async () => {
    for (const highWaterMark of [0, 16]) {
      const f = fake([[items(1, 2, 4, 5)]]);
      const r = await drain(open(f, { highWaterMark }));
      expect(r.got).toEqual([1, 2]);
      expect(r.error).toMatchObject({ code: "EGAP" });
      expect(r.error?.message).toMatch(/expected seq 3, got 4/);
      expect(f.calls).toEqual([0]); // not retried
    }
  });

  it("without gapFree, positions may skip", async () => {
    const f = fake([[items(1, 3, 7), [item(9, { end: true })]]]);
    expect((await drain(open(f, { gapFree: false }))).got).toEqual([1, 3, 7, 9]);
  });

  it("truncation fails the stream with earliestSeq by default, after the items before it", async () => {
    const f = fake([[items(1, 2), fail("ENETWORK")], [fail("ELOG_TRUNCATED", 10)]]);
    const r = await drain(open(f));
    expect(r.got).toEqual([1, 2]);
    expect(r.error).toMatchObject({ code: "ELOG_TRUNCATED", earliestSeq: 10 });
  });

  it("a truncation policy runs once the consumer has everything before it, and continues where it says", async () => {
    const f = fake([
      [items(1, 2), fail("ELOG_TRUNCATED", 0)],
      [items(1, 2), [item(3, { end: true })]],
    ]);
    const seen: string[] = [];
    const stream = open(f, {
      onTruncated: (err, after) => {
        seen.push(`reset at ${after} (${err.code})`);
        return 0; // "reset and replay from the current state"
      },
    });
    const reader = stream.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      seen.push(`item ${value.seq}`);
    }
    expect(seen).toEqual([
      "item 1",
      "item 2",
      "reset at 2 (ELOG_TRUNCATED)",
      "item 1",
      "item 2",
      "item 3",
    ]);
    expect(f.calls).toEqual([0, 0]);
  });

  it("a policy that continues from earliestSeq - 1 skips the dropped range; a policy that throws is final", async () => {
    const f = fake([[fail("ELOG_TRUNCATED", 5)], [[item(5, { end: true })]]]);
    const r = await drain(open(f, { onTruncated: (e) => e.earliestSeq! - 1 }));
    expect(r).toEqual({ got: [5], error: undefined });
    expect(f.calls).toEqual([0, 4]);

    const g = fake([[fail("ELOG_TRUNCATED", 5)], [[item(5)]]]);
    const refused = new ComputerError("EINVAL", "no");
    const s = await drain(
      open(g, {
        onTruncated: () => {
          throw refused;
        },
      }),
    );
    expect(s.error).toBe(refused);
    expect(g.calls).toEqual([0]);
  });

  it("abort: EABORTED at once, and nothing reconnects", async () => {
    // during the backoff sleep
    const f = fake([[fail("ENETWORK")]]);
    const ac = new AbortController();
    const stream = open(f, {
      signal: ac.signal,
      retry: { initialDelayMs: 10_000, maxDelayMs: 10_000 },
      onState: (s) => s === "reconnecting" && ac.abort(),
    });
    const r = await drain(stream);
    expect(r.error).toMatchObject({ code: "EABORTED" });
    expect(f.calls).toEqual([0]);

    // while a connection hangs (a transport that ignores its signal)
    const g = fake([[items(1), "hang"]]);
    const ac2 = new AbortController();
    const reader = open(g, { signal: ac2.signal }).getReader();
    expect((await reader.read()).value?.seq).toBe(1);
    const pending = reader.read();
    setTimeout(() => ac2.abort(), 5);
    await expect(pending).rejects.toMatchObject({ code: "EABORTED" });
    await new Promise((r) => setTimeout(r, 20));
    expect(g.calls).toEqual([0]);
    expect(g.returned).toBe(1); // the connection was released

    // already aborted: nothing is opened
    const h = fake([[items(1)]]);
    const r3 = await drain(open(h, { signal: AbortSignal.abort() }));
    expect(r3.error).toMatchObject({ code: "EABORTED" });
    expect(h.calls).toEqual([]);
  });

  it("honours maxRetries: consecutive failures without progress, reset by progress", async () => {
    const f = fake([
      [fail("ENETWORK")],
      [fail("EUNAVAILABLE")],
      [fail("EINTERNAL")],
      [fail("ENETWORK")],
      [[item(1, { end: true })]],
    ]);
    const states: string[] = [];
    const r = await drain(
      open(f, {
        retry: { ...FAST, maxRetries: 3 },
        onState: (s, e) => states.push(`${s}${e ? ` ${e.code}` : ""}`),
      }),
    );
    expect(r.error).toMatchObject({ code: "ENETWORK" });
    expect(f.calls).toEqual([0, 0, 0, 0]); // the first attempt and 3 retries
    expect(states).toEqual([
      "reconnecting ENETWORK",
      "reconnecting EUNAVAILABLE",
      "reconnecting EINTERNAL",
    ]);

    // each connection makes progress before failing: 6 failures with a budget of 2
    const script: Step[][] = [];
    for (let i = 1; i <= 6; i++) script.push([[item(i)], fail("ENETWORK")]);
    script.push([[item(7, { end: true })]]);
    const g = fake(script);
    const s = await drain(open(g, { retry: { ...FAST, maxRetries: 2 } }));
    expect(s).toEqual({ got: [1, 2, 3, 4, 5, 6, 7], error: undefined });
  });

  it("codes that do not mean 'try again' fail at once", async () => {
    for (const code of ["ECLOSED", "ENOENT", "EUNAUTHORIZED", "EINVAL"] as const) {
      const f = fake([[items(1), fail(code)], [items(2)]]);
      const r = await drain(open(f));
      expect(r.got).toEqual([1]);
      expect(r.error).toMatchObject({ code });
      expect(f.calls).toEqual([0]);
    }
    // anything uncoded (a TypeError from fetch, a socket error) is a network failure: retried
    const g = fake([[new TypeError("fetch failed")], [[item(1, { end: true })]]]);
    expect((await drain(open(g))).got).toEqual([1]);
    // a caller may widen what is retried (an A@UI page retries all but auth)
    const h = fake([[fail("ENOENT")], [[item(1, { end: true })]]]);
    expect((await drain(open(h, { retryable: (e) => e.code !== "EUNAUTHORIZED" }))).got).toEqual([
      1,
    ]);
  });

  it("the end item closes the stream and releases the connection", async () => {
    const f = fake([[[item(1), item(2, { end: true }), item(3)], items(4)]]);
    const r = await drain(open(f, { highWaterMark: 16 }));
    expect(r).toEqual({ got: [1, 2], error: undefined });
    expect(f.returned).toBe(1);
    expect(f.calls).toEqual([0]);
  });

  it("backpressure: nothing is connected or read ahead of the consumer", async () => {
    const f = fake([[items(1), items(2), items(3), [item(4, { end: true })]]]);
    const reader = open(f).getReader();
    await new Promise((r) => setTimeout(r, 10));
    expect(f.calls).toEqual([]);
    expect((await reader.read()).value?.seq).toBe(1);
    await new Promise((r) => setTimeout(r, 10));
    expect(f.nexts).toBe(1);
    expect((await reader.read()).value?.seq).toBe(2);
    await new Promise((r) => setTimeout(r, 10));
    expect(f.nexts).toBe(2);
  });

  it("cancel releases the connection and stops", async () => {
    const f = fake([[items(1), "hang"]]);
    const reader = open(f).getReader();
    await reader.read();
    const pending = reader.read();
    await new Promise((r) => setTimeout(r, 5));
    await reader.cancel();
    expect((await pending).done).toBe(true);
    expect(f.returned).toBe(1);
  });
});

describe("retrying", () => {
  it("retries what means 'try again', up to maxRetries, and nothing else", async () => {
    let n = 0;
    expect(
      await retrying(
        async () => {
          if (n++ < 2) throw fail("EUNAVAILABLE");
          return "ok";
        },
        { retry: FAST },
      ),
    ).toBe("ok");
    n = 0;
    await expect(
      retrying(
        async () => {
          n++;
          throw fail("ENETWORK");
        },
        { retry: { ...FAST, maxRetries: 2 } },
      ),
    ).rejects.toMatchObject({ code: "ENETWORK" });
    expect(n).toBe(3);
    n = 0;
    await expect(
      retrying(async () => {
        n++;
        throw fail("ECLOSED");
      }),
    ).rejects.toMatchObject({ code: "ECLOSED" });
    expect(n).toBe(1);
  });

  it("an abort during the backoff is EABORTED", async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 5);
    await expect(
      retrying(
        async () => {
          throw fail("ENETWORK");
        },
        { retry: { initialDelayMs: 10_000 }, signal: ac.signal },
      ),
    ).rejects.toMatchObject({ code: "EABORTED" });
  });

  it("isRetryable: the codes the project emits for 'try again'", () => {
    for (const code of ["ENETWORK", "EUNAVAILABLE", "ELAGGING", "EINTERNAL"] as const)
      expect(isRetryable(fail(code))).toBe(true);
    for (const code of ["ECLOSED", "EGAP", "ELOG_TRUNCATED", "EABORTED", "ELIMIT"] as const)
      expect(isRetryable(fail(code))).toBe(false);
  });
});

describe("batchQueue", () => {
  it("hands over pushed items as batches, then the end or the failure after them", async () => {
    const q = batchQueue<number>();
    const it = q[Symbol.asyncIterator]();
    q.push(1);
    q.push(2);
    expect(await it.next()).toEqual({ value: [1, 2], done: false });
    const waiting = it.next();
    q.push(3);
    expect(await waiting).toEqual({ value: [3], done: false });
    q.push(4);
    q.fail(fail("ENETWORK"));
    q.push(5); // ignored once settled
    expect(q.settled).toBe(true);
    expect(await it.next()).toEqual({ value: [4], done: false });
    await expect(it.next()).rejects.toMatchObject({ code: "ENETWORK" });

    const e = batchQueue<number>();
    const ei = e[Symbol.asyncIterator]();
    e.end();
    expect((await ei.next()).done).toBe(true);
  });
});
