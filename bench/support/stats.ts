// The statistics every benchmark reports, defined once so that "median" and
// "p99" mean the same thing in every table: the middle element of the sorted
// samples (the upper one for an even count) and the nearest-rank percentile.

/** The middle of the sorted samples (the upper middle for an even count). */
export function median(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[sorted.length >> 1] as number;
}

/** The sample at rank floor(p% × n) of the sorted samples (p in 0..100). */
export function percentile(samples: readonly number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}
