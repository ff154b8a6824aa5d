// One agent-computer node for the cluster benchmark, as its own process (so
// three nodes use the machine like three real nodes would, not one shared
// event loop). Started by run.ts from the compiled tree (.bench-out/):
//
//   node .bench-out/bench/cluster/node.js --id a --log redis://127.0.0.1:PORT
//   node .bench-out/bench/cluster/node.js --id single --log memory [--log-max-bytes N] [--max-concurrent N] [--confine auto|off] [--spawn-helpers N]
//
// Prints one JSON line {"url": ...} once listening; exits on SIGTERM.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startNode } from "../../src/host/start-node.js";
import { numberOption, stringOption } from "../support/args.js";

const id = stringOption("id", "node");
const eventLog = stringOption("log", "memory");
const logMaxBytes = numberOption("log-max-bytes", 16 * 1024 * 1024);
const maxConcurrent = numberOption("max-concurrent", 1000);
const confine = stringOption("confine", "auto") as "auto" | "off";
const spawnHelpers = numberOption("spawn-helpers", 0); // 0: serve's default
const workspace = mkdtempSync(join(tmpdir(), `ac-bench-${id}-`));

// The same composition `agent-computer serve` runs, without log lines or heartbeats.
const node = await startNode({
  workspace,
  port: 0,
  token: "bench-token-0123456789",
  eventLog,
  nodeId: id,
  logMaxBytes,
  maxConcurrent,
  confine,
  ...(spawnHelpers > 0 ? { spawnHelpers } : {}),
  heartbeatMs: 0,
  logger: false,
  env: {},
});
process.stdout.write(`${JSON.stringify({ url: node.url })}\n`);

const stop = async () => {
  await node.close().catch(() => {});
  rmSync(workspace, { recursive: true, force: true });
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
