// Agent tool benchmark over MCP (stdio), through the real MCP SDK client:
//  1. round-trip latency of exec_command `echo hi` (p50/p99 over N calls);
//  2. time to a complete, budgeted result of a command printing 10k lines.
// Each MCP server under test is a child process started the way an agent
// host starts it. A peer server runs side by side when given with
// --peer "<command line>" plus --peer-tool/--peer-arg (its tool name and the
// argument that carries the command), and the ratios are printed. Usage:
//   node bench/agent/run.mjs [--calls 200] [--lines 10000]
//     [--peer "npx -y some-mcp-server" --peer-tool start_process --peer-arg command]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.resolve(here, "../../dist/cli/main.js");
const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : def;
};
const calls = Number(opt("calls", "200"));
const lines = Number(opt("lines", "10000"));

async function measure(label, command, argv, tool, argName) {
  const transport = new StdioClientTransport({ command, args: argv, stderr: "ignore" });
  const client = new Client({ name: "bench-agent", version: "1.0.0" });
  await client.connect(transport);
  const call = (cmd) => client.callTool({ name: tool, arguments: { [argName]: cmd } });
  for (let i = 0; i < 5; i++) await call("echo hi"); // warm up
  const lat = [];
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now();
    await call("echo hi");
    lat.push(performance.now() - t0);
  }
  lat.sort((a, b) => a - b);
  const t0 = performance.now();
  const r = await call(`seq 1 ${lines}`);
  const bulkMs = performance.now() - t0;
  const size = JSON.stringify(r.content).length;
  await client.close();
  const p = (q) => lat[Math.min(lat.length - 1, Math.floor(q * lat.length))];
  const out = { label, p50: p(0.5), p99: p(0.99), bulkMs, resultChars: size };
  console.log(
    `${label.padEnd(16)} echo hi p50 ${out.p50.toFixed(2)} ms  p99 ${out.p99.toFixed(2)} ms  | ${lines} lines ${bulkMs.toFixed(1)} ms (${size} chars)`,
  );
  return out;
}

const dir = mkdtempSync(path.join(tmpdir(), "ac-bench-agent-"));
try {
  const ours = await measure(
    "agent-computer",
    process.execPath,
    [cli, "mcp", "--workspace", dir],
    "exec_command",
    "cmd",
  );
  const peer = opt("peer", "");
  if (peer) {
    const [command, ...argv] = peer.split(" ");
    const theirs = await measure(
      "peer",
      command,
      argv,
      opt("peer-tool", "start_process"),
      opt("peer-arg", "command"),
    );
    console.log(
      `ratios (ours / peer): p50 ${(ours.p50 / theirs.p50).toFixed(2)} (goal <= 0.5), ${lines} lines ${(ours.bulkMs / theirs.bulkMs).toFixed(2)} (goal <= 1.0)`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
