// Retention policies keep exactly the documented set (see retention.ts), both as a pure
// function and on disk through the manager.
import * as fs from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { tmpDir } from '../test/helpers';
import { CheckpointManager, LOCK_FILE, type Metrics, args, stepsToKeep } from './index';

const stepsArb = fc.uniqueArray(fc.integer({ min: 0, max: 60 }), { minLength: 1, maxLength: 12 }).map((s) => s.sort((a, b) => a - b));

describe('stepsToKeep', () => {
  it('keeps everything without maxToKeep', () => {
    fc.assert(fc.property(stepsArb, (steps) => {
      expect(stepsToKeep(steps, new Map(), {})).toEqual(steps);
    }));
  });

  it('keeps exactly the newest maxToKeep steps plus multiples of keepPeriod', () => {
    fc.assert(
      fc.property(stepsArb, fc.integer({ min: 1, max: 5 }), fc.option(fc.integer({ min: 1, max: 10 }), { nil: undefined }), (steps, k, period) => {
        const kept = stepsToKeep(steps, new Map(), { maxToKeep: k, keepPeriod: period });
        const expected = steps.filter((s, i) => i >= steps.length - k || (period !== undefined && s % period === 0));
        expect(kept).toEqual(expected);
      }),
    );
  });

  it('with bestFn keeps the newest step, the maxToKeep best, and (optionally) steps without metrics', () => {
    fc.assert(
      fc.property(
        stepsArb,
        fc.integer({ min: 1, max: 4 }),
        fc.constantFrom<'max' | 'min'>('max', 'min'),
        fc.boolean(),
        fc.array(fc.option(fc.integer({ min: 0, max: 5 }), { nil: undefined }), { minLength: 12, maxLength: 12 }),
        (steps, k, mode, keepWithout, scores) => {
          const metrics = new Map<number, Metrics | undefined>(steps.map((s, i) => [s, scores[i] === undefined ? undefined : { acc: scores[i] }]));
          const kept = new Set(stepsToKeep(steps, metrics, { maxToKeep: k, bestFn: (m) => m.acc as number, bestMode: mode, keepCheckpointsWithoutMetrics: keepWithout }));
          const newest = steps[steps.length - 1];
          expect(kept.has(newest)).toBe(true);
          const better = (a: number, b: number) => (mode === 'max' ? a > b : a < b);
          const scored = steps.filter((s) => metrics.get(s) !== undefined);
          // Exactly min(k, #scored) scored steps are kept for their score; newest may add one more.
          const keptScored = scored.filter((s) => kept.has(s) && s !== newest);
          expect(keptScored.length).toBeLessThanOrEqual(k);
          const top = [...scored].sort((a, b) => (better(metrics.get(a)!.acc as number, metrics.get(b)!.acc as number) ? -1 : better(metrics.get(b)!.acc as number, metrics.get(a)!.acc as number) ? 1 : b - a)).slice(0, k);
          for (const s of steps) {
            const m = metrics.get(s);
            const want = s === newest || (m === undefined ? keepWithout : top.includes(s));
            expect(kept.has(s), `step ${s}`).toBe(want);
          }
        },
      ),
    );
  });
});

describe('retention on disk', () => {
  it('the manager keeps exactly what the policy says after each save, and never the newest', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 3 }),
        fc.option(fc.integer({ min: 2, max: 4 }), { nil: undefined }),
        fc.boolean(),
        fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 1, maxLength: 7 }),
        async (k, period, useBest, scores) => {
          const dir = tmpDir();
          const opts = { maxToKeep: k, keepPeriod: period, bestFn: useBest ? (m: Metrics) => m.acc as number : undefined, enableAsyncCheckpointing: false, fsync: false };
          const mgr = new CheckpointManager(dir, opts);
          let model = new Map<number, Metrics | undefined>();
          for (let i = 0; i < scores.length; i++) {
            const m = i % 3 === 2 ? undefined : { acc: scores[i] };
            await mgr.save(i + 1, args.JsonSave({ i }), { metrics: m });
            model.set(i + 1, m);
            const keep = stepsToKeep([...model.keys()], model, opts);
            model = new Map(keep.map((s) => [s, model.get(s)]));
            expect(mgr.allSteps()).toEqual(keep);
            expect(fs.readdirSync(dir).filter((n) => n !== LOCK_FILE).map(Number).sort((a, b) => a - b)).toEqual(keep);
            expect(keep).toContain(i + 1);
          }
          await mgr.close();
          expect(new CheckpointManager(dir, opts).allSteps()).toEqual([...model.keys()]);
        },
      ),
      { numRuns: 15 },
    );
  });

  it('bestStep follows bestFn and bestMode', async () => {
    const mgr = new CheckpointManager(tmpDir(), { bestFn: (m) => m.loss as number, bestMode: 'min', enableAsyncCheckpointing: false });
    for (const [s, loss] of [[1, 3], [2, 1], [3, 2]]) await mgr.save(s, args.JsonSave({}), { metrics: { loss } });
    expect(mgr.bestStep()).toBe(2);
    await mgr.close();
  });
});
