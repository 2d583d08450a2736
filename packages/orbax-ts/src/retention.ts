/**
 * Which steps a CheckpointManager keeps after a save: a pure function of the steps, their
 * metrics and the options, so that the policy can be stated and property-tested on its own.
 *
 * The kept set is the union of:
 *  1. the newest step (never deleted, whatever its metrics);
 *  2. every step divisible by `keepPeriod` (when set);
 *  3. without `bestFn`: the `maxToKeep` newest steps;
 *     with `bestFn`: the `maxToKeep` best steps among those with metrics (by `bestFn(metrics)`,
 *     higher is better for `bestMode: 'max'`, lower for `'min'`; ties go to the newer step),
 *     plus every step without metrics when `keepCheckpointsWithoutMetrics` (default true).
 * With `maxToKeep` unset every step is kept.
 */

export type Metrics = Record<string, unknown>;

export interface RetentionOptions {
  maxToKeep?: number;
  keepPeriod?: number;
  bestFn?: (metrics: Metrics) => number;
  bestMode?: 'max' | 'min';
  keepCheckpointsWithoutMetrics?: boolean;
}

/** The steps to keep, ascending. `metrics.get(step)` is undefined for a step saved without metrics. */
export function stepsToKeep(steps: readonly number[], metrics: ReadonlyMap<number, Metrics | undefined>, opts: RetentionOptions): number[] {
  const sorted = [...new Set(steps)].sort((a, b) => a - b);
  if (opts.maxToKeep === undefined || sorted.length === 0) return sorted;
  const keep = new Set<number>([sorted[sorted.length - 1]]);
  if (opts.keepPeriod !== undefined) for (const s of sorted) if (s % opts.keepPeriod === 0) keep.add(s);
  if (!opts.bestFn) {
    for (const s of sorted.slice(Math.max(0, sorted.length - opts.maxToKeep))) keep.add(s);
  } else {
    const withM: { step: number; score: number }[] = [];
    for (const s of sorted) {
      const m = metrics.get(s);
      if (m === undefined) {
        if (opts.keepCheckpointsWithoutMetrics ?? true) keep.add(s);
      } else withM.push({ step: s, score: opts.bestFn(m) });
    }
    const sign = (opts.bestMode ?? 'max') === 'max' ? -1 : 1;
    withM.sort((a, b) => sign * (a.score - b.score) || b.step - a.step);
    for (const { step } of withM.slice(0, opts.maxToKeep)) keep.add(step);
  }
  return sorted.filter((s) => keep.has(s));
}
