// Starts a real agent-computer server (real Computer, real sockets, port 0)
// on a fresh temp workspace for a test, and tears it down after. Shared by the
// server, client and CLI tests so they all exercise the same wiring as
// `agent-computer serve`.

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { ComputerClient } from "../../src/client/client.js";
import { Computer, type ComputerOptions } from "../../src/runtime/computer.js";
import {
  type ComputerServer,
  type ComputerServerOptions,
  createComputerServer,
} from "../../src/server/app.js";

export interface Harness {
  server: ComputerServer;
  computer: Computer;
  url: string;
  token: string;
  workspace: string;
  client: ComputerClient;
  close(): Promise<void>;
}

export async function startServer(
  opts: { computer?: Partial<ComputerOptions>; server?: Partial<ComputerServerOptions> } = {},
): Promise<Harness> {
  const base = await mkdtemp(path.join(tmpdir(), "ac-server-"));
  const workspace = path.join(base, "ws");
  let computer!: Computer;
  const server = createComputerServer({
    workspace,
    port: 0,
    token: "test-token-0123456789",
    logger: false,
    ...opts.server,
    computer: (observer) => {
      computer = new Computer({ workspace, heartbeatMs: 0, ...opts.computer, observer });
      return computer;
    },
  });
  // The Computer creates the workspace; the files API needs it before the first request.
  await (await import("node:fs/promises")).mkdir(workspace, { recursive: true });
  const url = await server.listen();
  const client = new ComputerClient({ url, token: "test-token-0123456789" });
  return {
    server,
    computer,
    url,
    token: "test-token-0123456789",
    workspace,
    client,
    async close() {
      await server.close();
      await rm(base, { recursive: true, force: true });
    },
  };
}
