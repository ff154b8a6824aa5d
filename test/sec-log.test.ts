// The request/exec log tells the same story as the API: a killed command's
// "exec exit" line carries the state, exit code and signal that
// GET /v1/execs/:id reports (real server, real processes).

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startServer } from "./support/server-harness.js";

let h: Harness;
const lines: Array<Record<string, unknown>> = [];
beforeAll(async () => {
  h = await startServer({ server: { logger: (e) => lines.push(e) } });
});
afterAll(async () => {
  await h?.close();
});

describe("exec log lines", () => {
  it("a killed command is logged with the API's state, exit code and signal", async () => {
    for (const signal of ["SIGTERM", "SIGKILL"]) {
      const e = await h.client.exec({ command: "sleep 30" });
      await new Promise((r) => setTimeout(r, 100));
      await e.kill(signal);
      const result = await e.result();
      const info = await e.info();
      let line: Record<string, unknown> | undefined;
      for (let i = 0; i < 100 && !line; i++) {
        line = lines.find((l) => l.msg === "exec exit" && l.id === e.id);
        if (!line) await new Promise((r) => setTimeout(r, 20));
      }
      expect(info.state).toBe("killed");
      expect(result.status).toBe("killed");
      expect(line, signal).toMatchObject({
        state: info.state,
        exitCode: info.exitCode ?? undefined,
        signal: info.signal,
      });
    }
  });

  it("a timed-out command is logged as the API says", async () => {
    for (const command of ["sleep 30"]) {
      const e = await h.client.exec({ command }, { timeoutMs: 200 });
      await e.result();
      const info = await e.info();
      let line: Record<string, unknown> | undefined;
      for (let i = 0; i < 200 && !line; i++) {
        line = lines.find((l) => l.msg === "exec exit" && l.id === e.id);
        if (!line) await new Promise((r) => setTimeout(r, 20));
      }
      expect(info.state).toBe("timeout");
      expect(line, command).toMatchObject({
        state: info.state,
        exitCode: info.exitCode ?? undefined,
        signal: info.signal,
      });
    }
  }, 30_000);
});
