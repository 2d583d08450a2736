/** Timing helpers shared by the benchmark scripts: median of repeated runs after a warm-up. */
export function medianMs(fn: () => void, { warmup = 3, runs = 15 } = {}): number {
  for (let i = 0; i < warmup; i++) fn();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    fn();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}
