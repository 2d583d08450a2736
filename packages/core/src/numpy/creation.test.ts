/** Array creation: arange / linspace / eye / identity / tri / full / zeros / ones / *Like / array / asarray. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { np } from '../index';

describe('arange', () => {
  it('matches start + i * step computed in float64 and rounded once', () => {
    fc.assert(
      fc.property(fc.double({ min: -50, max: 50, noNaN: true }), fc.double({ min: -50, max: 50, noNaN: true }), fc.double({ min: 0.05, max: 7, noNaN: true }), fc.boolean(), (start, stop, mag, neg) => {
        const step = neg ? -mag : mag;
        const r = np.arange(start, stop, step);
        const n = Math.max(0, Math.ceil((stop - start) / step));
        expect(r.shape).toEqual([n]);
        expect(r.dtype).toBe('float32');
        const v = r.dataSync();
        for (let i = 0; i < n; i++) expect(v[i]).toBe(Math.fround(start + i * step));
      }),
      { numRuns: 50 },
    );
  });

  it('integer arguments give int32; forms arange(stop), (start, stop), (start, stop, step)', () => {
    const a = np.arange(5);
    expect([a.dtype, a.weakType, a.toArray()]).toEqual(['int32', false, [0, 1, 2, 3, 4]]);
    expect(np.arange(2, 5).toArray()).toEqual([2, 3, 4]);
    expect(np.arange(10, 0, -3).toArray()).toEqual([10, 7, 4, 1]);
    expect(np.arange(0, 1, 0.25).toArray()).toEqual([0, 0.25, 0.5, 0.75]);
    expect(np.arange(3, undefined, 1, 'bfloat16').toArray()).toEqual([0, 1, 2]);
    expect(np.arange(5, 2).toArray()).toEqual([]);
    expect(() => np.arange(0, 5, 0)).toThrow('arange: step must not be 0');
    expect(() => np.arange(0, Infinity)).toThrow('arange: stop must be finite; got Infinity');
  });
});

describe('linspace', () => {
  it('hits both ends, spaces evenly, honours endpoint and num', () => {
    fc.assert(
      fc.property(fc.double({ min: -100, max: 100, noNaN: true }), fc.double({ min: -100, max: 100, noNaN: true }), fc.integer({ min: 0, max: 20 }), fc.boolean(), (a, b, num, endpoint) => {
        const r = np.linspace(a, b, num, { endpoint });
        expect(r.shape).toEqual([num]);
        const v = r.dataSync();
        const div = endpoint ? num - 1 : num;
        for (let i = 0; i < num; i++) {
          const want = endpoint && i === num - 1 && num > 1 ? b : a + (div > 0 ? (i * (b - a)) / div : 0);
          expect(Math.abs(v[i] - want)).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(want)));
        }
        if (num > 0) expect(v[0] === Math.fround(a)).toBe(true);
        if (num > 1 && endpoint) expect(v[num - 1] === Math.fround(b)).toBe(true);
      }),
      { numRuns: 50 },
    );
  });

  it('integer dtypes floor, as jnp.linspace does', () => {
    expect(np.linspace(-1, 1, 5, { dtype: 'int32' }).toArray()).toEqual([-1, -1, 0, 0, 1]);
    expect(() => np.linspace(0, 1, -1)).toThrow('linspace: num must be a non-negative integer; got -1');
  });
});

describe('eye / identity / tri / full / zeros / ones / *Like', () => {
  it('eye with offsets and non-square shapes', () => {
    expect(np.eye(3).toArray()).toEqual([[1, 0, 0], [0, 1, 0], [0, 0, 1]]);
    expect(np.eye(2, 3, 1).toArray()).toEqual([[0, 1, 0], [0, 0, 1]]);
    expect(np.eye(3, 2, -1, 'int8').toArray()).toEqual([[0, 0], [1, 0], [0, 1]]);
    expect(np.identity(2, 'bool').toArray()).toEqual([[true, false], [false, true]]);
  });

  it('tri: ones at and below the k-th diagonal', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 5 }), fc.integer({ min: -3, max: 3 }), (n, m, k) => {
        const r = np.tri(n, m, k).toArray() as number[][];
        for (let i = 0; i < n; i++) for (let j = 0; j < m; j++) expect(r[i][j]).toBe(j <= i + k ? 1 : 0);
      }),
      { numRuns: 30 },
    );
  });

  it('full / zeros / ones / *Like shapes, dtypes and values', () => {
    expect(np.full([2, 2], 7, 'uint8').toArray()).toEqual([[7, 7], [7, 7]]);
    expect(np.full(3, true).toArray()).toEqual([true, true, true]);
    expect(np.full([2], 1.5).dtype).toBe('float32');
    expect(np.zeros([2, 0]).shape).toEqual([2, 0]);
    expect(np.ones([2], 'bfloat16').toArray()).toEqual([1, 1]);
    const x = np.array([[1, 2, 3]], 'int8');
    expect([np.zerosLike(x).dtype, np.onesLike(x).toArray()]).toEqual(['int8', [[1, 1, 1]]]);
    expect(np.fullLike(x, 2.5, 'float16').toArray()).toEqual([[2.5, 2.5, 2.5]]);
    expect(np.zerosLike(x, undefined, [4]).shape).toEqual([4]);
    expect(() => np.zeros([2, -1])).toThrow('zeros: shape must be a list of non-negative integers; got [2,-1]');
    expect(() => np.zeros([2], 'float64' as never)).toThrow("zeros: dtype must be one of bool, int8, uint8, int32, uint32, bfloat16, float16, float32; got \"float64\"");
    expect(() => np.full([2], np.zeros([2]))).toThrow('full: fill_value must be a scalar; got shape [2]');
  });

  it('array copies; asarray does not', () => {
    const x = np.array([1, 2]);
    expect(np.asarray(x)).toBe(x);
    expect(np.array(x)).not.toBe(x);
    expect(np.array(x).toArray()).toEqual([1, 2]);
    expect(np.asarray(x, 'float32').dtype).toBe('float32');
  });
});

describe('nested and typed-array input', () => {
  it('infers dtypes: ints -> int32, any float -> float32, all booleans -> bool, empty -> float32', () => {
    expect(np.array([[1, 2], [3, 4]]).dtype).toBe('int32');
    expect(np.array([1, 2.5]).dtype).toBe('float32');
    expect(np.array([[true], [false]]).dtype).toBe('bool');
    expect(np.array([]).dtype).toBe('float32');
    expect(np.array(new Uint8Array([1, 2])).dtype).toBe('uint8');
    expect(np.array(new Float64Array([0.1])).dataSync()[0]).toBe(Math.fround(0.1));
    expect(np.array(new Int16Array([-3])).dtype).toBe('int32');
  });

  it('ragged nesting and non-numbers are errors naming the position', () => {
    expect(() => np.array([[1, 2], [3]])).toThrow('array: ragged nested input: element at [1] has length 1, expected length 2 (shape [2,2])');
    expect(() => np.array([[1, 2], 3] as never)).toThrow('array: ragged nested input: element at [1] has no length, expected length 2 (shape [2,2])');
    expect(() => np.array([1, [2]] as never)).toThrow('array: element at [1] is a list (ragged nesting); expected a number or boolean');
    expect(() => np.array(['a'] as never)).toThrow('array: element at [0] is string "a"; expected a number or boolean');
    expect(() => np.array(null as never)).toThrow('array: cannot make an array from null');
    expect(() => np.array([1.5, 2], 'int8')).not.toThrow();
    expect(np.array([1.7, -1.7], 'int8').toArray()).toEqual([1, -1]);
  });
});
