/**
 * The example end to end on a tiny model: the loss falls, and resuming from the checkpoint
 * replays the uninterrupted run's losses exactly (same data, same parameters, same numerics).
 */
import { describe, expect, it } from 'vitest';
import { train } from './train';

describe('train-transformer example', () => {
  it('trains, checkpoints, and resumes exactly', async () => {
    const lines: string[] = [];
    const r = await train({
      steps: 8,
      checkpointEvery: 4,
      batchSize: 2,
      model: { vocab: 256, dModel: 16, heads: 2, layers: 1, mlp: 32, context: 16 },
      peakLr: 1e-2,
      log: (l) => lines.push(l),
    });
    expect(r.losses).toHaveLength(8);
    expect(r.losses.every(Number.isFinite)).toBe(true);
    expect(r.losses[0]).toBeGreaterThan(5); // about ln(256) at initialisation
    expect(Math.min(...r.losses.slice(-3))).toBeLessThan(r.losses[0] - 0.3);
    expect(r.resumedFrom).toBe(4);
    expect(r.resumeMaxDiff).toBe(0);
    expect(lines.some((l) => l.startsWith('sample: '))).toBe(true);
  });

  it('rejects bad options with a clear error', async () => {
    await expect(train({ steps: 1, log: () => {} })).rejects.toThrow('train: steps must be an integer >= 2; got 1');
  });
});
