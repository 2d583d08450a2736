/** Positional axis arguments, as jnp takes them, and clear errors for arguments a function does not understand. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nn, np } from '../index';

const x = np.array([[1, 5, 3], [4, 2, 6]], 'float32');
const same = (a: { toArray(): unknown }, b: { toArray(): unknown }) => expect(a.toArray()).toEqual(b.toArray());

describe('positional axis', () => {
  it('reductions: np.f(x, axis) equals np.f(x, { axis })', () => {
    for (const f of [np.sum, np.prod, np.mean, np.max, np.min, np.var, np.std, np.any, np.all, np.amax, np.amin] as const) {
      for (const axis of [0, 1, -1, [0, 1], null] as const) same(f(x, axis), f(x, { axis }));
    }
    expect(np.sum(x, 0).toArray()).toEqual([5, 7, 9]);
    expect(np.mean(x, 1).toArray()).toEqual([3, 4]);
    expect(np.max(x, -1).toArray()).toEqual([5, 6]);
    expect(np.sum(x, 0, { keepdims: true }).shape).toEqual([1, 3]);
    expect(np.sum(x, 1, { dtype: 'int32' }).toArray()).toEqual([9, 12]);
    expect(np.var(x, 1, { ddof: 1 }).toArray()).toEqual([4, 4]);
  });

  it('argmax / argmin / cumsum / cumprod / sort / argsort take one positional axis', () => {
    expect(np.argmax(x, 0).toArray()).toEqual([1, 0, 1]);
    expect(np.argmin(x, 1).toArray()).toEqual([0, 1]);
    expect(np.argmax(x, 1, { keepdims: true }).shape).toEqual([2, 1]);
    expect(np.cumsum(x, 0).toArray()).toEqual([[1, 5, 3], [5, 7, 9]]);
    expect(np.cumprod(x, 1).toArray()).toEqual([[1, 5, 15], [4, 8, 48]]);
    expect(np.sort(x, 0).toArray()).toEqual([[1, 2, 3], [4, 5, 6]]);
    expect(np.argsort(x, 0).toArray()).toEqual([[0, 1, 0], [1, 0, 1]]);
    expect(np.sort(x, 1, { descending: true }).toArray()).toEqual([[5, 3, 1], [6, 4, 2]]);
    expect(np.sort(x, null).toArray()).toEqual([1, 2, 3, 4, 5, 6]);
    expect(np.take(x, [2, 0], 1).toArray()).toEqual([[3, 1], [6, 4]]);
    expect(np.take(x, [7], 0, { mode: 'clip' }).toArray()).toEqual([[4, 2, 6]]);
    expect(np.take(x, [1]).toArray()).toEqual([5]);
  });

  it('jax.nn: softmax, log_softmax, logsumexp, standardize take a positional axis (number or list)', () => {
    for (const f of [nn.softmax, nn.logSoftmax, nn.logsumexp, nn.standardize] as const) {
      for (const axis of [0, 1, -1, [0, 1]] as const) same(f(x, axis), f(x, { axis }));
    }
    const s0 = nn.softmax(x, 0).toArray() as number[][];
    expect(s0[0][0] + s0[1][0]).toBeCloseTo(1, 6);
    expect(nn.softmax(x, 0).toArray()).not.toEqual(nn.softmax(x).toArray());
    expect(nn.standardize(x, 0).toArray()).not.toEqual(nn.standardize(x).toArray());
    expect(nn.logsumexp(x, 0, { keepdims: true }).shape).toEqual([1, 3]);
    expect(nn.standardize(x, 0, { epsilon: 0 }).toArray()).toEqual([[-1, 1, -1], [1, -1, 1]]);
  });

  it('Array methods forward the same arguments', () => {
    same(x.sum(0), np.sum(x, 0));
    same(x.mean(1), np.mean(x, 1));
    same(x.max(-1), np.max(x, -1));
    same(x.min(0, { keepdims: true }), np.min(x, 0, { keepdims: true }));
    same(x.prod([0, 1]), np.prod(x));
    same(x.argmax(1), np.argmax(x, 1));
    same(x.argmin(0), np.argmin(x, 0));
    same(x.var(0), np.var(x, 0));
    same(x.std(1), np.std(x, 1));
    same(x.any(0), np.any(x, 0));
    same(x.all(1), np.all(x, 1));
    same(x.cumsum(1), np.cumsum(x, 1));
    same(x.sort(0), np.sort(x, 0));
    same(x.argsort(0), np.argsort(x, 0));
  });

  it('law: for every rank-2..3 shape and axis, np.sum(x, axis) === np.sum(x, { axis })', () => {
    const arb = fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 3 }).chain((shape) =>
      fc.tuple(fc.constant(shape), fc.integer({ min: -shape.length, max: shape.length - 1 })),
    );
    fc.assert(
      fc.property(arb, ([shape, axis]) => {
        const a = np.reshape(np.arange(shape.reduce((p, d) => p * d, 1)), shape);
        same(np.sum(a, axis), np.sum(a, { axis }));
        expect(np.sum(a, axis).ndim).toBe(shape.length - 1);
      }),
      { numRuns: 30 },
    );
  });
});

describe('arguments a function does not understand are errors', () => {
  it('unknown option names list the valid ones', () => {
    expect(() => np.sum(x, { axes: 0 } as never)).toThrow("sum: unknown option \"axes\"; valid options: axis, keepdims, dtype");
    expect(() => np.sum(x, 0, { keepDims: true } as never)).toThrow('sum: unknown option "keepDims"; valid options: keepdims, dtype');
    expect(() => nn.softmax(x, { axis: 0, where: 1 } as never)).toThrow('softmax: unknown option "where"; valid options: axis');
    expect(() => np.argmax(x, { axis: 0, dtype: 'int32' } as never)).toThrow('argmax: unknown option "dtype"; valid options: axis, keepdims');
  });

  it('wrong kinds, a second axis, surplus arguments', () => {
    expect(() => np.sum(x, 'x' as never)).toThrow(/sum: argument 1 must be an axis \(integer or list of integers\) or an options object; got "x"; expected sum\(x, axis\?, \{keepdims, dtype\}\?\) or sum\(x, \{axis, keepdims, dtype\}\?\)/);
    expect(() => np.sum(x, 0, true as never)).toThrow('sum: the argument after the axis must be an options object {keepdims, dtype}; got true');
    expect(() => np.sum(x, 0, { axis: 1 } as never)).toThrow('sum: axis given twice: positionally (0) and as an option (1)');
    expect(() => (np.sum as (...a: unknown[]) => unknown)(x, 0, {}, {})).toThrow('sum: too many arguments (4)');
    expect(() => np.sum(x, { axis: 0 }, {} as never)).toThrow('sum: unexpected argument after the options object');
    expect(() => np.argmax(x, [0, 1] as never)).toThrow('argmax: axis must be one integer or null; got [0,1]');
    expect(() => np.sort(x, { axis: [0] } as never)).toThrow('sort: axis must be one integer or null; got [0]');
    expect(() => np.sum(x, { axis: '0' } as never)).toThrow('sum: axis must be an integer, a list of integers or null; got "0"');
    expect(() => x.sum(2)).toThrow('sum: axis 2 is out of range for an array of rank 2 (valid: -2..1)');
    expect(() => nn.gelu(x, { approx: true } as never)).toThrow('gelu: unknown option "approx"; valid options: approximate');
    expect(() => nn.oneHot(np.array([1]), 3, 'int32' as never)).toThrow('one_hot: options must be an object {dtype, axis}; got "int32"');
    expect(() => np.take(x, [0], 0, { fill: 1 } as never)).toThrow('take: unknown option "fill"; valid options: mode, fillValue');
    expect(() => nn.softmax(x, 0, 1 as never)).toThrow('softmax: the argument after the axis must be an options object {}; got 1');
  });
});
