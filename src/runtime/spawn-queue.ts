// Starting child processes without stalling the event loop. Node's spawn()
// forks synchronously, and a fork costs time in proportion to the server's
// memory (its page tables are copied): a few ms for a small server, tens for
// a large one. Requests that arrive together reach their spawn() in the same
// turn of the loop, so a burst of 200 exec requests used to block every other
// request, stream and timer for seconds.
//
// The queue runs the spawns in order, a time slice per turn (at least one
// spawn, more only while the slice lasts), and yields to the loop with
// setImmediate in between, so I/O is served between slices and the worst
// stall is about one slice. The number of executions admitted but not yet
// spawned is bounded: past it exec fails at once with ELIMIT (429), before
// anything is created. docs/runtime.md, "Bursts of executions", is the
// user-facing version.

import { ComputerError } from "../wire/errors.js";

/** Default time slice of spawns per turn of the event loop, in ms. */
export const DEFAULT_SPAWN_SLICE_MS = 5;
/** Default bound on executions admitted but not yet spawned. */
export const DEFAULT_MAX_STARTING = 256;

export interface SpawnQueueOptions {
  /** Spawn for at most this long per turn of the loop (at least one spawn); 0 = one per turn. */
  sliceMs?: number;
  /** Executions admitted but not yet spawned before admit() throws ELIMIT. */
  maxStarting?: number;
}

/** A place in the queue, from admission (before any work) to the spawn or its release. */
export interface SpawnTicket {
  /** Runs `spawn` in a later turn, in admission order; settles with its result or exception. */
  spawn<T>(spawn: () => T): Promise<T>;
  /** Gives the place up (idempotent); call it in a `finally` whatever happened. */
  release(): void;
}

export class SpawnQueue {
  readonly sliceMs: number;
  readonly maxStarting: number;
  private admitted = 0;
  private readonly jobs: Array<() => void> = [];
  private scheduled = false;

  constructor(options: SpawnQueueOptions = {}) {
    this.sliceMs = options.sliceMs ?? DEFAULT_SPAWN_SLICE_MS;
    this.maxStarting = options.maxStarting ?? DEFAULT_MAX_STARTING;
    if (!(this.sliceMs >= 0)) throw new ComputerError("EINVAL", "spawnSliceMs must be >= 0");
    if (!(Number.isInteger(this.maxStarting) && this.maxStarting > 0)) {
      throw new ComputerError("EINVAL", "maxStarting must be a positive integer");
    }
  }

  /** Executions admitted and not yet spawned or released. */
  get starting(): number {
    return this.admitted;
  }

  /** Takes a place; throws ELIMIT when maxStarting executions are starting already. */
  admit(): SpawnTicket {
    if (this.admitted >= this.maxStarting) {
      throw new ComputerError(
        "ELIMIT",
        `too many executions are starting at once (maxStarting ${this.maxStarting}); retry shortly`,
      );
    }
    this.admitted++;
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      this.admitted--;
    };
    return {
      release,
      spawn: <T>(spawn: () => T) =>
        new Promise<T>((resolve, reject) => {
          this.jobs.push(() => {
            release();
            try {
              resolve(spawn());
            } catch (err) {
              reject(err);
            }
          });
          this.schedule();
        }),
    };
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.drain());
  }

  private drain(): void {
    this.scheduled = false;
    const t0 = performance.now();
    do {
      this.jobs.shift()!();
    } while (this.jobs.length > 0 && performance.now() - t0 < this.sliceMs);
    if (this.jobs.length > 0) this.schedule();
  }
}
