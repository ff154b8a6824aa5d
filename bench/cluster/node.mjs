// One agent-computer node for the cluster benchmark, as its own process (so
// three nodes use the machine like three real nodes would, not one shared
// event loop). Built on the compiled code in dist/ (`npm run build` first).
//
//   node bench/cluster/node.mjs --id a --log redis://127.0.0.1:PORT
//   node bench/cluster/node.mjs --id single --log memory
//
// Prints one JSON line {"url": ...} once listening; exits on SIGTERM.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openServeCluster } from "../../dist/cluster/serve.js";
import { Computer } from "../../dist/runtime/computer.js";
import { createComputerServer } from "../../dist/server/app.js";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const id = opt("id", "node");
const logSpec = opt("log", "memory");
const logMaxBytes = Number(opt("log-max-bytes", String(16 * 1024 * 1024)));
const workspace = mkdtempSync(join(tmpdir(), `ac-bench-${id}-`));

const cl = await openServeCluster({
  eventLog: logSpec,
  nodeId: id,
  logMaxBytes,
  logger: () => {},
});
const computer = new Computer({
  workspace,
  eventLog: cl.eventLog,
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
  logger: false,
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
