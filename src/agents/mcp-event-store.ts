// The resumability store of a Streamable HTTP MCP session, kept in the
// server's own EventLog (memory, SQLite or Redis) rather than in a private
// map: every message the server sends on an MCP stream is an event in a log
// record of its own, and the event's seq is its SSE event id. A client whose
// connection drops mid-call reconnects with Last-Event-ID and gets exactly the
// events after it, read back from the same log that holds command output.
//
// Shape of what is stored:
//   record id  `~mcp/<session>/<stream>` — `~` cannot start an execution id,
//              so these records never collide with executions (and the
//              Computer leaves them out of its listing);
//   event      {name: "stdout", value: <the JSON-RPC message as JSON text>};
//   event id   `<stream>:<seq>` on the wire (the session is implied: a store
//              only answers for its own session's streams).
// A request stream's record is finished (an `exit` event) shortly after its
// response was stored, which hands it to the log's retention clock (so a
// long session does not pile up state here); close() drops the records of the
// session's unfinished streams at once.
//
// Ordering: appends of one stream are chained, so seqs are contiguous and
// storeEvent resolves in seq order (the transport writes each message after
// its storeEvent resolves, so the client never sees seq n+1 before n). While a
// replay runs for a stream, storeEvent of that stream holds its answer until
// the transport has registered the replayed stream, so a message stored during
// the replay is either replayed or written live, never neither.

import type {
  EventId,
  EventStore,
  StreamId,
} from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { EventLog } from "../store/types.js";

/** Prefix of every record id an MCP event store writes. */
export const MCP_LOG_PREFIX = "~mcp/";
/** How long after its response a request stream's record is finished (a batch may still answer). */
const FINISH_AFTER_MS = 5_000;
/** The transport's standalone (GET) stream: never finished before the session ends. */
const STANDALONE_STREAM = "_GET_stream";
const READ_BATCH = 256;

interface StreamState {
  logId: string;
  lastSeq: number;
  /** The last append of this stream (create first); every append waits for the one before. */
  chain: Promise<void>;
  /** Set while a replay of this stream runs; storeEvent answers only after it opens. */
  gate?: Promise<void>;
  finishTimer?: ReturnType<typeof setTimeout>;
  finished: boolean;
}

export interface LogEventStoreOptions {
  /** Node id written in the records (cluster liveness sweeps a dead node's records). */
  nodeId?: string;
}

/** The EventStore of one MCP session, over `eventLog`. */
export class LogEventStore implements EventStore {
  private readonly streams = new Map<string, StreamState>();
  private closed = false;

  constructor(
    private readonly eventLog: EventLog,
    private readonly sessionId: string,
    private readonly options: LogEventStoreOptions = {},
  ) {}

  async storeEvent(streamId: StreamId, message: JSONRPCMessage): Promise<EventId> {
    const s = this.stream(streamId);
    const seq = ++s.lastSeq;
    const value = JSON.stringify(message);
    const appended = s.chain.then(() =>
      this.eventLog.append(s.logId, [{ id: s.logId, seq, name: "stdout", value }]),
    );
    s.chain = appended.catch(() => {});
    await appended;
    if (streamId !== STANDALONE_STREAM && isResponse(message)) this.finishLater(streamId, s);
    while (s.gate) await s.gate;
    return `${streamId}:${seq}`;
  }

  async getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    const parsed = parseEventId(eventId);
    if (!parsed) return undefined;
    if (this.streams.has(parsed.streamId)) return parsed.streamId;
    const rec = await this.eventLog.get(this.logIdOf(parsed.streamId));
    return rec ? parsed.streamId : undefined;
  }

  async replayEventsAfter(
    lastEventId: EventId,
    { send }: { send: (eventId: EventId, message: JSONRPCMessage) => Promise<void> },
  ): Promise<StreamId> {
    const parsed = parseEventId(lastEventId);
    if (!parsed) throw new Error(`not an event id of this session: ${lastEventId}`);
    const { streamId } = parsed;
    const s = this.streams.get(streamId);
    let release = () => {};
    if (s) {
      // A replay already running holds the gate; take it over once it opens.
      while (s.gate) await s.gate;
      s.gate = new Promise<void>((resolve) => {
        release = () => {
          s.gate = undefined;
          resolve();
        };
      });
    }
    try {
      const logId = this.logIdOf(streamId);
      let after = parsed.seq;
      for (;;) {
        const pending = s?.chain;
        if (pending) await pending;
        const events = await this.eventLog.read(logId, after, { limit: READ_BATCH });
        for (const ev of events) {
          after = ev.seq;
          if (ev.name === "exit") continue;
          const message = JSON.parse(String(ev.value)) as JSONRPCMessage;
          if (Object.keys(message).length === 0) continue; // a priming event: no data
          await send(`${streamId}:${ev.seq}`, message);
        }
        // Done when nothing new arrived and no append is in flight.
        if (events.length === 0 && (s === undefined || s.chain === pending)) break;
      }
      return streamId;
    } finally {
      // The transport registers the replayed stream right after this returns;
      // answer the held storeEvent calls only after that.
      setImmediate(release);
    }
  }

  /** Drops every record of this session (the session ended). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const all = [...this.streams.values()];
    this.streams.clear();
    await Promise.all(
      all.map(async (s) => {
        clearTimeout(s.finishTimer);
        await s.chain;
        await this.eventLog.dispose(s.logId).catch(() => {});
      }),
    );
  }

  private stream(streamId: StreamId): StreamState {
    if (this.closed) throw new Error("the MCP session is closed");
    let s = this.streams.get(streamId);
    if (!s) {
      const logId = this.logIdOf(streamId);
      s = {
        logId,
        lastSeq: 0,
        finished: false,
        chain: this.eventLog.create({
          id: logId,
          command: "mcp stream",
          cwd: "",
          encoding: "utf8",
          node: this.options.nodeId ?? "local",
          startedAt: Date.now(),
        }),
      };
      this.streams.set(streamId, s);
    }
    return s;
  }

  /**
   * Finishes a request stream's record a little after its response, then
   * forgets it here: from then on the log's retention owns it, and a late
   * replay reads it straight from the log.
   */
  private finishLater(streamId: StreamId, s: StreamState): void {
    if (s.finished || s.finishTimer) return;
    s.finishTimer = setTimeout(() => {
      s.finished = true;
      const seq = ++s.lastSeq;
      s.chain = s.chain
        .then(() =>
          this.eventLog.append(s.logId, [
            { id: s.logId, seq, name: "exit", value: 0, reason: "exited" },
          ]),
        )
        .catch(() => {})
        .then(() => {
          if (this.streams.get(streamId) === s && !s.gate) this.streams.delete(streamId);
        });
    }, FINISH_AFTER_MS);
    s.finishTimer.unref?.();
  }

  private logIdOf(streamId: string): string {
    return `${MCP_LOG_PREFIX}${this.sessionId}/${streamId}`;
  }
}

function isResponse(m: JSONRPCMessage): boolean {
  return "id" in m && ("result" in m || "error" in m);
}

function parseEventId(eventId: string): { streamId: string; seq: number } | undefined {
  const i = eventId.lastIndexOf(":");
  if (i <= 0) return undefined;
  const streamId = eventId.slice(0, i);
  const seq = Number(eventId.slice(i + 1));
  if (!Number.isSafeInteger(seq) || seq < 0 || !/^[A-Za-z0-9_-]+$/.test(streamId)) return undefined;
  return { streamId, seq };
}
