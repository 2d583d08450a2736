/** Timing helpers shared by the benchmark scripts: median of repeated runs after a warm-up. */

/** The median of `xs` (the upper middle for an even count); `xs` is not changed. */
export function median(xs: readonly number[]): number {
  return [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
}

export function medianMs(fn: () => void, { warmup = 3, runs = 15 } = {}): number {
  for (let i = 0; i < warmup; i++) fn();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    fn();
    times.push(performance.now() - t0);
  }
  return median(times);
}
