// Control routing between nodes: kill / stdin write / stdin end / dispose /
// terminal resize for
// an execution owned by another node travel through Redis to the owner, and
// the owner's result (ok, or an error with its `code`) comes back to the
// caller.
//
// Requests go into the owner's control stream (keys.controlStream; XADD,
// capped with MAXLEN ~); the owner reads it with a blocking XREAD on one
// dedicated connection. A stream rather than pub/sub for requests because a
// stream survives a reconnect of the owner's reader: a request sent during a
// blip is read when the reader is back instead of being dropped. Requests
// carry a deadline; the owner skips expired ones (the caller has given up).
// Requests for one execution are handled in arrival order (stdin chunks must
// not reorder); different executions run concurrently.
//
// Replies are small and only useful while the caller waits, so they go over
// pub/sub on the caller node's reply channel (keys.replyChannel), matched by
// request id; a caller that gets no reply within `timeoutMs` fails with
// `ENETWORK` naming the node. Key names: src/store/redis/keys.ts.

import type { Redis } from "ioredis";
import type { RedisKeys } from "../store/redis/keys.js";
import type { RedisEventLog } from "../store/redis/log.js";
import { ComputerError, toErrorCode } from "../wire/errors.js";

export type ControlOp = "kill" | "write" | "end" | "dispose" | "resize";

/** What the owning node does with a request (implemented over the local Computer). */
export interface ControlHandler {
  kill(id: string, signal?: string): Promise<void>;
  write(id: string, chunk: Uint8Array): Promise<void>;
  end(id: string): Promise<void>;
  dispose(id: string): Promise<void>;
  /** Resize a pty execution's terminal; a handler without it answers EUNAVAILABLE. */
  resize?(id: string, size: { cols: number; rows: number }): Promise<void>;
}

export interface ControlOptions {
  /** How long a caller waits for the owner's reply (default 5000 ms). */
  timeoutMs?: number;
  /** Entries kept in each control stream (approximate, default 10000). */
  streamMaxLen?: number;
  /** Structured logger for failures of the request reader and of replies. */
  logger?: (event: string, fields: Record<string, unknown>) => void;
}

interface Pending {
  resolve: () => void;
  reject: (err: unknown) => void;
  timer: ReturnType<typeof setTimeout>;
}

type Fields = Map<string, Buffer>;

export class ControlChannel {
  private readonly timeoutMs: number;
  private readonly maxLen: number;
  private readonly pending = new Map<string, Pending>();
  private readonly chains = new Map<string, Promise<void>>();
  private handler: ControlHandler | undefined;
  private sub: Redis | undefined;
  private reader: Redis | undefined;
  private loop: Promise<void> | undefined;
  private counter = 0;
  private closed = false;
  private readonly logger: (event: string, fields: Record<string, unknown>) => void;
  private readonly keys: RedisKeys;

  constructor(
    private readonly eventLog: RedisEventLog,
    private readonly redis: Redis,
    readonly nodeId: string,
    options: ControlOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? 5000;
    this.maxLen = options.streamMaxLen ?? 10_000;
    this.keys = eventLog.keys;
    this.logger = options.logger ?? (() => {});
  }

  /**
   * Subscribe to replies and start reading requests addressed to this node
   * (answered with EUNAVAILABLE until setHandler is called).
   */
  async start(): Promise<void> {
    const sub = this.eventLog.duplicate(`ac-ctl-sub-${this.nodeId}`);
    sub.on("message", (_ch: string, msg: string) => this.onReply(msg));
    await sub.subscribe(this.keys.replyChannel(this.nodeId));
    this.sub = sub;
    // Start after whatever is already in the stream: requests from before this
    // process started were addressed to a previous incarnation.
    const last = await this.redis.xrevrange(
      this.keys.controlStream(this.nodeId),
      "+",
      "-",
      "COUNT",
      1,
    );
    const startId = last[0]?.[0] ?? "0-0";
    this.reader = this.eventLog.duplicate(`ac-ctl-read-${this.nodeId}`);
    this.loop = this.readLoop(startId);
  }

  /** Set (or replace) what handles requests for this node's executions. */
  setHandler(handler: ControlHandler): void {
    this.handler = handler;
  }

