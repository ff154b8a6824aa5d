// PTY executions and the agent `bash` tool's persistent shell run in the same
// sandbox as every other execution: real bubblewrap, a real terminal. Inside,
// the terminal works (`tty`, `stty size`, resize with SIGWINCH) and the host
// does not show (its processes, a file outside the workspace, /etc/shadow).
// Skips loudly when the host cannot confine.

import { chmodSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentTools, createAgentTools } from "../src/agents/index.js";
import { Computer } from "../src/index.js";
import type { ExecHandle } from "../src/runtime/types.js";
import { createSandbox, type Sandbox } from "../src/sandbox/index.js";
import { confineSupport, sandboxBase } from "./support/sandbox-host.js";

const { canConfine } = await confineSupport("the confined pty tests");

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Everything a pty execution prints, as text, with a wait for a pattern. */
function collect(handle: ExecHandle) {
  let text = "";
  void (async () => {
    const reader = handle.events().getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      if (value.name === "stdout") text += Buffer.from(value.value as Uint8Array).toString();
    }
  })();
  return {
    get text() {
      return text;
    },
    async until(pattern: RegExp): Promise<string> {
      const deadline = Date.now() + 15_000;
      while (!pattern.test(text)) {
        if (Date.now() > deadline) throw new Error(`no ${pattern} in ${JSON.stringify(text)}`);
        await sleep(20);
      }
      return text;
    },
  };
}

describe.skipIf(!canConfine)("confined terminals and persistent shells", () => {
  let base: string;
  let ws: string;
  let outsideFile: string;
  let sandbox: Sandbox;
  let computer: Computer;
  let tools: AgentTools;

  beforeAll(async () => {
    base = sandboxBase("ac-sandbox-pty-");
    ws = path.join(base, "ws");
    mkdirSync(ws);
    outsideFile = path.join(base, "outside-secret.txt");
    writeFileSync(outsideFile, "outside-secret-content\n");
    chmodSync(outsideFile, 0o644); // readable by anyone on the host: only the sandbox hides it
    sandbox = await createSandbox({ workspace: ws, confine: "required" });
    await sandbox.adopt(ws);
    computer = new Computer({ workspace: ws, sandbox, killGraceMs: 300 });
    tools = createAgentTools(computer, { bashTimeoutMs: 10_000 });
  }, 60_000);

  afterAll(async () => {
    await tools?.close();
    await computer?.close();
    await sandbox?.dispose();
    rmSync(base, { recursive: true, force: true });
  });

  it("a pty execution is a terminal inside the sandbox: tty, stty, resize; no host", async () => {
    const handle = await computer.exec(
      {
        argv: [
          "sh",
          "-c",
          "trap 'echo winch:$(stty size)' WINCH; echo ready; until read x; do :; done; echo bye",
        ],
      },
      { pty: { cols: 80, rows: 24 } },
    );
    const out = collect(handle);
    await out.until(/ready/);
    await handle.resize({ cols: 101, rows: 33 });
    await out.until(/winch:33 101/);
    await handle.write("\n");
    await out.until(/bye/);
    await handle.result();

    const probe = await computer.exec(
      {
        argv: [
          "sh",
          "-c",
          `tty && echo tty-ok; stty size; ls /proc | grep -c '^[0-9]*$'; ` +
            `cat ${outsideFile} 2>&1; cat /etc/shadow 2>&1 | head -1; sleep 0.2`,
        ],
      },
      { pty: { cols: 90, rows: 20 } },
    );
    const text = Buffer.from((await probe.result()).stdout as Uint8Array)
      .toString()
      .replace(/\r/g, "");
    expect(text).toContain("tty-ok");
    expect(text).toContain("20 90");
    const lines = text.split("\n");
    const procs = Number(lines[lines.indexOf("20 90") + 1]);
    expect(procs).toBeLessThan(10); // its own PID namespace, not the host's processes
    expect(text).not.toContain("outside-secret-content");
    expect(text).toMatch(/outside-secret\.txt: No such file or directory/);
    expect(text).toMatch(/shadow: Permission denied|shadow: No such file/);
  });

  it("the agent bash tool's persistent shell is confined too", async () => {
    const a = await tools.call("bash", { command: "export KEEP=kept; cd /tmp && echo in-tmp > f" });
    expect(a.text).toContain("[exit status 0]");
    const r = await tools.call("bash", {
      command: `echo $KEEP; cat f; ls /proc | grep -c '^[0-9]*$'; cat ${outsideFile} 2>&1; kill -0 ${process.pid} 2>&1; echo rc=$?`,
    });
    const lines = r.text.split("\n");
    expect(lines[0]).toBe("kept");
    expect(lines[1]).toBe("in-tmp"); // its private /tmp, kept across calls
    expect(Number(lines[2])).toBeLessThan(10);
    expect(r.text).not.toContain("outside-secret-content");
    expect(r.text).toMatch(/rc=1/); // the server's pid is not there to signal
  });
});
