// Baseline for bench/server/run.mjs: the plainest possible node:http server
// that streams a command's stdout as the response body (no framing, no
// encoding, no log). Our server's transports are compared against it.
import { spawn } from "node:child_process";
import { createServer } from "node:http";

const server = createServer((req, res) => {
  const cmd = new URL(req.url, "http://x").searchParams.get("cmd");
  const child = spawn("/bin/sh", ["-c", cmd], { stdio: ["ignore", "pipe", "ignore"] });
  res.writeHead(200, { "content-type": "application/octet-stream" });
  child.stdout.pipe(res);
  res.on("close", () => child.kill());
});
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`raw listening: http://127.0.0.1:${server.address().port}\n`);
});
process.on("SIGTERM", () => process.exit(0));
