// Agent tool benchmark (`npm run bench:agent`), through the real MCP SDK
// client, side by side in one run:
//   - agent-computer over stdio (`agent-computer mcp --workspace DIR`),
//   - agent-computer over Streamable HTTP (`serve`, then /mcp),
//   - the peer `@wonderwhy-er/desktop-commander` over stdio (its process
//     tool `start_process`), when it can be installed and started here.
// Workloads: round-trip latency of `echo hi` (p50/p99, rounds interleaved so
// machine load hits every contender alike) and a command printing 10k lines
// (time to a complete, budgeted result: the call's answer, median of rounds).
//
// The peer cannot be a dependency of this package (its install downloads
// binaries from outside the npm registry: ripgrep, a Chromium for
// puppeteer), so it is installed on demand into `.bench-peers/` with
// `--ignore-scripts` and PUPPETEER_SKIP_DOWNLOAD=1: its process tools need
// neither binary. When it cannot be installed or started, the script says why
// and still reports ours. Options: --calls N (default 200), --rounds N (10k
// lines, default 10), --lines N (default 10000), --no-peer, --no-http.

import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { flag, numberOption } from "../support/args.js";
import { startNodeProcess, stopProcess } from "../support/processes.js";
import { median, percentile } from "../support/stats.js";

const PEER = "@wonderwhy-er/desktop-commander";
const PEER_VERSION = "0.2.52";

const here = path.dirname(fileURLToPath(import.meta.url));
/** The repository root (this file runs from .bench-out/bench/agent/). */
const root = path.resolve(here, "../../..");
const cli = path.join(root, ".bench-out/src/cli/main.js");
const calls = numberOption("calls", 200);
const rounds = numberOption("rounds", 10);
const lines = numberOption("lines", 10_000);

interface Contender {
  label: string;
  client: Client;
  /** Runs a shell command line through the contender's process tool. */
  run(cmd: string): Promise<CallToolResult>;
  close(): Promise<void>;
  echo: number[];
  bulk: number[];
  bulkChars: number;
  bulkComplete: boolean;
}

async function stdioContender(
  label: string,
  command: string,
  args: string[],
  tool: (cmd: string) => { name: string; arguments: Record<string, unknown> },
  cwd: string,
  env: Record<string, string> = {},
): Promise<Contender> {
  const transport = new StdioClientTransport({
    command,
    args,
    cwd,
    stderr: "ignore",
    env: { ...(process.env as Record<string, string>), ...env },
  });
  const client = new Client({ name: "bench-agent", version: "1.0.0" });
  await client.connect(transport);
  return contender(label, client, tool, () => client.close());
}

function contender(
  label: string,
  client: Client,
  tool: (cmd: string) => { name: string; arguments: Record<string, unknown> },
  close: () => Promise<void>,
): Contender {
  return {
    label,
    client,
    run: async (cmd) => (await client.callTool(tool(cmd))) as CallToolResult,
    close,
    echo: [],
    bulk: [],
    bulkChars: 0,
    bulkComplete: false,
  };
}

const ours = (cmd: string) => ({ name: "exec_command", arguments: { cmd } });
const theirs = (cmd: string) => ({
  name: "start_process",
  arguments: { command: cmd, timeout_ms: 30_000 },
});

/** Installs the peer into .bench-peers/ (once); the path of its entry point, or why not. */
function installPeer(): { entry: string; home: string } | { why: string } {
  const prefix = path.join(root, ".bench-peers");
  const pkgDir = path.join(prefix, "node_modules", ...PEER.split("/"));
  const pkgJson = path.join(pkgDir, "package.json");
  const installed = () =>
    existsSync(pkgJson) &&
    (JSON.parse(readFileSync(pkgJson, "utf8")) as { version: string }).version === PEER_VERSION;
  if (!installed()) {
    mkdirSync(prefix, { recursive: true });
    console.log(`installing ${PEER}@${PEER_VERSION} into ${prefix} (scripts off) ...`);
    const r = spawnSync(
      "npm",
      [
        "install",
        "--prefix",
        prefix,
        "--ignore-scripts",
        "--no-save",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        `${PEER}@${PEER_VERSION}`,
      ],
      {
        cwd: prefix,
        env: { ...process.env, PUPPETEER_SKIP_DOWNLOAD: "1" },
        encoding: "utf8",
        timeout: 15 * 60_000,
      },
    );
    if (r.status !== 0 || !installed()) {
      const detail = (r.stderr || r.error?.message || "").trim().split("\n").slice(-5).join("\n");
      return { why: `npm install failed (status ${r.status}): ${detail}` };
    }
  }
  const pkg = JSON.parse(readFileSync(pkgJson, "utf8")) as {
    bin?: string | Record<string, string>;
    main?: string;
  };
  const bin =
    typeof pkg.bin === "string" ? pkg.bin : pkg.bin ? Object.values(pkg.bin)[0] : pkg.main;
  if (!bin) return { why: "the installed package names no entry point" };
  const home = path.join(prefix, "home");
  mkdirSync(home, { recursive: true });
  return { entry: path.join(pkgDir, bin), home };
}

