// Component benchmark for the server's streaming path without sockets:
// Computer -> run.events() -> pumpEvents (exec-wire frames from the server's
// frame encoder, one stream) -> a sink that only counts. It isolates what the server adds
// on top of the runtime (encoding, batching, cache, GC) from socket and client
// costs, which on 2 cores swamp end-to-end runs with noise.
//   npm run bench:build && node .bench-out/bench/server/pipeline.js [--size MiB] [--reps N]
// Modes per rep: "events" (for await over run.events(), no encoding),
// "pump" (the server's path to a counting sink, exec-wire text frames) and
// "binary" (the same with binary WebSocket records).

import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Computer, type ExecEvent } from "../../src/index.js";
import { FrameEncoders } from "../../src/server/streaming/encode-cache.js";
import { type ByteSink, pumpEvents } from "../../src/server/streaming/pump.js";
import { encodeBinaryRecord, encodeBinaryRecordHeader } from "../../src/wire/ws-binary.js";
import { numberOption } from "../support/args.js";
import { median } from "../support/stats.js";

const SIZE = numberOption("size", 512) * 1024 * 1024;
const REPS = numberOption("reps", 3);
const ws = path.join(tmpdir(), `ac-pipeline-${process.pid}`);
const computer = new Computer({ workspace: ws, heartbeatMs: 0 });
const encoders = new FrameEncoders();

type Mode = "events" | "pump" | "binary";

async function once(mode: Mode): Promise<number> {
  const t0 = performance.now();
  const run = await computer.exec(`head -c ${SIZE} /dev/zero`);
  let bytes = 0;
  if (mode === "events") {
    // Node's web streams are async iterable; the DOM typings do not say so.
    for await (const ev of run.events({
      heartbeats: false,
    }) as unknown as AsyncIterable<ExecEvent>) {
      if (ev.name === "stdout") bytes += ev.value.length;
    }
  } else {
    const sink: ByteSink = {
      closed: false,
      write: (_parts, n) => {
        bytes += n;
        return true;
      },
      drained: () => Promise.resolve(),
    };
    const encoder =
      mode === "binary"
        ? {
            // As the server's binary encoder (routes/ws.ts): header + the event's bytes.
            encode: (ev: ExecEvent) => {
              const header = encodeBinaryRecordHeader(ev, Buffer.allocUnsafe);
              return header ? [header, ev.value as Uint8Array] : encodeBinaryRecord(ev);
            },
            close() {},
          }
        : encoders.open("ndjson", run.id);
    await pumpEvents(run.events({ heartbeats: false }), sink, { encode: encoder.encode });
    encoder.close();
  }
  if (mode === "events" ? bytes !== SIZE : bytes < SIZE) {
    throw new Error(`${mode}: ${bytes} bytes for ${SIZE} of output`);
  }
  await computer.dispose(run.id);
  return SIZE / 1e6 / ((performance.now() - t0) / 1000);
}

const results: Record<Mode, number[]> = { events: [], pump: [], binary: [] };
for (let r = 0; r < REPS; r++)
  for (const m of ["events", "pump", "binary"] as const) results[m].push(await once(m));
await computer.close();
rmSync(ws, { recursive: true, force: true });
console.log(`| path (${SIZE / 1048576} MiB of /dev/zero, median of ${REPS}) | MB/s of output |`);
console.log("| --- | ---: |");
console.log(`| run.events(), no encoding | ${median(results.events).toFixed(0)} |`);
console.log(
  `| pumpEvents + exec-wire frames to a counting sink | ${median(results.pump).toFixed(0)} |`,
);
console.log(
  `| pumpEvents + binary WebSocket records to a counting sink | ${median(results.binary).toFixed(0)} |`,
);
