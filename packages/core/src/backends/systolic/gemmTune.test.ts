/**
 * The kernel choice's arithmetic, with timed runners replaced by known times: the gain is 5 x 8's
 * multiply-adds per ms over 4 x 8's (not the inverse, and not the times' plain ratio: the two
 * runs do different amounts of work), from the best run of each, and the choice flips at
 * MIN_GAIN. (gemmShape.test.ts checks the measured choice end to end; it cannot tell a swapped
 * pair of times apart, since it checks the choice with the same formula.)
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { GEMM_SHAPE_4X8, GEMM_SHAPE_5X8 } from './gemmModule';
import { MIN_GAIN, gainOf, shapeForGain, work } from './gemmTune';

/** A runner that returns `times` in turn (cycling) and records its calls in `log` as `tag`. */
const runner = (times: number[], log: string[], tag: string) => {
  let i = 0;
  return () => {
    log.push(tag);
    return times[i++ % times.length]!;
  };
};

describe('gemmTune: the gain and the choice', () => {
  it('is the rate of 5 x 8 over 4 x 8 in multiply-adds per ms: a 5 x 8 twice as fast per run gains 2 x its larger work', () => {
    // 130 rows of 5 x 8 panels against 128 rows of 4 x 8 ones, same K block and column panels.
    expect(work(GEMM_SHAPE_5X8) / work(GEMM_SHAPE_4X8)).toBe(130 / 128);
    const log: string[] = [];
    expect(gainOf(runner([2], log, '4'), runner([1], log, '5'), 1, 1)).toBe((2 * 130) / 128);
    // the other way round: 4 x 8 twice as fast
    expect(gainOf(runner([1], log, '4'), runner([2], log, '5'), 1, 1)).toBe(130 / 128 / 2);
  });

  it('takes the best run of each kernel, alternating rounds of runs', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0.01, max: 100, noNaN: true }), { minLength: 1, maxLength: 6 }),
        fc.array(fc.double({ min: 0.01, max: 100, noNaN: true }), { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 5 }),
        (t4s, t5s, rounds, runs) => {
          const log: string[] = [];
          const g = gainOf(runner(t4s, log, '4'), runner(t5s, log, '5'), rounds, runs);
          const seen4 = Array.from({ length: rounds * runs }, (_, i) => t4s[i % t4s.length]!);
          const seen5 = Array.from({ length: rounds * runs }, (_, i) => t5s[i % t5s.length]!);
          const want = work(GEMM_SHAPE_5X8) / Math.min(...seen5) / (work(GEMM_SHAPE_4X8) / Math.min(...seen4));
          expect(g).toBeCloseTo(want, 12);
          expect(log.join('')).toBe(('4'.repeat(runs) + '5'.repeat(runs)).repeat(rounds));
        },
      ),
    );
  });

  it('chooses 5 x 8 from MIN_GAIN on; a run under the timer resolution stays finite; bad counts are refused by name', () => {
    expect(shapeForGain(MIN_GAIN)).toBe(GEMM_SHAPE_5X8);
    expect(shapeForGain(MIN_GAIN - 1e-9)).toBe(GEMM_SHAPE_4X8);
    expect(shapeForGain(1)).toBe(GEMM_SHAPE_4X8);
    expect(shapeForGain(2)).toBe(GEMM_SHAPE_5X8);
    const log: string[] = [];
    const g = gainOf(runner([1], log, '4'), runner([0], log, '5'), 1, 1);
    expect(Number.isFinite(g) && g > 1).toBe(true);
    expect(() => gainOf(runner([1], log, '4'), runner([1], log, '5'), 0, 3)).toThrow(/gemmTune\.gainOf: rounds and runs must be integers >= 1; got rounds 0, runs 3/);
    expect(() => gainOf(runner([1], log, '4'), runner([1], log, '5'), 2, 1.5)).toThrow(/got rounds 2, runs 1\.5/);
  });
});
