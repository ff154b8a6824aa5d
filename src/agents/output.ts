// Output budgets: a tool result carries at most N bytes of a command's output,
// however much it wrote. Over the budget the first half and the last half are
// kept and ONE marker line in between says how many bytes were left out,
// where they start (a seq and a byte offset in it) and which read_output call
// returns them. Nothing is lost: the event log still has every byte, so an
// agent can fetch the middle exactly, and no result blows up a context window.
//
// Memory stays bounded too (50 MB of output through a 32 KiB budget holds 32
// KiB): the head is filled once, the tail is a queue trimmed from the front.
// Bytes are counted raw (what the command wrote); rendering decodes UTF-8 per
// stream (stdout and stderr each keep their own decoder, so a character split
// across two events of one stream decodes whole). stdout and stderr are
// interleaved in seq order, the order in which they were read from the
// process, like a terminal shows them. Invalid UTF-8 renders as U+FFFD; a cut
// at the budget may split a character there too.

type Stream = "stdout" | "stderr";

interface Piece {
  seq: number;
  stream: Stream;
  bytes: Uint8Array;
  /** Offset of `bytes` inside its event's value. */
  offset: number;
}

export interface Elision {
  /** Bytes left out. */
  bytes: number;
  /** First left-out byte: in event `fromSeq`, at byte `fromOffset` of its value. */
  fromSeq: number;
  fromOffset: number;
  /** Event that holds the last left-out byte. */
  toSeq: number;
}

export class OutputBudget {
  private readonly headMax: number;
  private readonly tailMax: number;
  private readonly head: Piece[] = [];
  private headBytes = 0;
  private readonly tail: Piece[] = [];
  private tailBytes = 0;
  private elidedFrom: { seq: number; offset: number } | undefined;
  private elidedTo = 0;
  /** Every byte fed, shown or not. */
  total = 0;

  constructor(maxBytes: number) {
    this.headMax = Math.floor(maxBytes / 2);
    this.tailMax = maxBytes - this.headMax;
  }

  /** Adds `bytes`, found at byte `offset` of the value of event `seq`. */
  add(seq: number, stream: Stream, bytes: Uint8Array, offset = 0): void {
    if (bytes.length === 0) return;
    this.total += bytes.length;
    let taken = 0;
    if (this.headBytes < this.headMax && this.tail.length === 0 && !this.elidedFrom) {
      taken = Math.min(bytes.length, this.headMax - this.headBytes);
      this.head.push({ seq, stream, bytes: bytes.subarray(0, taken), offset });
      this.headBytes += taken;
      if (taken === bytes.length) return;
    }
    this.tail.push({ seq, stream, bytes: bytes.subarray(taken), offset: offset + taken });
    this.tailBytes += bytes.length - taken;
    while (this.tailBytes > this.tailMax) {
      const front = this.tail[0]!;
      const over = this.tailBytes - this.tailMax;
      this.elidedFrom ??= { seq: front.seq, offset: front.offset };
      this.elidedTo = front.seq;
      if (front.bytes.length <= over) {
        this.tail.shift();
        this.tailBytes -= front.bytes.length;
      } else {
        front.bytes = front.bytes.subarray(over);
        front.offset += over;
        this.tailBytes -= over;
      }
    }
  }

  /** What was left out, if anything. */
  elision(): Elision | undefined {
    if (!this.elidedFrom) return undefined;
    return {
      bytes: this.total - this.headBytes - this.tailBytes,
      fromSeq: this.elidedFrom.seq,
      fromOffset: this.elidedFrom.offset,
      toSeq: this.elidedTo,
    };
  }

  /** Bytes that will be shown. */
  get shownBytes(): number {
    return this.headBytes + this.tailBytes;
  }

  /** The kept output as text, with the marker line where bytes were left out. */
  render(sessionId: string): string {
    const head = decodePieces(this.head);
    const e = this.elision();
    if (!e) return head + decodePieces(this.tail);
    // The marker always sits on a line of its own between exactly one "\n"
    // before and one after, so head and tail can be taken back byte-exact.
    return `${head}\n${elisionMarker(sessionId, e)}\n${decodePieces(this.tail)}`;
  }
}

/** The one marker line; its numbers are exact (tests parse it). */
export function elisionMarker(sessionId: string, e: Elision): string {
  const call = JSON.stringify({ session_id: sessionId, after_seq: e.fromSeq - 1 });
  const skip = e.fromOffset > 0 ? ` (skip its first ${e.fromOffset} bytes, shown above)` : "";
  return `[… ${e.bytes} bytes left out here, starting at byte ${e.fromOffset} of seq ${e.fromSeq} and ending in seq ${e.toSeq}; read_output ${call} returns them${skip} …]`;
}

/** Decodes pieces in order, one streaming UTF-8 decoder per stream. */
export function decodePieces(pieces: Iterable<{ stream: Stream; bytes: Uint8Array }>): string {
  const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
  let out = "";
  for (const p of pieces) out += decoders[p.stream].decode(p.bytes, { stream: true });
  return out + decoders.stdout.decode() + decoders.stderr.decode();
}

/** An event value as bytes (executions started by the tools use the b64 encoding, i.e. bytes). */
export function asBytes(value: Uint8Array | string): Uint8Array {
  return typeof value === "string" ? new TextEncoder().encode(value) : value;
}
