// Test support for cluster mode: in-process nodes (ClusterNode + Computer +
// HTTP server sharing one real Redis), and a TCP proxy that sends every new
// connection to the next node in turn and can cut live connections, so a
// client that reconnects lands on a different node each time.

import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ComputerClient } from "../../src/client/client.js";
import { ClusterNode } from "../../src/cluster/node.js";
import { registerClusterRoutes } from "../../src/cluster/routes.js";
import { Computer } from "../../src/runtime/computer.js";
import { createComputerServer } from "../../src/server/app.js";
import type { EventLog, ExecRecord } from "../../src/store/types.js";

export const TOKEN = "cluster-test-token";

export interface TestNode {
  id: string;
  url: string;
  cluster: ClusterNode;
  computer: Computer;
  client: ComputerClient;
  workspace: string;
  close(): Promise<void>;
}

export async function startNode(
  redisUrl: string,
  prefix: string,
  id: string,
  options: { logMaxBytes?: number; ttlMs?: number; sweepMs?: number } = {},
): Promise<TestNode> {
  const workspace = mkdtempSync(join(tmpdir(), `ac-node-${id}-`));
  const cluster = await ClusterNode.start({
    nodeId: id,
    redis: redisUrl,
    eventLogOptions: { prefix, logMaxBytes: options.logMaxBytes },
    ttlMs: options.ttlMs ?? 3000,
    sweepMs: options.sweepMs ?? 500,
    logger: () => {},
  });
  const computer = new Computer({
    workspace,
    eventLog: cluster.eventLog,
    nodeId: id,
    remote: cluster.remote,
    logMaxBytes: options.logMaxBytes,
    killGraceMs: 1000,
  });
  cluster.serve(computer);
  const server = createComputerServer({
    computer,
    workspace,
    port: 0,
    token: TOKEN,
    logger: false,
  });
  registerClusterRoutes(server.router, cluster);
  const url = await server.listen();
  cluster.liveness.advertise({ url });
  return {
    id,
    url,
    cluster,
    computer,
    workspace,
    client: new ComputerClient({ url, token: TOKEN }),
    async close() {
      await server.close();
      await cluster.close();
      rmSync(workspace, { recursive: true, force: true });
    },
  };
}

export interface SwitchingProxy {
  url: string;
  /** How many connections were accepted, and the node index each went to. */
  readonly routed: number[];
  /** Destroy every live connection (client and upstream side). */
  cutAll(): void;
  close(): Promise<void>;
}

/**
 * Round-robin TCP proxy over `targets` ("http://127.0.0.1:port"). When
 * `cutAfterBytes` is set, each connection is cut once that many bytes (a fresh
 * random amount per connection) have flowed back to the client.
 */
export async function startSwitchingProxy(
  targets: string[],
  cutAfterBytes?: () => number,
): Promise<SwitchingProxy> {
  const live = new Set<net.Socket>();
  const routed: number[] = [];
  let next = 0;
  const server = net.createServer((client) => {
    const idx = next++ % targets.length;
    routed.push(idx);
    const u = new URL(targets[idx]!);
    const upstream = net.connect(Number(u.port), u.hostname);
    live.add(client);
    live.add(upstream);
    const limit = cutAfterBytes?.();
    let sent = 0;
    const kill = () => {
      client.destroy();
      upstream.destroy();
      live.delete(client);
      live.delete(upstream);
    };
    client.on("data", (d) => {
      if (!upstream.write(d)) client.pause();
    });
    upstream.on("drain", () => client.resume());
    upstream.on("data", (d) => {
      sent += d.length;
      if (limit !== undefined && sent > limit) {
        // Deliver part of this chunk, then cut: breaks land mid-frame. Cut
        // every other connection too (idle keep-alive ones included), so the
        // client's next request opens a new connection, which round-robin
        // sends to a different node than the one that just broke.
        client.write(d.subarray(0, d.length - (sent - limit)));
        kill();
        for (const sock of live) sock.destroy();
        live.clear();
        return;
      }
      if (!client.write(d)) upstream.pause();
    });
    client.on("drain", () => upstream.resume());
    client.on("error", kill);
    upstream.on("error", kill);
    client.on("close", kill);
    upstream.on("close", kill);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    routed,
    cutAll() {
      for (const s of live) s.destroy();
      live.clear();
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of live) s.destroy();
        server.close(() => r());
      }),
  };
}

/** Collect an execution's events from a stream, concatenating stdout bytes. */
export async function collect(
  stream: ReadableStream<{ seq: number; name: string; value: unknown }>,
  opts: {
    stopAfterBytes?: number;
    /** Called per logged event with the stdout/stderr bytes collected so far. */
    onEvent?: (ev: { seq: number; name: string }, totalBytes: number) => void;
  } = {},
): Promise<{ bytes: Buffer; seqs: number[]; exit?: { value: unknown; reason?: string } }> {
  const parts: Buffer[] = [];
  const seqs: number[] = [];
  let total = 0;
  let exit: { value: unknown; reason?: string } | undefined;
  const reader = stream.getReader();
  try {
    for (;;) {
      const { value: ev, done } = await reader.read();
      if (done) break;
      if (ev.name === "heartbeat") continue;
      seqs.push(ev.seq);
      if (ev.name === "exit") {
        opts.onEvent?.(ev, total);
        exit = ev as unknown as { value: unknown; reason?: string };
        break;
      }
      const v = ev.value as Uint8Array | string;
      const b =
        typeof v === "string" ? Buffer.from(v) : Buffer.from(v.buffer, v.byteOffset, v.byteLength);
      parts.push(Buffer.from(b));
      total += b.length;
      opts.onEvent?.(ev, total);
      if (opts.stopAfterBytes !== undefined && total >= opts.stopAfterBytes) break;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return { bytes: Buffer.concat(parts), seqs, exit };
}

/** A bare running record of `node` in `eventLog` (no process behind it). */
export async function newExecRecord(
  eventLog: EventLog,
  node: string,
  id: string = randomUUID(),
): Promise<ExecRecord> {
  await eventLog.create({
    id,
    command: "x",
    cwd: "",
    encoding: "b64",
    node,
    startedAt: Date.now(),
  });
  return (await eventLog.get(id))!;
}
