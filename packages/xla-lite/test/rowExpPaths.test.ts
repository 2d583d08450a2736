// The row kernel's paths for a softmax-like walk (src/wasm/rowsKernel.ts `setRowKernelPaths`):
// (1) `deferSums`: in a walk computing a polynomial (exp), a row sum of a value the walk stores
// (an output: the log-softmax's exp(x - max) that the loss backward reads; or a scratch row: a
// softmax's exp for its divide) is added by a second walk over the stored vectors, the last 1-3
// columns as before; (2) `shiftedExp`: exp(x - max(x)) without the clamp (vmath.ts
// `vexpNonPositive`), chosen by emitExpr.ts `shiftedByMax`; (3) `recompute`: x - max is computed
// again by the stage that reads it instead of kept in a scratch row. Laws: the same bits as with
// every path off (NaNs compared as NaN), for any row length, with NaN, +inf, -inf and very negative entries, on 1-3
// threads; close to the reference backend (eager, float64 Math.exp); and an exp whose argument
// is NOT x - max(x) over the same row (a transposed max) keeps the clamp.
import { type Array, nn, np, setNumThreads, stopGradient, toStorage, valueAndGrad, withBackend } from '@tpukit/core';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { setKernelThreads } from '../src/index';
import { setRowKernelPaths } from '../src/wasm/rowsKernel';
import { compileWithPaths, type RowFn, sameBitsOverThreads } from './rowPathHarness';

const ALL_ON = { skipSumOnly: true, reread: true, deferSums: true, shiftedExp: true, recompute: true };
const ALL_OFF = { deferSums: false, shiftedExp: false, recompute: false };

/** The float32 bits, every NaN as one (WebAssembly leaves a NaN's sign and payload to the engine's operand order, which two compiled kernels may differ in). */
const bits = (a: Array) => globalThis.Array.from(new Uint32Array((toStorage(a) as Float32Array).slice().buffer), (w) => ((w & 0x7fffffff) > 0x7f800000 ? 0x7fc00000 : w));
/** Values from `seed`; `special` puts NaN, +inf, -inf and -1e9 into rows 1-4 (when there are), a -200 into row 0. */
const seq = (shape: number[], s: number, special = false, scale = 3): Array => {
  const n = shape.reduce((a, b) => a * b, 1);
  const C = shape[shape.length - 1];
  const v = Float32Array.from({ length: n }, (_, i) => Math.sin(i * s + 0.3) * scale * (1 + (i % 5) * 0.5));
  if (special) {
    [NaN, Infinity, -Infinity, -1e9].forEach((x, k) => (k + 1) * C < n && (v[(k + 1) * C + ((k * 5) % C)] = x));
    v[(7 * (s * 1000)) % C | 0] = -200;
  }
  return np.array(v, 'float32').reshape(shape);
};
type Fn = RowFn;

/** Close to `want` (the reference backend's): NaN where it is NaN, the same infinities, else within rtol/atol. */
function close(got: Array, want: Array, what: string): void {
  const a = got.dataSync() as Float32Array;
  const b = want.dataSync() as Float32Array;
  expect(a.length).toBe(b.length);
  for (let i = 0; i < b.length; i++) {
    if (Number.isNaN(b[i]) || !Number.isFinite(b[i])) {
      if (!Object.is(a[i], b[i])) expect(String(a[i]), `${what}: element ${i}`).toBe(String(b[i]));
    } else if (!(Math.abs(a[i] - b[i]) <= 2e-5 + 2e-5 * Math.abs(b[i]))) expect(a[i], `${what}: element ${i}`).toBe(b[i]);
  }
}

/** On 1, 2, 3 and again 1 thread(s), new arguments each pass: every path on gives the bits of every path off, and the reference's values. */
function sameBits(g: Fn, argsAt: (pass: number) => Array[]): void {
  const on = compileWithPaths(g, argsAt(0), ALL_ON, ALL_ON);
  const off = compileWithPaths(g, argsAt(0), ALL_OFF, ALL_ON);
  sameBitsOverThreads(on, off, argsAt, bits, (got, args) => {
    const ref = withBackend('reference', () => g(...args));
    got.forEach((x, q) => close(x, ref[q], `output ${q} against the reference`));
  });
}

