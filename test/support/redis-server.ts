// Test harness: a real, private redis-server per test file. It listens on a
// free loopback port with its own temp dir (so AOF files never collide), can
// run with or without AOF, and can be stopped, SIGKILLed and restarted on the
// SAME port so clients see a genuine connection loss and reconnect. Tests that
// need it call `redisAvailable()` and skip loudly when the binary is missing,
// because mocks of Redis would hide exactly the failures these tests exist for.

import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const REDIS_SERVER_BIN = process.env.REDIS_SERVER_BIN ?? "/usr/bin/redis-server";

let warned = false;

/** True when redis-server can be started; otherwise prints one loud notice (once per process). */
export function redisAvailable(): boolean {
  if (existsSync(REDIS_SERVER_BIN)) return true;
  if (!warned) {
    warned = true;
    const bar = "!".repeat(78);
    console.warn(
      `\n${bar}\n!! SKIPPING Redis tests: ${REDIS_SERVER_BIN} not found.\n` +
        "!! Install it with `sudo apt-get install -y redis-server` (Debian/Ubuntu),\n" +
        "!! or point REDIS_SERVER_BIN at a redis-server binary. CI installs it (.ci/run).\n" +
        `${bar}\n`,
    );
  }
  return false;
}

export interface StartRedisOptions {
  /** Append-only file persistence (fsync every write so a restart loses nothing). */
  aof?: boolean;
  /** Extra `--name value` arguments. */
  args?: string[];
}

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  readonly dir: string;
  /** The child's pid while running. */
  readonly pid: number | undefined;
  /** Graceful stop (SIGTERM: redis flushes AOF and exits). */
  stop(): Promise<void>;
  /** Hard crash (SIGKILL). */
  crash(): Promise<void>;
  /** Start again on the same port and dir (after stop or crash). */
  start(): Promise<void>;
  /** stop() + start(). */
  restart(): Promise<void>;
  /** Stop and remove the temp dir. */
  close(): Promise<void>;
}

/** Varies the first port tried from one call to the next. */
let nextPortTry = 0;

/**
 * A free loopback port for a Redis, below the kernel's ephemeral range
 * (32768+ on Linux) and in a band of its own per test worker. A Redis that is
 * stopped and restarted on the same port leaves that port free meanwhile: a
 * port from the ephemeral range could then be taken by any outgoing
 * connection or `listen(0)`, and one from a shared band by another worker's
 * Redis, whose clients' reconnects would then reach the wrong server.
 */
export async function freePort(): Promise<number> {
  const band = 20_000 + (Number(process.env.VITEST_POOL_ID ?? 0) % 12) * 1000;
  const start = (process.pid * 7 + nextPortTry++) % 1000;
  for (let i = 0; i < 1000; i++) {
    const port = band + ((start + i) % 1000);
    if (await canListen(port)) return port;
  }
  throw new Error(`no free port in ${band}-${band + 999}`);
}

function canListen(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

/** Resolves once a PING on `port` answers PONG, or rejects after `timeoutMs`. */
async function waitForPing(port: number, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`redis-server exited early (code ${child.exitCode}, ${child.signalCode})`);
    }
    const ok = await new Promise<boolean>((resolve) => {
      const sock = net.connect(port, "127.0.0.1");
      let buf = "";
      sock.setTimeout(500, () => {
        sock.destroy();
        resolve(false);
      });
      sock.on("connect", () => sock.write("PING\r\n"));
      sock.on("data", (d) => {
        buf += d.toString();
        // "-LOADING" while it replays the AOF: not ready yet.
        if (buf.includes("\r\n")) {
          sock.destroy();
          resolve(buf.startsWith("+PONG"));
        }
      });
      sock.on("error", () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`redis-server on port ${port} not ready`);
    await new Promise((r) => setTimeout(r, 30));
  }
}

export async function startRedis(options: StartRedisOptions = {}): Promise<RedisServer> {
  if (!existsSync(REDIS_SERVER_BIN)) throw new Error(`${REDIS_SERVER_BIN} not found`);
  const dir = mkdtempSync(join(tmpdir(), "ac-redis-"));
  let port = 0;
  let child: ChildProcess | undefined;
  let stderr = "";

  const spawnOn = async (p: number): Promise<void> => {
    const args = [
      "--port",
      String(p),
      "--bind",
      "127.0.0.1",
      "--dir",
      dir,
      "--save",
      "",
      "--appendonly",
      options.aof ? "yes" : "no",
      // fsync on every write: the restart test asserts "nothing acknowledged is lost".
      "--appendfsync",
      "always",
      "--protected-mode",
      "no",
      "--daemonize",
      "no",
      "--loglevel",
      "warning",
      ...(options.args ?? []),
    ];
    const c = spawn(REDIS_SERVER_BIN, args, { stdio: ["ignore", "ignore", "pipe"] });
    c.stderr?.on("data", (d) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    child = c;
    try {
      await waitForPing(p, c, 10_000);
    } catch (err) {
      c.kill("SIGKILL");
      throw new Error(`${(err as Error).message}; stderr: ${stderr}`);
    }
  };

  const waitExit = async (c: ChildProcess | undefined, signal: NodeJS.Signals): Promise<void> => {
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const done = new Promise<void>((resolve) => c.once("exit", () => resolve()));
    c.kill(signal);
    await done;
  };

  // The port is free when we look; another process may grab it before redis
  // binds. Retry a few times with a fresh port.
  for (let attempt = 0; ; attempt++) {
    port = await freePort();
    try {
      await spawnOn(port);
      break;
    } catch (err) {
      if (attempt >= 4) throw err;
    }
  }

  const server: RedisServer = {
    get port() {
      return port;
    },
    get url() {
      return `redis://127.0.0.1:${port}`;
    },
    dir,
    get pid() {
      return child?.pid;
    },
    stop: () => waitExit(child, "SIGTERM"),
    crash: () => waitExit(child, "SIGKILL"),
    start: async () => {
      // The same port must be reused so clients reconnect to it; SO_REUSEADDR
      // (set by redis) makes that immediate, but retry briefly just in case.
      for (let attempt = 0; ; attempt++) {
        try {
          await spawnOn(port);
          return;
        } catch (err) {
          if (attempt >= 20) throw err;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    },
    restart: async () => {
      await server.stop();
      await server.start();
    },
    close: async () => {
      await waitExit(child, "SIGTERM");
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return server;
}
