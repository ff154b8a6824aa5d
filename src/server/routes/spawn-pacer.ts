// Spreads command starts over event-loop turns. spawn() is synchronous and
// costs tens of milliseconds in a large process (it forks); 200 exec
// requests that arrive together would otherwise all spawn in one turn and
// stall every stream and request for seconds. Each start waits for its turn
// (one setImmediate after the previous start), so the loop polls I/O between
// two spawns and the worst stall is about one spawn.
// `npm run bench:exec-burst` measures it.

export class SpawnPacer {
  private last: Promise<void> = Promise.resolve();

  /** Resolves when this caller may start its command. */
  turn(): Promise<void> {
    const mine = this.last.then(() => new Promise<void>((resolve) => setImmediate(resolve)));
    this.last = mine;
    return mine;
  }
}
