// The package's public entry points, resolved the way a consumer resolves them:
// Node's own resolver on `agent-computer/...` (a self-reference through
// package.json "exports"), against the built dist/. This catches an export map
// or build that type-checks but does not ship what the docs promise.
import { execFileSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { ensureDistBuilt } from "./support/dist.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

function importByName(code: string): unknown {
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", code], {
    cwd: root,
    encoding: "utf8",
  });
  return JSON.parse(out);
}

describe("package exports", () => {
  beforeAll(() => ensureDistBuilt(), 120_000);

  it("agent-computer/wire, /aui, /client, /server and the root resolve by name with their main entry points", () => {
    const names = importByName(`
      const w = await import("agent-computer/wire");
      const a = await import("agent-computer/aui");
      const c = await import("agent-computer/client");
      const r = await import("agent-computer");
      const s = await import("agent-computer/server");
      console.log(JSON.stringify({
        wire: ["encodeExecEvent", "decodeExecEvents", "ExecWireDecoder", "ExecWireError",
               "formatSseEvent", "createSseParser"].filter((k) => typeof w[k] === "function"),
        aui: ["validateCommand", "consumeAAtUIStream", "createAAtUIRuntime", "connectAAtUI"]
               .filter((k) => typeof a[k] === "function"),
        client: typeof c.ComputerClient,
        root: typeof r.Computer,
        server: typeof s.createComputerServer,
      }));
    `);
    expect(names).toEqual({
      wire: [
        "encodeExecEvent",
        "decodeExecEvents",
        "ExecWireDecoder",
        "ExecWireError",
        "formatSseEvent",
        "createSseParser",
      ],
      aui: ["validateCommand", "consumeAAtUIStream", "createAAtUIRuntime", "connectAAtUI"],
      client: "function",
      root: "function",
      server: "function",
    });
  });

  it("agent-computer/server embeds the server in a process of your own: listen, serve an exec, close", () => {
    const got = importByName(`
      import { mkdtempSync } from "node:fs";
      import { tmpdir } from "node:os";
      import path from "node:path";
      import { Computer } from "agent-computer";
      import { ComputerClient } from "agent-computer/client";
      import { createComputerServer } from "agent-computer/server";
      const workspace = mkdtempSync(path.join(tmpdir(), "ac-embed-"));
      const server = createComputerServer({
        workspace,
        port: 0,
        logger: false,
        computer: (observer) => new Computer({ workspace, observer }),
      });
      const url = await server.listen();
      const client = new ComputerClient({ url, token: server.token });
      const result = await (await client.exec("printf embedded; exit 4")).result();
      await server.close();
      console.log(JSON.stringify({ code: result.exitCode, out: new TextDecoder().decode(result.stdout) }));
    `);
    expect(got).toEqual({ code: 4, out: "embedded" });
  });

  it("ships the A@UI JSON Schemas under agent-computer/schemas/", () => {
    const ids = importByName(`
      import { createRequire } from "node:module";
      const require = createRequire(import.meta.url);
      const files = ["aui-command", "aui-ui-event", "aui-manifest"];
      console.log(JSON.stringify(files.map((f) =>
        typeof require(require.resolve("agent-computer/schemas/" + f + ".schema.json")))));
    `);
    expect(ids).toEqual(["object", "object", "object"]);
  });
});
