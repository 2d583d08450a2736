// Law: jit(f) equals eager f on random programs made of the patterns layout assignment, dot
// epilogue fusion and row fusion rewrite (dense layers with bias and activation, x.T @ g,
// softmax, log-softmax, layer norm, RMSNorm), forward and through grad.
import { grad, nn, np } from '@tpukit/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jit } from '../src/index';
import { expectAllclose } from './build';

type V = ReturnType<typeof np.ones>;
const rms = (x: V) => np.multiply(x, np.reciprocal(np.sqrt(np.add(np.mean(np.square(x), { axis: -1, keepdims: true }), 1e-6))));
const ln = (x: V, g: V) => {
  const mu = np.mean(x, { axis: -1, keepdims: true });
  const v = np.mean(np.square(np.subtract(x, mu)), { axis: -1, keepdims: true });
  return np.multiply(np.divide(np.subtract(x, mu), np.sqrt(np.add(v, 1e-5))), g);
};
// Every op maps [4,8] values (and the [8,8] weight w) to a [4,8] value.
const OPS: ((a: V, b: V, w: V) => V)[] = [
  (a) => nn.softmax(a),
  (a) => nn.logSoftmax(a),
  (a, b) => ln(a, b),
  (a) => rms(a),
  (a, b, w) => nn.gelu(np.add(np.matmul(a, w), np.mean(b, { axis: 0 }))),
  (a, _b, w) => nn.relu(np.matmul(a, w)),
  (a, b, w) => np.add(b, nn.sigmoid(np.matmul(a, np.transpose(w)))),
  (a, b) => np.multiply(np.matmul(a, np.matmul(np.transpose(a), b)), 0.1), // a @ (a.T @ b)
  (a, b) => np.multiply(np.tanh(a), b),
  (a, b) => np.subtract(a, np.multiply(nn.softmax(b), 2)),
];

const program = fc.array(fc.tuple(fc.nat(OPS.length - 1), fc.nat(7), fc.nat(7)), { minLength: 1, maxLength: 6 });
const data = fc.array(fc.float({ min: -2, max: 2, noNaN: true, noDefaultInfinity: true }), { minLength: 64 + 64, maxLength: 64 + 64 });

function build(ops: [number, number, number][]): (x: V, y: V, w: V) => V {
  return (x, y, w) => {
    const pool: V[] = [x, y];
    for (const [op, i, j] of ops) pool.push(OPS[op](pool[i % pool.length], pool[j % pool.length], w));
    return pool[pool.length - 1];
  };
}

const inputs = (vals: number[]): [V, V, V] => [
  np.array(vals.slice(0, 32), 'float32').reshape([4, 8]),
  np.array(vals.slice(32, 64), 'float32').reshape([4, 8]),
  np.multiply(np.array(vals.slice(64), 'float32').reshape([8, 8]), 0.3),
];

describe('jit(f) == f on random programs with dense / softmax / norm patterns', () => {
  it('forward', () => {
    fc.assert(
      fc.property(program, data, (ops, vals) => {
        const f = build(ops);
        const args = inputs(vals);
        expectAllclose(jit(f)(...args), f(...args), { rtol: 1e-4, atol: 1e-5 });
      }),
      { numRuns: 25 },
    );
  });
  it('grad (all three arguments)', () => {
    fc.assert(
      fc.property(program, data, (ops, vals) => {
        const f = build(ops);
        const loss = (x: V, y: V, w: V) => np.sum(np.sin(f(x, y, w)));
        const args = inputs(vals);
        const got = jit(grad(loss, { argnums: [0, 1, 2] }))(...args) as V[];
        const want = grad(loss, { argnums: [0, 1, 2] })(...args) as V[];
        got.forEach((g, k) => expectAllclose(g, want[k], { rtol: 2e-3, atol: 2e-4 }));
      }),
      { numRuns: 15 },
    );
  });
  it('the patterns do get rewritten (so the law above exercises the new passes)', () => {
    const args = inputs(Array.from({ length: 128 }, (_, i) => Math.sin(i)));
    const f = build([[0, 0, 0], [4, 2, 1], [3, 3, 0], [7, 4, 1]]);
    const c = jit(grad((x: V, y: V, w: V) => np.sum(np.sin(f(x, y, w))), { argnums: [0, 1, 2] })).lower(...args).compile();
    expect(c.stats.rowFusions).toBeGreaterThan(0);
    expect(c.stats.outputFusions).toBeGreaterThan(0);
    expect(c.passStats.layout).toBeGreaterThan(0);
  });
});
