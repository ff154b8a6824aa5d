// The event model of exec-wire (docs/protocol.md §1), shared by every layer.
// Events are generic over their payload type so one set of types serves raw
// byte streams (Uint8Array, the default) and text streams (string) alike.

/**
 * Why an execution ended, carried on the `exit` event as `reason`: `oom` when
 * its memory limit ended it, `limit` when another resource limit did (the
 * runtime writes which one on stderr just before the exit). Readers that do
 * not know a reason treat it as `exited`.
 */
export type ExitReason = "exited" | "killed" | "timeout" | "lost" | "oom" | "limit";

/** Payload of stdout/stderr: raw bytes (`enc:"b64"`) or text (`enc:"utf8"`). */
export type Chunk = Uint8Array | string;

/** A chunk of process output. `value` is bytes or text; the wire's `enc` follows from its type. */
export interface OutputEvent<V extends Chunk = Chunk> {
  id: string;
  seq: number;
  name: "stdout" | "stderr";
  value: V;
}

/** The last logged event of an execution. `value` is the exit code (128+n when killed by signal n). */
export interface ExitEvent {
  id: string;
  seq: number;
  name: "exit";
  value: number;
  signal?: string;
  reason?: ExitReason;
}

/** Liveness beacon for live subscribers; never logged, `seq` is the latest logged seq (a watermark). */
export interface HeartbeatEvent {
  id: string;
  seq: number;
  name: "heartbeat";
  value: { pid: number; elapsedMs: number; lastOutputMs: number };
}

/** Events that are stored in an execution's log and replayed: output and exit. */
export type LoggedEvent<V extends Chunk = Chunk> = OutputEvent<V> | ExitEvent;

/** Every event that can travel on exec-wire. */
export type ExecEvent<V extends Chunk = Chunk> = LoggedEvent<V> | HeartbeatEvent;

/** A producer's failure mid-stream (`{"name":"error",...}`); decoders raise it, never yield it. */
export interface ErrorFrame {
  id?: string;
  name: "error";
  code: string;
  message: string;
  /** Present with `ELOG_TRUNCATED`: the earliest seq still retained. */
  earliestSeq?: number;
}
