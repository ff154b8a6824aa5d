// Scale benchmark (`npm run bench:scale`): agents' real load is many short
// commands and many live executions at once, not one big stream.
//  (a) exec rate over HTTP vs a plain spawn loop, and in-process exec("true")
//      → exit vs raw spawn (rate.ts);
//  (b) N live executions with one subscriber each: latency, loss, RSS per
//      execution, on one memory-log node and on two nodes sharing Redis (live.ts).
// Usage (`npm run bench:scale -- ARGS` builds first):
//   node .bench-out/bench/scale/run.js [--part rate|live|all] [--concurrency 16]
//     [--seconds 5] [--rounds 3] [--runs 200] [--n 200] [--d 10]
//     [--transport sse|ws|ws-mux|both|LIST] [--log memory|redis|both] [--confine off|auto|both]
//     [--spawn-helpers N[,N...]]
// The exec-rate server runs unconfined and confined (serve's default) by
// default: the raw spawn loop it is compared with is never sandboxed. The
// live part runs confined when the host allows (serve's default), or
// unconfined with --confine off.
// The full size is --n 1000 --d 60 (about 70 s per setup and
// transport); quick runs use the defaults.

import { numberOption, stringOption } from "../support/args.js";
import { liveExecutions, printLive, type Transport } from "./live.js";
import { startCluster } from "./nodes.js";
import { execRate, inProcessLatency } from "./rate.js";

const part = stringOption("part", "all");
const concurrency = numberOption("concurrency", 16);
const seconds = numberOption("seconds", 5);
const rounds = numberOption("rounds", 3);
const runs = numberOption("runs", 200);
const n = numberOption("n", 200);
const d = numberOption("d", 10);
const transportOpt = stringOption("transport", "sse");
const logOpt = stringOption("log", "both");
const confineOpt = stringOption("confine", "both") as "auto" | "off" | "both";
// Spawn helpers per server (0: serve's default); a list compares them, one server each.
const helperCounts = stringOption("spawn-helpers", "0").split(",").map(Number);
const transports = (
  transportOpt === "both" ? ["sse", "ws"] : transportOpt.split(",")
) as Transport[];
const logs = logOpt === "both" ? (["memory", "redis"] as const) : [logOpt as "memory" | "redis"];

console.log(`# bench:scale (node ${process.version}, ${new Date().toISOString()})`);
if (part === "rate" || part === "all") {
  // The raw loop runs unconfined: the server is measured both ways.
  for (const confine of confineOpt === "both" ? (["off", "auto"] as const) : [confineOpt]) {
    // One server per spawn-helper count, measured in the same rounds.
    const clusters = [];
    try {
      for (const helpers of helperCounts) {
        clusters.push(await startCluster("memory", 4 * concurrency, confine, helpers));
      }
      const setups = clusters.map((cluster, i) => {
        const helpers = helperCounts[i]!;
        return {
          node: cluster.nodes[0]!,
          label:
            (confine === "off" ? "unconfined" : "confined") +
            (helpers > 0 ? `, ${helpers} helper${helpers === 1 ? "" : "s"}` : ""),
        };
      });
      await execRate(setups, concurrency, seconds, rounds);
    } finally {
      for (const cluster of clusters) await cluster.stop();
    }
  }
  await inProcessLatency(runs, rounds);
}
if (part === "live" || part === "all") {
  console.log(`\n## ${n} live executions × ${d} s, a line every 100 ms, one subscriber each`);
  const rows = [];
  for (const log of logs) {
    for (const transport of transports) {
      // The live part runs one setup: serve's default (auto) unless --confine off.
      const cluster = await startCluster(
        log,
        n + 16,
        confineOpt === "off" ? "off" : "auto",
        helperCounts[0],
      );
      try {
        rows.push(await liveExecutions(cluster, n, d, transport));
      } finally {
        await cluster.stop();
      }
      printLive(rows.slice(-1));
    }
  }
  console.log("\nAll rows:");
  printLive(rows);
}
process.exit(0);
