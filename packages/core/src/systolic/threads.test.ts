/** The worker pool: products split over threads equal the single-thread products bit for bit. */
import { afterAll, describe, expect, it } from 'vitest';
import { lax, np, systolic, withBackend } from '../index';

function data(n: number, seed: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + seed) * 3);
}

describe('systolic threads', () => {
  const before = systolic.getNumThreads();
  afterAll(() => systolic.setNumThreads(before));

  it('threads on and off give identical results (row split, column split, transposed, bf16)', () => {
    const cases: Array<[number, number, number, boolean, 'float32' | 'bfloat16']> = [
      [300, 200, 40, false, 'float32'], // more row panels: split by rows
      [40, 200, 300, true, 'float32'], // more column panels: split by columns
      [257, 129, 263, true, 'bfloat16'],
    ];
    for (const [m, k, n, transposed, dtype] of cases) {
      const a = np.array(data(m * k, m), dtype).reshape(transposed ? [k, m] : [m, k]);
      const b = np.array(data(k * n, n), dtype).reshape([k, n]);
      const run = (): Float32Array => {
        systolic.backend.engine.f32.fill(NaN); // poison scratch memory: nothing may be inherited from an earlier run
        return withBackend('systolic', () => lax.dotGeneral(a, b, [[[transposed ? 0 : 1], [0]], [[], []]]).dataSync() as Float32Array);
      };
      systolic.setNumThreads(1);
      const one = run();
      expect(systolic.backend.engine.parallel).toBeNull();
      systolic.setNumThreads(3);
      const three = run();
      expect(systolic.backend.engine.parallel).not.toBeNull();
      expect(Array.from(three)).toEqual(Array.from(one));
    }
  });

  it('rejects a bad thread count, naming the argument', () => {
    expect(() => systolic.setNumThreads(0)).toThrow(/setNumThreads: n must be an integer in 1..256; got 0/);
  });
});