/** The GPT's loss: log-softmax cross-entropy of logits against labels, and its gradient (the logsumexp row kernel stores exp(x - max) for the backward). */
const crossEntropy: Fn = (logits, onehot) => {
  const loss = (z: Array) => np.negative(np.mean(np.sum(np.multiply(nn.logSoftmax(z, { axis: -1 }), onehot), { axis: -1 })));
  const [v, g] = valueAndGrad(loss)(logits) as [Array, Array];
  return [v, g];
};
/** A softmax: exp(x - max) kept in scratch for the divide's stage. */
const softmax: Fn = (x) => [nn.softmax(x, { axis: -1 })];
/** log-sum-exp without the stop_gradient, and the exp's sum as an output of its own. */
const lse: Fn = (x) => {
  const m = np.max(x, { axis: -1, keepdims: true });
  const s = np.sum(np.exp(np.subtract(x, m)), { axis: -1, keepdims: true });
  return [np.add(np.log(s), m), s];
};

const onehotOf = (shape: number[], seed: number): Array => {
  const C = shape[shape.length - 1];
  const R = shape.slice(0, -1).reduce((a, b) => a * b, 1);
  const v = new Float32Array(R * C);
  for (let r = 0; r < R; r++) v[r * C + ((r * 37 + seed) % C)] = 1;
  return np.array(v, 'float32').reshape(shape);
};

afterEach(() => {
  setRowKernelPaths(ALL_ON);
  setKernelThreads(null);
  setNumThreads(null);
});

describe('row kernel paths of softmax-like walks', () => {
  const shape = fc.record({
    lead: fc.oneof(fc.constant([] as number[]), fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 2 })),
    M: fc.integer({ min: 1, max: 37 }),
    C: fc.oneof(fc.integer({ min: 1, max: 70 }), fc.constantFrom(128, 131, 256)),
    special: fc.boolean(),
    seed: fc.integer({ min: 1, max: 1000 }),
  });

  it('law: cross-entropy value and gradient with the paths on == off, bit for bit, and close to the reference; odd row lengths, NaN/inf rows, 1-3 threads', () => {
    fc.assert(
      fc.property(shape, ({ lead, M, C, special, seed }) => sameBits(crossEntropy, (pass) => [seq([...lead, M, C], seed * 0.0131 + pass * 0.07, special), onehotOf([...lead, M, C], seed + pass)])),
      { numRuns: 12, examples: [[{ lead: [2], M: 16, C: 256, special: false, seed: 3 }], [{ lead: [], M: 6, C: 7, special: true, seed: 2 }]] },
    );
  });

  it('law: softmax and log-sum-exp with the paths on == off, bit for bit, and close to the reference', () => {
    fc.assert(
      fc.property(shape, fc.boolean(), ({ lead, M, C, special, seed }, useLse) =>
        sameBits(useLse ? lse : softmax, (pass) => [seq([...lead, M, C], seed * 0.0173 + pass * 0.05, special, 40)]),
      ),
      { numRuns: 14, examples: [[{ lead: [], M: 9, C: 131, special: true, seed: 5 }, false], [{ lead: [3], M: 5, C: 5, special: true, seed: 8 }, true]] },
    );
  });

  it('an exp of x minus a max over another slice (the row max transposed) keeps the clamp: exp of a large argument is +inf', () => {
    // x[i, j, :] - max(x[j, i, :]): not <= 0; with rows of very different scales the argument reaches ~1000.
    const f: Fn = (x) => {
      const m = stopGradient(np.max(x, { axis: -1, keepdims: true }));
      const mt = np.transpose(m, [1, 0, 2]);
      return [np.sum(np.exp(np.subtract(x, mt)), { axis: -1 })];
    };
    const n = 4;
    const v = Float32Array.from({ length: n * n * n }, (_, i) => (Math.floor(i / n) % n < 2 ? 1000 : -1000) * (1 + (i % n) * 0.01) * (Math.floor(i / (n * n)) % 2 ? 1 : -1));
    const x = np.array(v, 'float32').reshape([n, n, n]);
    const c = compileWithPaths(f, [x], ALL_ON, ALL_ON);
    const got = withBackend('systolic', () => c.call([x])) as Array[];
    const ref = withBackend('reference', () => f(x));
    const want = ref[0].dataSync() as Float32Array;
    expect(globalThis.Array.from(want).some((w) => w === Infinity)).toBe(true);
    close(got[0], ref[0], 'exp(x - transposed max)');
  });
});
