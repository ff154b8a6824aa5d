// Baseline for the server benchmarks (run.ts, server-cpu.ts): the plainest
// possible node:http server that streams a command's stdout as the response
// body (no framing, no encoding, no event log). Our server's transports are
// compared against it. Runs as its own process (see servers.ts).
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

const server = createServer((req, res) => {
  const cmd = new URL(req.url ?? "/", "http://x").searchParams.get("cmd") ?? "";
  const child = spawn("/bin/sh", ["-c", cmd], { stdio: ["ignore", "pipe", "ignore"] });
  res.writeHead(200, { "content-type": "application/octet-stream" });
  child.stdout.pipe(res);
  res.on("close", () => child.kill());
});
server.listen(0, "127.0.0.1", () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`raw listening: http://127.0.0.1:${port}\n`);
});
process.on("SIGTERM", () => process.exit(0));
