/** jax.nn functions against float64 references: softmax, log_softmax, logsumexp, gelu (exact and tanh), silu, relu, sigmoid, one_hot. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Array, nn, np } from './index';
import { erf } from './special';
import { TOL, expectAllclose } from '../test/matchers';

const RUNS = { numRuns: 30 };
const rowsArb = fc.integer({ min: 1, max: 4 }).chain((r) =>
  fc.integer({ min: 1, max: 6 }).chain((c) =>
    fc.array(fc.array(fc.double({ min: -30, max: 30, noNaN: true }).map(Math.fround), { minLength: c, maxLength: c }), { minLength: r, maxLength: r }),
  ),
);

const lse = (row: number[]): number => {
  const m = Math.max(...row);
  return m + Math.log(row.reduce((s, v) => s + Math.exp(v - m), 0));
};

describe('softmax family vs float64', () => {
  it('softmax / log_softmax / logsumexp along the last axis', () => {
    fc.assert(
      fc.property(rowsArb, (rows) => {
        const x = np.array(rows, 'float32');
        expectAllclose(nn.softmax(x), rows.flatMap((r) => r.map((v) => Math.exp(v - lse(r)))), TOL.float32);
        expectAllclose(nn.logSoftmax(x), rows.flatMap((r) => r.map((v) => v - lse(r))), { rtol: 1e-5, atol: 1e-5 });
        expectAllclose(nn.logsumexp(x, { axis: -1 }), rows.map(lse), TOL.float32);
        expectAllclose(nn.logsumexp(x), [lse(rows.flat())], TOL.float32);
        const k = nn.logsumexp(x, { axis: 0, keepdims: true });
        expect(k.shape).toEqual([1, rows[0].length]);
      }),
      RUNS,
    );
  });

  it('softmax over axis 0 sums to one down the columns; bf16 stays bf16', () => {
    const x = np.array([[1, 2], [3, 4], [5, 7]], 'bfloat16');
    const s = nn.softmax(x, { axis: 0 });
    expect(s.dtype).toBe('bfloat16');
    expectAllclose(np.sum(s, { axis: 0 }), [1, 1], TOL.bfloat16);
  });

  it('is stable for large inputs and handles -inf as JAX does', () => {
    expectAllclose(nn.softmax(np.array([1000, 1000], 'float32')), [0.5, 0.5]);
    expectAllclose(nn.logsumexp(np.array([1000, 1000], 'float32')), [1000 + Math.LN2]);
    expect(nn.logsumexp(np.array([-Infinity, -Infinity], 'float32')).item()).toBe(-Infinity);
    expectAllclose(nn.softmax(np.array([-Infinity, 0], 'float32')), [0, 1]);
    expect(nn.logsumexp(np.array([Infinity, 1], 'float32')).item()).toBe(Infinity);
  });
});

describe('activations vs float64', () => {
  const gelu = (x: number): number => 0.5 * x * (1 + erf(x / Math.SQRT2));
  const geluTanh = (x: number): number => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
  const sig = (x: number): number => 1 / (1 + Math.exp(-x));
  const cases: [string, (x: Array) => Array, (v: number) => number][] = [
    ['gelu exact', (x) => nn.gelu(x, { approximate: false }), gelu],
    ['gelu tanh (default)', (x) => nn.gelu(x), geluTanh],
    ['silu', nn.silu, (v) => v * sig(v)],
    ['sigmoid', nn.sigmoid, sig],
    ['relu', nn.relu, (v) => Math.max(v, 0)],
    ['relu6', nn.relu6, (v) => Math.min(Math.max(v, 0), 6)],
    ['softplus', nn.softplus, (v) => Math.max(v, 0) + Math.log1p(Math.exp(-Math.abs(v)))],
    ['log_sigmoid', nn.logSigmoid, (v) => -(Math.max(-v, 0) + Math.log1p(Math.exp(-Math.abs(v))))],
  ];
  for (const [name, f, ref] of cases) {
    it(name, () => {
      fc.assert(
        fc.property(fc.array(fc.double({ min: -12, max: 12, noNaN: true }).map(Math.fround), { minLength: 1, maxLength: 16 }), (v) => {
          expectAllclose(f(np.array(v, 'float32')), v.map(ref), { rtol: 1e-5, atol: 2e-6 });
          const b = f(np.array(v, 'bfloat16'));
          expect(b.dtype).toBe('bfloat16');
          expectAllclose(b, [...np.array(v, 'bfloat16').dataSync()].map(ref), { rtol: 2e-2, atol: 2e-2 });
        }),
        RUNS,
      );
    });
  }

  it('integer inputs become float32 for float activations; relu keeps ints', () => {
    expect(nn.sigmoid(np.array([0], 'int32')).toArray()).toEqual([0.5]);
    const r = nn.relu(np.array([-2, 3], 'int8'));
    expect([r.dtype, r.toArray()]).toEqual(['int8', [0, 3]]);
  });
});

describe('one_hot', () => {
  it('matches a loop; out-of-range and negative indices give zero rows', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -2, max: 6 }), { minLength: 0, maxLength: 10 }), fc.integer({ min: 0, max: 5 }), (idx, k) => {
        const r = nn.oneHot(np.array(idx.length ? idx : [], 'int32'), k);
        expect(r.dtype).toBe('float32');
        expect(r.shape).toEqual([idx.length, k]);
        expect(r.toArray()).toEqual(idx.map((i) => globalThis.Array.from({ length: k }, (_, j) => (j === i ? 1 : 0))));
      }),
      RUNS,
    );
  });

  it('axis and dtype options; float indices are an error', () => {
    const r = nn.oneHot(np.array([0, 2], 'uint8'), 3, { axis: 0, dtype: 'bool' });
    expect(r.toArray()).toEqual([[true, false], [false, false], [false, true]]);
    expect(() => nn.oneHot(np.array([1.5]), 3)).toThrow('one_hot: indices must be integers; got float32');
    expect(() => nn.oneHot(np.array([1]), -1)).toThrow('one_hot: numClasses must be a non-negative integer; got -1');
  });
});

it('standardize gives zero mean and unit variance', () => {
  const x = np.array([[1, 2, 3, 4], [10, 10, 10, 14]], 'float32');
  const s = nn.standardize(x);
  expectAllclose(np.mean(s, { axis: -1 }), [0, 0], { atol: 1e-5 });
  expectAllclose(np.variance(s, { axis: -1 }), [1, 1], { rtol: 1e-3, atol: 1e-3 });
});
