// How an execution's record and events are laid out inside its Redis keys,
// and the conversions both ways. Kept apart from the log so the layout the
// Lua scripts (scripts.ts) read and write is described once, next to the code
// that produces and parses it.
//
// Record hash (keys.meta): one field per ExecRecord field under the same name,
// except `lastSeq` → `last` and `earliestSeq` → `earliest`; `command` is JSON;
// plus `bytes` (retained bytes counted against the cap) and `token` (makes a
// re-sent create idempotent).
//
// Stream entry (keys.stream), id `<seq>-0`, fields in this order:
//   t  type: `o`/`e` stdout/stderr bytes, `O`/`E` stdout/stderr text, `x` exit
//   v  the bytes or text; for an exit its value
//   s  exit only: signal ("" when none)
//   r  exit only: reason ("" when none)
// Replies are read as Buffers, so field values are at fixed positions (v at 3,
// s at 5, r at 7) and bytes come back without a string round trip.

import type { LoggedEvent } from "../../wire/types.js";
import { normalizeState } from "../common.js";
import type { ExecRecord, NewExecRecord } from "../types.js";

/** One argument of a Redis command or script call. */
export type Arg = string | number | Buffer;

/** An XRANGE entry as returned in Buffer mode: id and flat field/value list. */
export type RawEntry = [Buffer, Buffer[]];

/** Record fields as stored in the hash (record name → hash field). */
const FIELD: Record<string, string> = {
  command: "command",
  cwd: "cwd",
  encoding: "encoding",
  node: "node",
  pid: "pid",
  pidStart: "pidStart",
  lostNote: "lostNote",
  state: "state",
  startedAt: "startedAt",
  endedAt: "endedAt",
  exitCode: "exitCode",
  signal: "signal",
  lastSeq: "last",
  earliestSeq: "earliest",
  pty: "pty",
};

function fieldValue(key: string, v: unknown): string {
  return key === "command" || key === "pty" ? JSON.stringify(v) : String(v);
}

/** Field/value pairs of a new record (its state is set by the create script). */
export function recordFields(record: NewExecRecord): Arg[] {
  const args: Arg[] = [];
  for (const [k, v] of Object.entries(record)) {
    if (v === undefined || k === "state") continue;
    const f = k === "id" ? "id" : FIELD[k];
    if (!f) continue;
    args.push(f, fieldValue(k, v));
  }
  return args;
}

/** A record patch as field/value pairs to set and fields to delete (undefined values). */
export function patchFields(patch: Partial<Omit<ExecRecord, "id">>): { set: Arg[]; del: Arg[] } {
  const set: Arg[] = [];
  const del: Arg[] = [];
  for (const [k, v] of Object.entries(patch)) {
    const f = FIELD[k];
    if (!f) continue;
    if (v === undefined) del.push(f);
    else set.push(f, fieldValue(k, v));
  }
  return { set, del };
}

export function parseRecord(h: Record<string, string>): ExecRecord | undefined {
  if (!h || h.state === undefined || h.id === undefined) return undefined;
  const rec: ExecRecord = {
    id: h.id,
    command: JSON.parse(h.command ?? '""'),
    cwd: h.cwd ?? "",
    encoding: h.encoding === "utf8" ? "utf8" : "b64",
    node: h.node ?? "",
    state: normalizeState(h.state) ?? "running",
    startedAt: Number(h.startedAt ?? 0),
    lastSeq: Number(h.last ?? 0),
    earliestSeq: Number(h.earliest ?? 1),
  };
  if (h.pid !== undefined) rec.pid = Number(h.pid);
  if (h.pidStart !== undefined) rec.pidStart = h.pidStart;
  if (h.lostNote !== undefined) rec.lostNote = h.lostNote;
  if (h.endedAt !== undefined) rec.endedAt = Number(h.endedAt);
  if (h.exitCode !== undefined) rec.exitCode = Number(h.exitCode);
  if (h.signal !== undefined) rec.signal = h.signal;
  if (h.pty !== undefined) rec.pty = JSON.parse(h.pty);
  return rec;
}

/** Five script arguments per event: seq, type, value, signal, reason (see the append script). */
export function eventArgs(events: LoggedEvent[]): Arg[] {
  const args: Arg[] = [];
  for (const ev of events) {
    if (ev.name === "exit") {
      args.push(ev.seq, "x", String(ev.value), ev.signal ?? "", ev.reason ?? "");
    } else if (typeof ev.value === "string") {
      args.push(ev.seq, ev.name === "stdout" ? "O" : "E", ev.value, "", "");
    } else {
      args.push(ev.seq, ev.name === "stdout" ? "o" : "e", toBuffer(ev.value), "", "");
    }
  }
  return args;
}

function toBuffer(v: Uint8Array): Buffer {
  return Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength);
}

/** Parse "<seq>-0" without allocating a string for the common case. */
function seqOf(id: Buffer | string): number {
  if (typeof id === "string") return Number.parseInt(id, 10);
  let n = 0;
  for (let i = 0; i < id.length; i++) {
    const c = id[i]!;
    if (c < 48 || c > 57) break;
    n = n * 10 + (c - 48);
  }
  return n;
}

export function decodeEntry(id: string, entry: RawEntry): LoggedEvent {
  const seq = seqOf(entry[0]);
  const f = entry[1];
  const t = f[1]!.toString("latin1");
  const v = f[3]!;
  switch (t) {
    case "o":
    case "e":
      return {
        id,
        seq,
        name: t === "o" ? "stdout" : "stderr",
        value: new Uint8Array(v.buffer, v.byteOffset, v.byteLength),
      };
    case "O":
    case "E":
      return { id, seq, name: t === "O" ? "stdout" : "stderr", value: v.toString("utf8") };
    default: {
      const ev: LoggedEvent = { id, seq, name: "exit", value: Number(v.toString("latin1")) };
      const s = f[5]?.toString("utf8");
      const r = f[7]?.toString("utf8");
      if (s) ev.signal = s;
      if (r) ev.reason = r as NonNullable<typeof ev.reason>;
      return ev;
    }
  }
}