  /** Ask `node` to perform `op` on execution `id`; resolves with its result. */
  request(
    node: string,
    op: ControlOp,
    id: string,
    extra: { signal?: string; data?: Uint8Array; size?: { cols: number; rows: number } } = {},
  ): Promise<void> {
    if (this.closed) return Promise.reject(new ComputerError("ECLOSED", "cluster node is closed"));
    const rid = `${this.nodeId}:${++this.counter}:${Date.now().toString(36)}`;
    const deadline = Date.now() + this.timeoutMs;
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(rid);
        reject(
          new ComputerError(
            "ENETWORK",
            `node ${node} did not answer ${op} for execution ${id} within ${this.timeoutMs} ms (node down, overloaded, or Redis unreachable)`,
          ),
        );
      }, this.timeoutMs);
      this.pending.set(rid, { resolve, reject, timer });
      const args: (string | Buffer | number)[] = [
        this.keys.controlStream(node),
        "MAXLEN",
        "~",
        this.maxLen,
        "*",
        "op",
        op,
        "id",
        id,
        "rid",
        rid,
        "from",
        this.nodeId,
        "deadline",
        deadline,
      ];
      if (extra.signal) args.push("signal", extra.signal);
      if (extra.size) args.push("cols", extra.size.cols, "rows", extra.size.rows);
      if (extra.data) {
        const d = extra.data;
        args.push("data", Buffer.from(d.buffer, d.byteOffset, d.byteLength));
      }
      (this.redis.xadd as (...a: unknown[]) => Promise<unknown>)(...args).catch((err) => {
        const p = this.pending.get(rid);
        if (!p) return;
        clearTimeout(p.timer);
        this.pending.delete(rid);
        p.reject(
          new ComputerError(
            "ENETWORK",
            `could not send ${op} to node ${node}: ${(err as Error).message}`,
          ),
        );
      });
    });
  }

  private onReply(msg: string): void {
    let r: { rid?: string; ok?: boolean; code?: string; message?: string; earliestSeq?: number };
    try {
      r = JSON.parse(msg);
    } catch {
      return;
    }
    const p = r.rid ? this.pending.get(r.rid) : undefined;
    if (!p) return;
    clearTimeout(p.timer);
    this.pending.delete(r.rid!);
    if (r.ok) p.resolve();
    else {
      const extra = r.earliestSeq !== undefined ? { earliestSeq: r.earliestSeq } : undefined;
      p.reject(new ComputerError(toErrorCode(r.code), r.message ?? "remote error", extra));
    }
  }

  private async readLoop(startId: string): Promise<void> {
    let lastId = startId;
    const key = this.keys.controlStream(this.nodeId);
    while (!this.closed) {
      let res: [Buffer, [Buffer, Buffer[]][]][] | null;
      try {
        res = (await (this.reader!.xreadBuffer as (...a: unknown[]) => Promise<unknown>)(
          "COUNT",
          100,
          "BLOCK",
          2000,
          "STREAMS",
          key,
          lastId,
        )) as typeof res;
      } catch (err) {
        if (this.closed) return;
        this.logger("control.read_failed", { node: this.nodeId, error: (err as Error).message });
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      if (!res) continue;
      for (const [, entries] of res) {
        for (const [eid, flat] of entries) {
          lastId = eid.toString("latin1");
          const f: Fields = new Map();
          for (let i = 0; i + 1 < flat.length; i += 2)
            f.set(flat[i]!.toString("latin1"), flat[i + 1]!);
          this.dispatch(f);
        }
      }
    }
  }

  private dispatch(f: Fields): void {
    const op = f.get("op")?.toString() as ControlOp | undefined;
    const id = f.get("id")?.toString("utf8");
    const rid = f.get("rid")?.toString();
    const from = f.get("from")?.toString("utf8");
    const deadline = Number(f.get("deadline")?.toString() ?? 0);
    if (!op || !id || !rid || !from) return;
    if (Date.now() > deadline) return; // the caller gave up already
    const run = async (): Promise<void> => {
      const h = this.handler;
      if (!h)
        throw new ComputerError("EUNAVAILABLE", `node ${this.nodeId} is not serving executions`);
      switch (op) {
        case "kill":
          return h.kill(id, f.get("signal")?.toString());
        case "write": {
          const d = f.get("data") ?? Buffer.alloc(0);
          return h.write(id, new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
        }
        case "end":
          return h.end(id);
        case "dispose":
          return h.dispose(id);
        case "resize": {
          if (!h.resize) {
            throw new ComputerError("EUNAVAILABLE", `node ${this.nodeId} cannot resize terminals`);
          }
          const cols = Number(f.get("cols")?.toString());
          const rows = Number(f.get("rows")?.toString());
          return h.resize(id, { cols, rows }); // the handler validates the size
        }
        default:
          throw new ComputerError("EINVAL", `unknown control op ${String(op)}`);
      }
    };
    // Per-execution order: chain after the previous request for the same id.
    const prev = this.chains.get(id) ?? Promise.resolve();
    const next = prev.then(run).then(
      () => this.reply(from, { rid, ok: true }),
      (err: unknown) => {
        const e = err as { code?: string; message?: string; earliestSeq?: number };
        return this.reply(from, {
          rid,
          ok: false,
          code: typeof e?.code === "string" ? e.code : "EINTERNAL",
          message: e?.message ?? String(err),
          earliestSeq: e?.earliestSeq,
        });
      },
    );
    this.chains.set(id, next);
    void next.finally(() => {
      if (this.chains.get(id) === next) this.chains.delete(id);
    });
  }

  private async reply(to: string, body: Record<string, unknown>): Promise<void> {
    try {
      await this.redis.publish(this.keys.replyChannel(to), JSON.stringify(body));
    } catch (err) {
      this.logger("control.reply_failed", { node: this.nodeId, to, error: (err as Error).message });
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const [rid, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new ComputerError("EUNAVAILABLE", "cluster node is closing"));
      this.pending.delete(rid);
    }
    // Let in-flight handlers reply (bounded).
    if (this.chains.size > 0) {
      await Promise.race([
        Promise.allSettled([...this.chains.values()]),
        new Promise((r) => setTimeout(r, 1000)),
      ]);
    }
    this.reader?.disconnect();
    this.sub?.disconnect();
    await this.loop?.catch(() => {});
  }
}
