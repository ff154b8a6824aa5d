// A TCP proxy for resume tests: forwards loopback connections to a target and
// cuts connections (both directions, like a reset) at random points of the
// downstream byte stream, a fixed number of times. Seeded, so a failure can be
// reproduced from the seed printed by the test.

import net from "node:net";

export interface ChaosProxy {
  url: string;
  /** Cuts made so far. */
  readonly cuts: number;
  /** Request heads seen (first bytes of each upstream-bound connection chunk that starts a request). */
  readonly requests: string[];
  close(): Promise<void>;
}

/** Mulberry32: tiny deterministic PRNG. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export async function startChaosProxy(options: {
  target: string;
  /** Total number of cuts to make, then pass everything through. */
  cuts: number;
  /** Each cut happens after a random number of downstream bytes in [min, max). */
  minBytes: number;
  maxBytes: number;
  seed: number;
}): Promise<ChaosProxy> {
  const target = new URL(options.target);
  const rand = prng(options.seed);
  let cuts = 0;
  const requests: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client);
    sockets.add(upstream);
    const budget = options.minBytes + Math.floor(rand() * (options.maxBytes - options.minBytes));
    let seen = 0;
    const cut = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("data", (c: Buffer) => {
      const head = c.subarray(0, 200).toString("latin1");
      if (/^[A-Z]+ \//.test(head)) requests.push(head);
      upstream.write(c);
    });
    upstream.on("data", (c: Buffer) => {
      if (cuts < options.cuts) {
        seen += c.length;
        if (seen >= budget) {
          // Deliver part of this chunk (a cut mid-frame), then reset.
          cuts++;
          const keep = Math.floor(rand() * c.length);
          client.write(c.subarray(0, keep), () => cut());
          return;
        }
      }
      if (!client.write(c)) {
        upstream.pause();
        client.once("drain", () => upstream.resume());
      }
    });
    client.on("close", () => {
      upstream.destroy();
      sockets.delete(client);
    });
    upstream.on("close", () => {
      client.destroy();
      sockets.delete(upstream);
    });
    client.on("error", () => {});
    upstream.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    get cuts() {
      return cuts;
    },
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
