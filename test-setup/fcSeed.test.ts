/** The run's fast-check seed: FC_SEED wins, fixed under CI, random locally, installed in every worker. */
import fc from 'fast-check';
import { describe, expect, inject, it } from 'vitest';
import { CI_SEED, chooseSeed } from './fcSeed';

describe('fast-check seed', () => {
  it('FC_SEED replays a seed, CI fixes it, locally it is random', () => {
    expect(chooseSeed({ FC_SEED: '-1485789631', CI: 'true' })).toEqual({ seed: -1485789631, why: 'from FC_SEED' });
    expect(chooseSeed({ FC_SEED: '42' }).seed).toBe(42);
    expect(chooseSeed({ CI: 'true' })).toEqual({ seed: CI_SEED, why: 'fixed under CI' });
    const local = chooseSeed({});
    expect(Number.isInteger(local.seed)).toBe(true);
    expect(local.why).toMatch(/^random/);
    expect(() => chooseSeed({ FC_SEED: 'abc' })).toThrow('FC_SEED must be an integer in [-2^31, 2^32); got "abc"');
  });

  it('every worker runs fast-check with the seed the run chose', () => {
    expect(fc.readConfigureGlobal().seed).toBe(inject('fcSeed'));
    if (process.env.FC_SEED) expect(inject('fcSeed')).toBe(Number(process.env.FC_SEED) | 0);
    else if (process.env.CI === 'true') expect(inject('fcSeed')).toBe(CI_SEED);
  });
});
