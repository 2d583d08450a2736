/** Error messages describe values by kind, shape and dtype (describe.ts), and bad values into integer dtypes are errors. */
import { describe, expect, it } from 'vitest';
import { np, valueAndGrad } from './index';
import { describeValue, showValue } from './internal';

describe('describeValue / showValue', () => {
  it('names arrays by dtype and shape, tracers as traced, and never serialises internals', () => {
    expect(describeValue(np.zeros([2, 3]))).toBe('Array float32[2,3]');
    expect(describeValue(1n)).toBe('bigint 1n');
    expect(describeValue(new Float32Array(5))).toBe('Float32Array(5)');
    expect(describeValue([1, 'a', null])).toBe('list of 3: [number 1, string "a", null]');
    expect(describeValue(new Map([['k', 1]]))).toBe('Map of 1 {"k"}');
    expect(describeValue({ b: 1, a: 2 })).toBe('object {b, a}');
    expect(showValue('x')).toBe('"x"');
    expect(showValue([1, -0, 2])).toBe('[1,-0,2]');
    expect(showValue([[0, 1], [2, 3]])).toBe('[[0,1],[2,3]]');
    expect(showValue({ a: 1 })).toBe('object {a}');
  });

  it('is bounded and survives cycles', () => {
    const c: Record<string, unknown> = { a: 1 };
    c.self = c;
    expect(describeValue(c)).toBe('object {a, self}');
    const l: unknown[] = [1];
    l.push(l);
    expect(describeValue(l)).toBe('list of 2: [number 1, a cycle back to an enclosing value]');
    const big = Array.from({ length: 1000 }, (_, i) => ({ [`key${i}`]: i }));
    expect(describeValue(big).length).toBeLessThanOrEqual(160);
    expect(describeValue('x'.repeat(10_000)).length).toBeLessThanOrEqual(160);
  });
});

describe('error messages name values by kind, shape and dtype', () => {
  it('valueAndGrad returning [loss, aux] without hasAux says so (not circular-JSON)', () => {
    const f = (x: ReturnType<typeof np.ones>) => [np.sum(x), x];
    expect(() => valueAndGrad(f)(np.ones([3]))).toThrow(
      'grad: the function must return a scalar Array; it returned list of 2: [traced Array float32[] (traced by jvp), traced Array float32[3] (traced by jvp)] (to return [value, aux], pass { hasAux: true })',
    );
  });

  it('np.array of a BigInt names it', () => {
    expect(() => np.array([1n] as unknown as number[])).toThrow('array: element at [0] is bigint 1n; expected a number or boolean');
  });

  it('np.array of large Arrays gives a short message', () => {
    const a = np.zeros([1_000_000]);
    let msg = '';
    try {
      np.array([a, a] as unknown as number[]);
    } catch (e) {
      msg = (e as Error).message;
    }
    expect(msg).toBe('array: element at [0] is Array float32[1000000]; expected a number or boolean (combine Arrays with np.stack or np.concatenate)');
  });
});

describe('non-finite values into integer dtypes are errors, as out-of-range values are', () => {
  it.each([
    [[NaN, 1], 'int32', 'array: value NaN (element 0) cannot be stored in int32'],
    [[Infinity], 'int8', 'array: value Infinity cannot be stored in int8'],
    [[1, -Infinity], 'uint8', 'array: value -Infinity (element 1) cannot be stored in uint8'],
    [[300], 'int8', 'array: value 300 does not fit in int8'],
  ] as const)('np.array(%j, %s)', (values, dtype, msg) => {
    expect(() => np.array(values as unknown as number[], dtype)).toThrow(msg);
  });

  it('also for np.full, np.asarray of a typed array, and a scalar', () => {
    expect(() => np.full([2], NaN, 'int32')).toThrow(/full: value NaN cannot be stored in int32: integer dtypes have no NaN or infinity/);
    expect(() => np.asarray(new Float32Array([1, NaN]), 'int8')).toThrow(/value NaN \(element 1\) cannot be stored in int8/);
    expect(() => np.array(Infinity, 'uint32')).toThrow(/value Infinity cannot be stored in uint32/);
    expect(np.array([NaN, 1.5], 'float32').toArray()).toEqual([NaN, 1.5]);
    expect(np.array([2.7, -1.2], 'int32').toArray()).toEqual([2, -1]);
  });
});
