// One process-wide thread knob: core's setNumThreads drives the systolic GEMM pool (and
// xla-lite's kernel pool, tested there); bad values are errors naming the value.
import { afterEach, describe, expect, test } from 'vitest';
import { getNumThreads, setNumThreads, systolic } from './index';
import { hardwareThreads } from './threads';

describe('setNumThreads / getNumThreads', () => {
  afterEach(() => setNumThreads(null));

  test('defaults to the machine, set and reset for the whole process', () => {
    expect(getNumThreads()).toBe(hardwareThreads());
    setNumThreads(3);
    expect(getNumThreads()).toBe(3);
    expect(systolic.getNumThreads()).toBe(3); // the systolic namespace reads the same knob
    systolic.setNumThreads(2);
    expect(getNumThreads()).toBe(2);
    setNumThreads(null);
    expect(getNumThreads()).toBe(hardwareThreads());
  });

  test('bad values are errors naming the value, and leave the setting alone', () => {
    setNumThreads(2);
    expect(() => setNumThreads(0)).toThrow(/setNumThreads: n must be an integer in 1\.\.256; got 0 \(null restores the default/);
    expect(() => setNumThreads(1.5)).toThrow(/got 1\.5/);
    expect(() => setNumThreads(257)).toThrow(/got 257/);
    expect(() => setNumThreads(Number.NaN)).toThrow(/got NaN/);
    expect(() => setNumThreads('4' as never)).toThrow(/got "4" \(string\)/);
    expect(() => setNumThreads(undefined as never)).toThrow(/got undefined \(undefined\)/);
    expect(getNumThreads()).toBe(2);
  });
});
