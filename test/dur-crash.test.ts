// Crash suite for the SQLite log: rounds of `kill -9` of a real server
// process (`agent-computer serve --log sqlite:PATH`) while fast and quiet
// commands run and SDK clients stream them, then a restart on the same port.
// Every round checks, for every execution:
// - no seq reuse: each event a client saw (before or after the crash) is
//   identical, byte for byte, to the event the restarted server has at that seq;
// - every client stream ends with an exit (reason `lost` for a command that
//   was running at the crash) and never fails;
// - a command that finished before the crash has its output byte-exact.
// Violations are counted and must be 0; the count of rounds and events
// compared is printed for the report.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ComputerClient, type RemoteExecHandle } from "../src/client/client.js";
import { encodeBase64 } from "../src/wire/base64.js";
import type { ExecEvent, LoggedEvent } from "../src/wire/types.js";
import { ensureDistBuilt } from "./support/dist.js";
import { listeningUrl } from "./support/proc-serve.js";

const root = path.resolve(__dirname, "..");
const cli = path.join(root, "dist/cli/main.js");
const TOKEN = "crash-suite-token-0123456789";
const ROUNDS = Number(process.env.DUR_CRASH_ROUNDS ?? 6);

let base: string;
let child: ChildProcess | undefined;

async function startServer(port: number, db: string, ws: string): Promise<string> {
  const c = spawn(
    process.execPath,
    [cli, "serve", "--port", String(port), "--workspace", ws, "--log", `sqlite:${db}`, "--quiet"],
    {
      env: { ...process.env, AGENT_COMPUTER_TOKEN: TOKEN },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  child = c;
  let err = "";
  c.stderr!.on("data", (d) => {
    err += d;
  });
  const url = await listeningUrl(c, "server", () => err);
  c.stdout!.resume();
  return url;
}

async function kill9(): Promise<void> {
  const c = child;
  if (!c || c.exitCode !== null || c.signalCode !== null) return;
  const done = new Promise((r) => c.once("exit", r));
  c.kill("SIGKILL");
  await done;
}

/** One event as comparable bytes (values as base64). */
function key(ev: LoggedEvent): string {
  if (ev.name === "exit") return JSON.stringify([ev.seq, "exit", ev.value, ev.reason, ev.signal]);
  const v = typeof ev.value === "string" ? `t:${ev.value}` : `b:${encodeBase64(ev.value)}`;
  return JSON.stringify([ev.seq, ev.name, v]);
}

interface Watched {
  id: string;
  kind: "fast" | "quiet" | "done";
  seen: Map<number, string>;
  exit?: LoggedEvent;
  error?: unknown;
  stream: Promise<void>;
}

function watch(h: RemoteExecHandle, kind: Watched["kind"]): Watched {
  const w: Watched = { id: h.id, kind, seen: new Map(), stream: Promise.resolve() };
  w.stream = (async () => {
    try {
      for await (const ev of h.events({
        heartbeats: false,
      }) as unknown as AsyncIterable<ExecEvent>) {
        if (ev.name === "heartbeat") continue;
        w.seen.set(ev.seq, key(ev));
        if (ev.name === "exit") w.exit = ev;
      }
    } catch (err) {
      w.error = err;
    }
  })();
  return w;
}

beforeAll(() => {
  ensureDistBuilt();
  base = mkdtempSync(path.join(tmpdir(), "ac-dur-crash-"));
}, 180_000);
afterAll(async () => {
  await kill9();
  rmSync(base, { recursive: true, force: true });
});

describe("SQLite log: kill -9 and restart", () => {
  it(`${ROUNDS} rounds: no seq a client saw is reused or missing, every stream ends with an exit`, async () => {
    const db = path.join(base, "log.db");
    const ws = path.join(base, "ws");
    let url = await startServer(0, db, ws);
    const port = Number(new URL(url).port);
    const violations: string[] = [];
    let compared = 0;
    let streams = 0;
    for (let round = 1; round <= ROUNDS; round++) {
      const client = new ComputerClient({
        url,
        token: TOKEN,
        resume: { maxRetries: 40, initialDelayMs: 50, maxDelayMs: 500 },
      });
      const watched: Watched[] = [];
      // A command that finishes before the crash: its output must come back exact.
      const done = await client.exec("seq 1 20000");
      await done.result();
      watched.push(watch(done, "done"));
      for (let i = 0; i < 4; i++) {
        // Fast: a line per write, as fast as the shell goes; the clients keep
        // up with it, so they read at the tip of the log, where the newest
        // events are not committed yet (the case a crash can take back).
        const h = await client.exec(
          `i=0; while [ $i -lt 2000000 ]; do i=$((i+1)); echo line-${i}-$i; done`,
        );
        watched.push(watch(h, "fast"));
      }
      // And one that writes as fast as the pipe takes, clients lagging behind.
      const bulk = await client.exec("seq 1 3000000");
      watched.push(watch(bulk, "fast"));
      for (let i = 0; i < 2; i++) {
        const h = await client.exec(
          `for i in 1 2 3; do echo quiet-${i}-$i; sleep 0.2; done; sleep 8`,
        );
        watched.push(watch(h, "quiet"));
      }
      // Let output flow, then crash.
      await new Promise((r) => setTimeout(r, 600 + 150 * round));
      await kill9();
      url = await startServer(port, db, ws);
      await Promise.all(watched.map((w) => w.stream));
      streams += watched.length;
      // Compare what clients saw with what the restarted server has.
      for (const w of watched) {
        const tag = `round ${round} ${w.kind} ${w.id}`;
        if (w.error) {
          violations.push(`${tag}: stream failed: ${String((w.error as Error).message)}`);
          continue;
        }
        if (!w.exit) violations.push(`${tag}: stream ended without an exit`);
        const h = await client.get(w.id);
        const info = await h.info();
        const stored = new Map<number, string>();
        for await (const ev of h.events({
          after: info.earliestSeq - 1,
          heartbeats: false,
        }) as unknown as AsyncIterable<ExecEvent>) {
          if (ev.name !== "heartbeat") stored.set(ev.seq, key(ev));
        }
        for (const [seq, k] of w.seen) {
          if (seq < info.earliestSeq) continue; // trimmed by the ring since
          compared++;
          if (stored.get(seq) !== k) {
            violations.push(
              `${tag}: seq ${seq} seen as ${k.slice(0, 60)}, stored ${String(stored.get(seq)).slice(0, 60)}`,
            );
            break;
          }
        }
        const maxSeen = Math.max(0, ...w.seen.keys());
        if (maxSeen > info.lastSeq)
          violations.push(`${tag}: saw seq ${maxSeen} > lastSeq ${info.lastSeq}`);
        if (w.kind === "done") {
          const r = await h.result();
          const want = `${Array.from({ length: 20000 }, (_, i) => i + 1).join("\n")}\n`;
          if (Buffer.from(r.stdout as Uint8Array).toString() !== want) {
            violations.push(`${tag}: finished output differs`);
          }
        }
        if (w.kind === "quiet" && w.exit?.name === "exit" && w.exit.reason !== "lost") {
          violations.push(`${tag}: a command running at the crash ended ${w.exit.reason}`);
        }
      }
    }
    console.log(
      `dur-crash: ${ROUNDS} rounds, ${streams} SDK streams, ${compared} events compared, ${violations.length} violations`,
    );
    expect(violations).toEqual([]);
  }, 300_000);
});
