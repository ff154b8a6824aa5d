// Merging a terminal's reads into fewer, larger output chunks (docs/runtime.md,
// "Terminals"). Linux hands a PTY's output over at most 4095 bytes per read
// (the line discipline's buffer) and Node reads once per event-loop turn, so a
// program writing fast (a `cat` of a large file) would cost one event — log
// append, wire frame, socket write, client message — per 4 KiB, and that
// per-event cost, not the bytes, bounded a terminal's throughput.
//
// A read that filled the buffer says more output is already waiting: it is
// held and merged with the reads that follow, until one read comes back short
// (the terminal is drained), the merged chunk reaches MAX_MERGED_BYTES, or
// HOLD_MS passed. A short read goes out at once with whatever is held, so a
// keystroke's echo, a prompt or a screen redraw (all end with a short read) is
// never delayed; only a burst that ends exactly on a full read waits HOLD_MS.

/** A read this long filled the terminal's buffer (Linux: N_TTY_BUF_SIZE 4096, minus one). */
export const FULL_READ_BYTES = 4095;
/** Held output goes out once it reaches this size (the chunk size of a pipe) ... */
export const MAX_MERGED_BYTES = 64 * 1024;
/** ... or this long after the first read held, whichever comes first. */
export const HOLD_MS = 1;

export class ReadMerger {
  private held: Buffer[] = [];
  private heldBytes = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  /** `emit` receives each merged chunk, in order. */
  constructor(private readonly emit: (chunk: Buffer) => void) {}

  /** One read of the terminal. */
  push(chunk: Buffer): void {
    const full = chunk.length >= FULL_READ_BYTES;
    if (this.heldBytes === 0 && !full) {
      this.emit(chunk);
      return;
    }
    this.held.push(chunk);
    this.heldBytes += chunk.length;
    if (!full || this.heldBytes >= MAX_MERGED_BYTES) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), HOLD_MS);
  }

  /** Hand over what is held now, as one chunk (before a resize, the exit, a close). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.heldBytes === 0) return;
    const chunk = this.held.length === 1 ? this.held[0]! : Buffer.concat(this.held, this.heldBytes);
    this.held = [];
    this.heldBytes = 0;
    this.emit(chunk);
  }
}
