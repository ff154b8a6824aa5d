// Input plumbing shared by the wire benchmarks: cut bytes into chunks (each its
// own buffer, as network reads deliver them) and feed them as a ReadableStream
// that hands out one chunk per pull.

export function chunk(bytes: Uint8Array, size: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let i = 0; i < bytes.length; i += size) out.push(bytes.slice(i, i + size));
  return out;
}

export function streamOf(chunks: readonly Uint8Array[]): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (i < chunks.length) c.enqueue(chunks[i++] as Uint8Array);
      else c.close();
    },
  });
}
