/** Timing helpers shared by the benchmark scripts: median of repeated runs after a warm-up, one call's CPU and wall time, a header's load and time. */
import { loadavg } from 'node:os';

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

/** `load a b c; <ISO time>`, for a bench's header line. */
export const loadAndTime = (): string => `load ${loadavg().map((x) => x.toFixed(1)).join(' ')}; ${new Date().toISOString()}`;

/** Wall ms and process CPU ms (all threads) of one call of `fn`. */
export function cpuWall(fn: () => void): { wall: number; cpu: number } {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  fn();
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { wall, cpu: (c.user + c.system) / 1000 };
}
