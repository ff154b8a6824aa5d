// The server driven by a fake ComputerApi (the server knows nothing about
// child_process: it serves whatever ComputerApi it is given). Used for what a
// real runtime cannot be made to do on demand: fail in the middle of a
// stream. A mid-stream failure must end the exec-wire stream with an error
// frame, the SSE stream with `event: error`, and reach a ComputerClient
// consumer as that error code (not retried, not silent).

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ComputerClient } from "../src/client/client.js";
import type { ComputerApi, ExecHandle, ExecRecord } from "../src/runtime/types.js";
import { type ComputerServer, createComputerServer } from "../src/server/app.js";
import { ComputerError } from "../src/wire/errors.js";
import type { ExecEvent } from "../src/wire/types.js";

const record: ExecRecord = {
  id: "f1",
  command: "fake",
  cwd: "",
  encoding: "utf8",
  node: "local",
  state: "running",
  startedAt: Date.now(),
  lastSeq: 2,
  earliestSeq: 1,
};

function failingHandle(): ExecHandle {
  const handle: ExecHandle = {
    id: "f1",
    subscribe: async () => handle.events(),
    events(): ReadableStream<ExecEvent> {
      let n = 0;
      return new ReadableStream<ExecEvent>({
        pull(c) {
          n++;
          if (n <= 2) c.enqueue({ id: "f1", seq: n, name: "stdout", value: `chunk-${n}\n` });
          else c.error(new ComputerError("EINVAL", "fake runtime failure"));
        },
      });
    },
    result: () => Promise.reject(new ComputerError("ENOENT", "n/a")),
    info: async () => record,
    kill: async () => {},
    write: async () => {},
    end: async () => {},
    resize: async () => {},
    screen: () => Promise.reject(new ComputerError("EINVAL", "n/a")),
  };
  return handle;
}

const fake: ComputerApi = {
  exec: async () => failingHandle(),
  get: async (id) => {
    if (id !== "f1") throw new ComputerError("ENOENT", `no such execution: ${id}`);
    return failingHandle();
  },
  list: async () => [record],
  kill: async () => {},
  dispose: async () => {},
  close: async () => {},
};

let server: ComputerServer;
let dir: string;
let url: string;
const headers = { authorization: "Bearer fake-test-token-0123" };

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "ac-fake-"));
  server = createComputerServer({
    computer: fake,
    workspace: dir,
    port: 0,
    token: "fake-test-token-0123",
    logger: false,
  });
  url = await server.listen();
});
afterAll(async () => {
  await server.close();
  await rm(dir, { recursive: true, force: true });
});

it("exec-wire: events, then an error frame, then the end", async () => {
  const text = await (await fetch(`${url}/v1/execs/f1/events`, { headers })).text();
  const lines = text
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  expect(lines.map((l) => l.seq ?? l.name)).toEqual([1, 2, "error"]);
  expect(lines[2]).toEqual({
    id: "f1",
    name: "error",
    code: "EINVAL",
    message: "fake runtime failure",
  });
});

it("SSE: events, then event: error with the frame as data", async () => {
  const text = await (
    await fetch(`${url}/v1/execs/f1/events`, {
      headers: { ...headers, accept: "text/event-stream" },
    })
  ).text();
  expect(text).toContain("id: 2\nevent: stdout\n");
  expect(text).toMatch(/event: error\ndata: \{"id":"f1","name":"error","code":"EINVAL",/);
  expect(text).not.toContain("[DONE]");
});

it("ComputerClient delivers the events, then fails with the code", async () => {
  const client = new ComputerClient({ url, token: "fake-test-token-0123" });
  const reader = (await client.get("f1")).events().getReader();
  expect((await reader.read()).value).toMatchObject({ seq: 1 });
  expect((await reader.read()).value).toMatchObject({ seq: 2 });
  await expect(reader.read()).rejects.toMatchObject({ code: "EINVAL" });
});

it("fuzz: arbitrary JSON and bytes as bodies never produce a 5xx", async () => {
  const fc = await import("fast-check");
  const body = fc.oneof(
    fc.jsonValue().map((v) => JSON.stringify(v)),
    fc
      .record(
        {
          command: fc.oneof(fc.string(), fc.integer(), fc.constant(null)),
          argv: fc.array(fc.oneof(fc.string(), fc.integer())),
          env: fc.dictionary(fc.string(), fc.oneof(fc.string(), fc.integer())),
          stdin: fc.oneof(
            fc.string(),
            fc.record({ b64: fc.string() }),
            fc.record({ pipe: fc.boolean() }),
          ),
          timeoutMs: fc.oneof(fc.integer(), fc.double()),
          encoding: fc.string(),
          id: fc.string(),
          cwd: fc.string(),
        },
        { requiredKeys: [] },
      )
      .map((v) => JSON.stringify(v)),
    fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString("latin1")),
  );
  await fc.assert(
    fc.asyncProperty(
      body,
      fc.constantFrom("/v1/execs", "/v1/execs/f1/kill"),
      async (text, route) => {
        const r = await fetch(`${url}${route}`, {
          method: "POST",
          headers: { ...headers, "content-type": "application/json" },
          body: text,
        });
        await r.arrayBuffer();
        expect(r.status, `${route} ${text}`).toBeLessThan(500);
      },
    ),
    { numRuns: 150 },
  );
});
