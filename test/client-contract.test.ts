// The same ExecHandle contract against the in-process Computer and against
// ComputerClient over real HTTP, so both faces of the API cannot drift apart.

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { ComputerClient } from "../src/client/client.js";
import { Computer } from "../src/runtime/computer.js";
import { runExecHandleContract } from "./support/exec-handle-contract.js";
import { startServer } from "./support/server-harness.js";

runExecHandleContract("in-process Computer", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "ac-contract-"));
  const computer = new Computer({ workspace: dir, heartbeatMs: 0 });
  return {
    api: computer,
    async close() {
      await computer.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});

runExecHandleContract("ComputerClient over HTTP", async () => {
  const h = await startServer();
  return { api: h.client, close: () => h.close() };
});

// The websocket transport (every execution multiplexed on one socket) must
// keep the same contract, in binary records and in text frames.
for (const binary of [true, false]) {
  runExecHandleContract(
    `ComputerClient over WebSocket (${binary ? "binary" : "text"})`,
    async () => {
      const h = await startServer();
      const api = new ComputerClient({
        url: h.url,
        token: h.token,
        transport: "websocket",
        binary,
      });
      return {
        api,
        async close() {
          await api.close();
          await h.close();
        },
      };
    },
  );
}
