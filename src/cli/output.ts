// Writing a command's output to ours: byte-exact, with backpressure (a huge
// output into a slow pipe waits for 'drain' instead of buffering in memory),
// and an exit that lets stdout/stderr drain first (pipes are async in Node).

import type { ExecEvent } from "../wire/types.js";

/** Writes to a stream, waiting for 'drain' when it is full. */
export function writeOut(
  stream: NodeJS.WriteStream,
  chunk: Uint8Array | string,
): Promise<void> | undefined {
  if (stream.write(chunk)) return undefined;
  return new Promise((resolve) => {
    const done = () => {
      stream.off("drain", done);
      stream.off("error", done);
      resolve();
    };
    stream.once("drain", done);
    stream.once("error", done);
  });
}

/** Copies one output event to stdout or stderr (other events are ignored). */
export function writeEvent(ev: ExecEvent): Promise<void> | undefined {
  if (ev.name === "stdout") return writeOut(process.stdout, ev.value);
  if (ev.name === "stderr") return writeOut(process.stderr, ev.value);
  return undefined;
}

export function flushAndExit(code: number): void {
  let pending = 2;
  const done = () => {
    if (--pending === 0) process.exit(code);
  };
  process.stdout.write("", done);
  process.stderr.write("", done);
}
