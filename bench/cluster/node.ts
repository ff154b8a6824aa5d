// One agent-computer node for the cluster benchmark, as its own process (so
// three nodes use the machine like three real nodes would, not one shared
// event loop). Started by run.ts from the compiled tree (.bench-out/):
//
//   node .bench-out/bench/cluster/node.js --id a --log redis://127.0.0.1:PORT
//   node .bench-out/bench/cluster/node.js --id single --log memory [--log-max-bytes N]
//
// Prints one JSON line {"url": ...} once listening; exits on SIGTERM.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openServeCluster } from "../../src/cluster/serve.js";
import { Computer } from "../../src/index.js";
import { createComputerServer } from "../../src/server/index.js";
import { numberOption, stringOption } from "../support/args.js";

const id = stringOption("id", "node");
const logSpec = stringOption("log", "memory");
const logMaxBytes = numberOption("log-max-bytes", 16 * 1024 * 1024);
const workspace = mkdtempSync(join(tmpdir(), `ac-bench-${id}-`));

const cl = await openServeCluster({
  log: logSpec,
  nodeId: id,
  logMaxBytes,
  logEvent: () => {},
});
const computer = new Computer({
  workspace,
  log: cl.log,
  nodeId: cl.nodeId,
  remote: cl.remote,
  logMaxBytes,
  maxConcurrent: 1000,
  heartbeatMs: 0,
});
cl.attach(computer);
const server = createComputerServer({
  computer,
  workspace,
  port: 0,
  token: "bench",
  log: false,
  heartbeats: false,
});
const url = await server.listen();
cl.advertise({ url });
process.stdout.write(`${JSON.stringify({ url })}\n`);

const stop = async () => {
  await server.close().catch(() => {});
  await cl.close().catch(() => {});
  rmSync(workspace, { recursive: true, force: true });
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
