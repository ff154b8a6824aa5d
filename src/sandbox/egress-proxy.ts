// The egress proxy behind the allow-list network mode. A sandbox in that mode
// has its own network namespace (loopback only), so the one way out is this
// proxy: a Unix socket on the host, bind-mounted into the sandbox, which a
// forwarder inside exposes as 127.0.0.1:3128 (HTTP_PROXY/HTTPS_PROXY point
// there). It speaks the two forms clients use through a proxy: CONNECT
// host:port (HTTPS and anything else tunnelled) and absolute-form plain HTTP
// requests. A name off the list gets `403` with a one-line text body a
// command can print. The name is checked, then resolved by the proxy itself
// (the resolver is injectable so tests can map names to 127.0.0.1), so a
// command cannot smuggle another address under an allowed name.
//
// One listener per execution: an execution's narrowed list is enforced by the
// socket it was given, so no request needs to say who it came from.

import { lookup } from "node:dns/promises";
import { chmod, chown } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import type { Duplex } from "node:stream";
import { allowed } from "./network.js";

export type Resolve = (host: string) => Promise<string>;

export interface EgressProxyOptions {
  socketPath: string;
  allow: string[];
  resolve?: Resolve;
  /** Owner of the socket file (the sandbox's identity), so only it and root can connect. */
  owner?: { uid: number; gid: number } | null;
}

export interface EgressProxy {
  readonly socketPath: string;
  close(): Promise<void>;
}

const HOP_BY_HOP = [
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "proxy-authenticate",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
];

async function systemResolve(host: string): Promise<string> {
  return (await lookup(host)).address;
}

/** Start a proxy listening on `socketPath` that admits the names in `allow`. */
export async function startEgressProxy(options: EgressProxyOptions): Promise<EgressProxy> {
  const resolve = options.resolve ?? systemResolve;
  const sockets = new Set<Duplex>();
  const track = (s: Duplex) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  };
  const admit = async (host: string): Promise<string | undefined> => {
    const bare = host.replace(/^\[|\]$/g, "");
    if (!allowed(options.allow, bare)) return undefined;
    return net.isIP(bare) ? bare : resolve(bare);
  };

  const server = http.createServer((req, res) => {
    let target: URL;
    try {
      target = new URL(req.url ?? "");
      if (target.protocol !== "http:") throw new Error("not http");
    } catch {
      return refuse(res, 400, "only absolute http:// URLs and CONNECT go through this proxy");
    }
    admit(target.hostname).then(
      (ip) => {
        if (!ip) return refuse(res, 403, denial(target.hostname));
        const headers = { ...req.headers };
        for (const h of HOP_BY_HOP) delete headers[h];
        const upstream = http.request({
          host: ip,
          port: Number(target.port || 80),
          method: req.method,
          path: `${target.pathname}${target.search}`,
          headers: { ...headers, host: target.host },
          setHost: false,
        });
        upstream.on("response", (up) => {
          const out = { ...up.headers };
          for (const h of HOP_BY_HOP) delete out[h];
          res.writeHead(up.statusCode ?? 502, out);
          up.pipe(res);
        });
        upstream.on("error", (err) => refuse(res, 502, unreachable(target.host, err)));
        req.pipe(upstream);
      },
      (err: unknown) => refuse(res, 502, unreachable(target.hostname, err)),
    );
  });

  server.on("connect", (req: http.IncomingMessage, client: Duplex, head: Buffer) => {
    track(client);
    client.on("error", () => client.destroy());
    const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(req.url ?? "");
    if (!m) return rawRefuse(client, 400, "CONNECT needs host:port");
    const host = m[1]!;
    const port = Number(m[2]);
    admit(host).then(
      (ip) => {
        if (!ip) return rawRefuse(client, 403, denial(host));
        const upstream = net.connect({ host: ip, port });
        track(upstream);
        let established = false;
        upstream.once("connect", () => {
          established = true;
          client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
          if (head.length) upstream.write(head);
          upstream.pipe(client);
          client.pipe(upstream);
        });
        upstream.on("error", (err) => {
          if (established) client.destroy();
          else rawRefuse(client, 502, unreachable(`${host}:${port}`, err));
          upstream.destroy();
        });
        client.on("close", () => upstream.destroy());
      },
      (err: unknown) => rawRefuse(client, 502, unreachable(host, err)),
    );
  });
  server.on("connection", track);

  await new Promise<void>((resolveListen, reject) => {
    server.once("error", reject);
    server.listen(options.socketPath, () => resolveListen());
  });
  if (options.owner) {
    await chown(options.socketPath, options.owner.uid, options.owner.gid);
    await chmod(options.socketPath, 0o600);
  }
  return {
    socketPath: options.socketPath,
    close: () =>
      new Promise<void>((resolveClose) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolveClose());
      }),
  };
}

function denial(host: string): string {
  return `agent-computer sandbox: network access to ${host} is not allowed (not on the allow-list)`;
}

function unreachable(host: string, err: unknown): string {
  return `agent-computer sandbox: cannot reach ${host}: ${err instanceof Error ? err.message : String(err)}`;
}

function refuse(res: http.ServerResponse, status: number, line: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = `${line}\n`;
  res.writeHead(status, {
    "content-type": "text/plain; charset=utf-8",
    "content-length": Buffer.byteLength(body),
    connection: "close",
  });
  res.end(body);
}

function rawRefuse(socket: Duplex, status: number, line: string): void {
  if (socket.writableEnded || socket.destroyed) return;
  const body = `${line}\n`;
  const text = status === 403 ? "Forbidden" : status === 400 ? "Bad Request" : "Bad Gateway";
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\ncontent-type: text/plain; charset=utf-8\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
