// One `exec("true")` read to its exit event: the unit of the start-to-exit
// latency that bench:exec and bench:scale both compare with a raw spawn.

import type { ComputerApi } from "../../src/runtime/types.js";

export async function execTrueToExit(computer: ComputerApi): Promise<void> {
  const run = await computer.exec("true");
  const reader = run.events().getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done || value.name === "exit") break;
  }
  reader.releaseLock();
}