function textOf(r: CallToolResult): string {
  return r.content.map((c) => (c.type === "text" ? c.text : "")).join("");
}

async function main(): Promise<void> {
  if (!existsSync(cli)) throw new Error(`${cli} is missing: run npm run bench:build first`);
  const dir = mkdtempSync(path.join(tmpdir(), "ac-bench-agent-"));
  const contenders: Contender[] = [];
  let server: Awaited<ReturnType<typeof startNodeProcess>> | undefined;
  try {
    contenders.push(
      await stdioContender(
        "agent-computer stdio",
        process.execPath,
        [cli, "mcp", "--workspace", dir],
        ours,
        dir,
      ),
    );
    if (!flag("no-http")) {
      const token = "bench-token";
      server = await startNodeProcess(
        [cli, "serve", "--port", "0", "--workspace", dir, "--token", token, "--quiet"],
        /listening: (http:\/\/[^/\s]+)/,
      );
      const transport = new StreamableHTTPClientTransport(new URL(`${server.ready}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      });
      const client = new Client({ name: "bench-agent", version: "1.0.0" });
      await client.connect(transport);
      contenders.push(contender("agent-computer /mcp", client, ours, () => client.close()));
    }
    let peerNote = "";
    if (!flag("no-peer")) {
      const peer = installPeer();
      if ("why" in peer) {
        peerNote = `peer not measured: ${peer.why}`;
      } else {
        try {
          const c = await stdioContender(
            `desktop-commander ${PEER_VERSION}`,
            process.execPath,
            [peer.entry],
            theirs,
            dir,
            // Its config (and tool-call log) goes to $HOME: keep it in the scratch
            // folder, and its telemetry off.
            { HOME: peer.home, DESKTOP_COMMANDER_DISABLE_TELEMETRY: "1" },
          );
          const names = (await c.client.listTools()).tools.map((t) => t.name);
          if (!names.includes("start_process")) {
            await c.close();
            peerNote = `peer not measured: no start_process tool (it has ${names.join(", ")})`;
          } else {
            const probe = textOf(await c.run("echo hi"));
            if (!/hi/.test(probe)) {
              await c.close();
              peerNote = `peer not measured: its start_process did not return the output: ${probe.slice(0, 200)}`;
            } else contenders.push(c);
          }
        } catch (err) {
          peerNote = `peer not measured: it did not start: ${(err as Error).message}`;
        }
      }
    }
    if (peerNote) console.log(peerNote);

    // Warm-up, then interleaved rounds (each round starts with a different contender).
    for (const c of contenders) for (let i = 0; i < 5; i++) await c.run("echo hi");
    for (let i = 0; i < calls; i++) {
      for (let k = 0; k < contenders.length; k++) {
        const c = contenders[(i + k) % contenders.length]!;
        const t0 = performance.now();
        await c.run("echo hi");
        c.echo.push(performance.now() - t0);
      }
    }
    const bulkCmd = `seq 1 ${lines}`;
    for (let i = 0; i < rounds; i++) {
      for (let k = 0; k < contenders.length; k++) {
        const c = contenders[(i + k) % contenders.length]!;
        const t0 = performance.now();
        const r = await c.run(bulkCmd);
        c.bulk.push(performance.now() - t0);
        const text = textOf(r);
        c.bulkChars = text.length;
        // Complete: the answer carries the exit and the last line (head and
        // tail kept when over budget, with a marker saying how to get the rest).
        c.bulkComplete = text.includes(`\n${lines}\n`) || text.endsWith(`${lines}`);
      }
    }

    console.log(
      `\nagent tools over MCP (${calls} echo calls, ${rounds} rounds of ${lines} lines; loaded shared 2-core machine)`,
    );
    for (const c of contenders) {
      console.log(
        `${c.label.padEnd(28)} echo hi p50 ${percentile(c.echo, 50).toFixed(2)} ms  p99 ${percentile(c.echo, 99).toFixed(2)} ms  | ${lines} lines ${median(c.bulk).toFixed(1)} ms (${c.bulkChars} chars${c.bulkComplete ? ", last line present" : ", LAST LINE MISSING"})`,
      );
    }
    const peer = contenders.find((c) => c.label.startsWith("desktop-commander"));
    if (peer) {
      for (const c of contenders.filter((x) => x !== peer)) {
        console.log(
          `ratio ${c.label} / peer: echo p50 ${(percentile(c.echo, 50) / percentile(peer.echo, 50)).toFixed(2)} (goal <= 0.5), p99 ${(percentile(c.echo, 99) / percentile(peer.echo, 99)).toFixed(2)}, ${lines} lines ${(median(c.bulk) / median(peer.bulk)).toFixed(2)} (goal <= 1.0)`,
        );
      }
    }
  } finally {
    for (const c of contenders) await c.close().catch(() => {});
    if (server) await stopProcess(server.child).catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
