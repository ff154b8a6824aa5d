// The servers `bench:scale` measures, each its own process (so its CPU time
// and RSS are its own): one node with the memory log, or two nodes sharing a
// Redis (`--log redis://`), started from bench/cluster/node.ts, the same
// composition `agent-computer serve` runs. Also a keep-alive HTTP client that
// costs the benchmark process little per request (node:http, not fetch), so
// the client's own overhead disturbs the server on a 2-core box as little as
// possible.

import type { ChildProcess } from "node:child_process";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { type RedisServer, startRedis } from "../../test/support/redis-server.js";
import { rssMiB, startNodeProcess, stopProcess } from "../support/processes.js";

const here = path.dirname(fileURLToPath(import.meta.url));
export const TOKEN = "bench-token-0123456789";

export interface ScaleNode {
  readonly url: string;
  readonly pid: number;
  rssMiB(): number;
}

export interface ScaleCluster {
  readonly nodes: ScaleNode[];
  readonly label: string;
  stop(): Promise<void>;
}

// Node processes are killed if the benchmark dies half-way.
const children = new Set<ChildProcess>();
process.on("exit", () => {
  for (const c of children) c.kill("SIGKILL");
});

async function startOne(
  id: string,
  log: string,
  maxConcurrent: number,
  confine: "auto" | "off",
  spawnHelpers: number,
): Promise<ScaleNode & { child: ChildProcess }> {
  const { child, ready } = await startNodeProcess(
    [
      path.join(here, "../cluster/node.js"),
      "--id",
      id,
      "--log",
      log,
      "--max-concurrent",
      String(maxConcurrent),
      "--confine",
      confine,
      "--spawn-helpers",
      String(spawnHelpers),
    ],
    /^(\{.*\})$/m,
  );
  children.add(child);
  const { url } = JSON.parse(ready) as { url: string };
  const pid = child.pid as number;
  return { url, pid, child, rssMiB: () => rssMiB(pid) };
}

/**
 * One memory-log node, or (`redis`) two nodes sharing a fresh Redis.
 * `confine`: `auto` (serve's default: sandboxed when the host allows) or `off`;
 * `spawnHelpers`: 0 for serve's default.
 */
export async function startCluster(
  kind: "memory" | "redis",
  maxConcurrent: number,
  confine: "auto" | "off" = "auto",
  spawnHelpers = 0,
): Promise<ScaleCluster> {
  let redis: RedisServer | undefined;
  const started: (ScaleNode & { child: ChildProcess })[] = [];
  if (kind === "memory") {
    started.push(await startOne("single", "memory", maxConcurrent, confine, spawnHelpers));
  } else {
    redis = await startRedis();
    started.push(await startOne("a", redis.url, maxConcurrent, confine, spawnHelpers));
    started.push(await startOne("b", redis.url, maxConcurrent, confine, spawnHelpers));
  }
  return {
    nodes: started,
    label: kind === "memory" ? "1 node, memory log" : "2 nodes, --log redis://",
    async stop() {
      await Promise.all(
        started.map(async (n) => {
          await stopProcess(n.child);
          children.delete(n.child);
        }),
      );
      await redis?.close();
    },
  };
}

/** Keep-alive agent for every request of the benchmark process. */
export const agent = new http.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });

/** A request with a JSON body (if any); resolves with the status and the whole text. */
export function requestText(
  url: string,
  method: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      url,
      {
        method,
        agent,
        headers: {
          authorization: `Bearer ${TOKEN}`,
          ...headers,
          ...(data
            ? { "content-type": "application/json", "content-length": Buffer.byteLength(data) }
            : {}),
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          text += c;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}

/** A JSON request; resolves with status and parsed body. */
export async function requestJson(
  url: string,
  method: string,
  body?: unknown,
): Promise<{ status: number; body: unknown }> {
  const { status, text } = await requestText(url, method, body);
  return { status, body: text ? JSON.parse(text) : undefined };
}
