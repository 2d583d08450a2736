/**
 * Laws for every differentiable first-order primitive: grad against central finite differences
 * (float64 oracles for elementwise math; f32 differences of the primitive itself, with a step
 * suited to it, for structural ops), jvp against vjp (the dot-product identity
 * <v, J u> = <J^T v, u>), and vmap against a loop over the batch.
 */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { type Array, lax, np } from '../index';
import { expectAllclose } from '../../test/matchers';
import { grad, jvp, vjp, vmap } from './index';
import { threefry2x32 } from '../random/threefry';
import { onBackend } from '../../test/backend';

// Laws checked against finite differences in exact arithmetic: the reference backend (the
// default systolic backend rounds matmul operands to bf16).
onBackend('reference');

type F = (...xs: Array[]) => Array;

/**
 * Tolerance for bf16 gradients against a float64 oracle: each factor of a derivative is rounded
 * to bf16 (8 significant bits, relative step 2^-8 ~ 0.4%), and a few such roundings compound.
 * (float32 cases use rtol 2e-4 against the same oracles.) Functions with a steep derivative in
 * the tested range (tan, asin, acosh, ...) amplify input rounding beyond this and are skipped.
 */
const BF16_GRAD_TOL = { rtol: 3e-2, atol: 3e-2 };

interface Case {
  name: string;
  f: F;
  shapes: number[][];
  /** Samples one input value of operand i. */
  lo?: number;
  hi?: number;
  /** float64 derivative oracle for elementwise cases: (args) => d f / d arg_i. */
  d64?: (xs: number[]) => number[];
  /** Step for the f32 finite differences (non-elementwise cases). */
  h?: number;
  tol?: number;
}

const ln = Math.log;
const unary = (name: string, f: F, d: (x: number) => number, lo = -2, hi = 2): Case => ({ name, f, shapes: [[5]], lo, hi, d64: ([x]) => [d(x)] });
const binary = (name: string, f: F, da: (a: number, b: number) => number, db: (a: number, b: number) => number, lo = -2, hi = 2): Case => ({
  name, f, shapes: [[4], [4]], lo, hi, d64: ([a, b]) => [da(a, b), db(a, b)],
});
const erfD = (x: number) => (2 / Math.sqrt(Math.PI)) * Math.exp(-x * x);
// d/dx lgamma(x) = digamma(x): a float64 series oracle.
function digamma(x: number): number {
  let r = 0;
  while (x < 6) {
    r -= 1 / x;
    x += 1;
  }
  const f = 1 / (x * x);
  return r + ln(x) - 0.5 / x - f * (1 / 12 - f * (1 / 120 - f * (1 / 252 - f * (1 / 240 - f / 132))));
}
function erfinv64(y: number): number {
  // Newton on erf from a rough start, in float64.
  let x = 0;
  for (let i = 0; i < 60; i++) x -= (erf64(x) - y) / erfD(x);
  return x;
}
function erf64(x: number): number {
  // Series for |x| < 3 (plenty accurate in the tested range).
  let s = 0;
  let term = x;
  for (let n = 0; n < 80; n++) {
    s += term / (2 * n + 1);
    term *= (-x * x) / (n + 1);
  }
  return (2 / Math.sqrt(Math.PI)) * s;
}

const cases: Case[] = [
  unary('neg', lax.neg, () => -1),
  unary('abs', lax.abs, (x) => Math.sign(x), 0.2, 2),
  unary('exp', lax.exp, Math.exp),
  unary('exp2', lax.exp2, (x) => 2 ** x * Math.LN2),
  unary('log', lax.log, (x) => 1 / x, 0.3, 3),
  unary('log1p', lax.log1p, (x) => 1 / (1 + x), -0.5, 2),
  unary('expm1', lax.expm1, Math.exp),
  unary('tanh', lax.tanh, (x) => 1 - Math.tanh(x) ** 2),
  unary('logistic', lax.logistic, (x) => Math.exp(-x) / (1 + Math.exp(-x)) ** 2),
  unary('sin', lax.sin, Math.cos),
  unary('cos', lax.cos, (x) => -Math.sin(x)),
  unary('tan', lax.tan, (x) => 1 / Math.cos(x) ** 2, -1, 1),
  unary('asin', lax.asin, (x) => 1 / Math.sqrt(1 - x * x), -0.8, 0.8),
  unary('acos', lax.acos, (x) => -1 / Math.sqrt(1 - x * x), -0.8, 0.8),
  unary('atan', lax.atan, (x) => 1 / (1 + x * x)),
  unary('sinh', lax.sinh, Math.cosh),
  unary('cosh', lax.cosh, Math.sinh),
  unary('asinh', lax.asinh, (x) => 1 / Math.sqrt(x * x + 1)),
  unary('acosh', lax.acosh, (x) => 1 / Math.sqrt(x * x - 1), 1.3, 3),
  unary('atanh', lax.atanh, (x) => 1 / (1 - x * x), -0.8, 0.8),
  unary('sqrt', lax.sqrt, (x) => 0.5 / Math.sqrt(x), 0.3, 3),
  unary('rsqrt', lax.rsqrt, (x) => -0.5 * x ** -1.5, 0.3, 3),
  unary('cbrt', lax.cbrt, (x) => (1 / 3) * x ** (-2 / 3), 0.3, 3),
  unary('erf', lax.erf, erfD),
  unary('erfc', lax.erfc, (x) => -erfD(x)),
  unary('erf_inv', lax.erfInv, (y) => 1 / erfD(erfinv64(y)), -0.8, 0.8),
  unary('lgamma', lax.lgamma, digamma, 0.6, 4),
  unary('square', lax.square, (x) => 2 * x),
  unary('integer_pow', (x) => lax.integerPow(x, 3), (x) => 3 * x * x),
  binary('add', lax.add, () => 1, () => 1),
  binary('sub', lax.sub, () => 1, () => -1),
  binary('mul', lax.mul, (_a, b) => b, (a) => a),
  binary('div', lax.div, (_a, b) => 1 / b, (a, b) => -a / (b * b), 0.5, 2),
  binary('pow', lax.pow, (a, b) => b * a ** (b - 1), (a, b) => ln(a) * a ** b, 0.5, 2),
  binary('atan2', lax.atan2, (a, b) => b / (a * a + b * b), (a, b) => -a / (a * a + b * b), 0.5, 2),
  binary('rem', lax.rem, () => 1, (a, b) => -Math.trunc(a / b), 0.3, 3),
  { name: 'max', f: lax.max, shapes: [[4], [4]], d64: ([a, b]) => (a > b ? [1, 0] : [0, 1]) },
  { name: 'min', f: lax.min, shapes: [[4], [4]], d64: ([a, b]) => (a < b ? [1, 0] : [0, 1]) },
  // Non-elementwise: f32 finite differences of the primitive itself.
  { name: 'select_n', f: (p, a, b) => lax.select(lax.gt(p, 0), a, b), shapes: [[4], [4], [4]], h: 1e-2 },
  { name: 'convert_element_type', f: (x) => lax.convertElementType(lax.convertElementType(x, 'bfloat16'), 'float32'), shapes: [[4]], h: 0.25, tol: 5e-2 },
  { name: 'broadcast_in_dim', f: (x) => lax.broadcastInDim(x, [2, 3, 4], [1, 2]), shapes: [[3, 1]], h: 1e-2 },
  { name: 'reshape', f: (x) => lax.reshape(x, [3, 2]), shapes: [[2, 3]], h: 1e-2 },
  { name: 'transpose', f: (x) => lax.transpose(x, [2, 0, 1]), shapes: [[2, 3, 2]], h: 1e-2 },
  { name: 'rev', f: (x) => lax.rev(x, [0]), shapes: [[3, 2]], h: 1e-2 },
  { name: 'squeeze', f: (x) => lax.squeeze(x, [1]), shapes: [[3, 1]], h: 1e-2 },
  { name: 'reduce_sum', f: (x) => lax.reduceSum(x, [1]), shapes: [[2, 3]], h: 1e-2 },
  { name: 'reduce_max', f: (x) => lax.reduceMax(x, [0]), shapes: [[3, 2]], h: 1e-3 },
  { name: 'reduce_min', f: (x) => lax.reduceMin(x, [0, 1]), shapes: [[3, 2]], h: 1e-3 },
  { name: 'reduce_prod', f: (x) => lax.reduceProd(x, [1]), shapes: [[2, 3]], h: 1e-2, tol: 5e-3 },
  { name: 'cumsum', f: (x) => lax.cumsum(x, 1), shapes: [[2, 3]], h: 1e-2 },
  { name: 'cumsum reverse', f: (x) => lax.cumsum(x, 0, true), shapes: [[3, 2]], h: 1e-2 },
  { name: 'cumprod', f: (x) => lax.cumprod(x, 1), shapes: [[2, 4]], h: 1e-2, tol: 5e-3 },
  { name: 'cumprod reverse', f: (x) => lax.cumprod(x, 0, true), shapes: [[3, 2]], h: 1e-2, tol: 5e-3 },
  { name: 'cummax', f: (x) => lax.cummax(x, 1), shapes: [[2, 4]], h: 1e-3 },
  { name: 'cummin reverse', f: (x) => lax.cummin(x, 0, true), shapes: [[4, 2]], h: 1e-3 },
  { name: 'dot_general matmul', f: (a, b) => lax.dotGeneral(a, b, [[[1], [0]], [[], []]]), shapes: [[2, 3], [3, 4]], h: 1e-2 },
  { name: 'dot_general batched', f: (a, b) => lax.dotGeneral(a, b, [[[2], [1]], [[0], [0]]]), shapes: [[2, 3, 2], [2, 2, 4]], h: 1e-2 },
  { name: 'dot_general odd dims', f: (a, b) => lax.dotGeneral(a, b, [[[0, 2], [2, 0]], [[1], [1]]]), shapes: [[2, 3, 4], [4, 3, 2]], h: 1e-2 },
  // Slicing, gather/scatter, sort (indices are fixed, values vary).
  { name: 'slice', f: (x) => lax.slice(x, [1, 0], [4, 3], [2, 2]), shapes: [[4, 3]], h: 1e-2 },
  { name: 'dynamic_slice', f: (x) => lax.dynamicSlice(x, [np.array(1), np.array(2)], [2, 2]), shapes: [[3, 3]], h: 1e-2 },
  { name: 'dynamic_update_slice', f: (x, u) => lax.dynamicUpdateSlice(x, u, [np.array(2), np.array(0)]), shapes: [[3, 3], [2, 2]], h: 1e-2 },
  { name: 'concatenate', f: (a, b) => lax.concatenate([a, b], 1), shapes: [[2, 1], [2, 3]], h: 1e-2 },
  { name: 'pad', f: (x, v) => lax.pad(x, lax.reshape(v, []), [[1, -1, 1], [0, 2, 0]]), shapes: [[3, 2], [1]], h: 1e-2 },
  {
    name: 'gather',
    f: (x) => lax.gather(x, np.array([[2], [0], [2]]), { offsetDims: [1], collapsedSliceDims: [0], startIndexMap: [0] }, [1, 3], { mode: 'clip' }),
    shapes: [[3, 3]],
    h: 1e-2,
  },
  {
    name: 'scatter-add',
    f: (x, u) => lax.scatterAdd(x, np.array([[1], [1], [0]]), u, { updateWindowDims: [1], insertedWindowDims: [0], scatterDimsToOperandDims: [0] }),
    shapes: [[2, 3], [3, 3]],
    h: 1e-2,
  },
  {
    name: 'scatter',
    f: (x, u) => lax.scatter(x, np.array([[2], [0]]), u, { updateWindowDims: [1], insertedWindowDims: [0], scatterDimsToOperandDims: [0] }, { uniqueIndices: true }),
    shapes: [[3, 2], [2, 2]],
    h: 1e-2,
  },
  { name: 'sort', f: (x) => lax.sort(x, { dimension: 0 }), shapes: [[4, 2]], h: 1e-3 },
  { name: 'top_k', f: (x) => lax.topK(x, 2)[0], shapes: [[2, 4]], h: 1e-3 },
];

const size = (s: number[]) => s.reduce((a, b) => a * b, 1);

/** fast-check arbitrary for the operands of a case. */
function operands(c: Case) {
  const lo = c.lo ?? -2;
  const hi = c.hi ?? 2;
  return fc.tuple(...c.shapes.map((s) => fc.array(fc.integer({ min: 0, max: 4096 }).map((i) => lo + ((hi - lo) * i) / 4096), { minLength: size(s), maxLength: size(s) })));
}

const toArrays = (c: Case, vals: number[][]) => vals.map((v, i) => np.array(new Float32Array(v)).reshape(c.shapes[i]));
/** Values as float32 (what the arrays hold), so oracles see the same inputs. */
const f32 = (v: number[]) => globalThis.Array.from(new Float32Array(v));

/** Random weights turn a vector output into a scalar loss: L = sum(f(x) * w). */
function weighted(c: Case, xs: Array[]): { loss: (...xs: Array[]) => Array; w: Array } {
  const out = c.f(...xs);
  const w = np.array(new Float32Array(out.size).map((_, i) => Math.sin(i * 1.7 + 0.3))).reshape(out.shape);
  return { loss: (...ys: Array[]) => np.sum(np.multiply(c.f(...ys), w)), w };
}

const tooClose = (c: Case, vals: number[][]): boolean => {
  // Keep away from kinks: ties for max/min/select, the rem discontinuity, reduce_max ties.
  if (c.name === 'max' || c.name === 'min') return vals[0].some((a, i) => Math.abs(a - vals[1][i]) < 1e-2);
  if (c.name === 'select_n') return vals[0].some((p) => Math.abs(p) < 1e-2);
  if (c.name === 'rem') return vals[0].some((a, i) => Math.abs(a / vals[1][i] - Math.round(a / vals[1][i])) < 1e-2);
  if (c.name === 'abs') return false;
  if (c.name.startsWith('reduce_m') || c.name.startsWith('cumm') || c.name === 'sort' || c.name === 'top_k') {
    const s = [...vals[0]].sort((a, b) => a - b);
    return s.some((v, i) => i > 0 && v - s[i - 1] < 1e-2);
  }
  if (c.name === 'convert_element_type') return vals[0].some((v) => Math.abs(v) < 0.1);
  return false;
};

describe.each(cases)('$name', (c) => {
  test('grad matches central finite differences', () => {
    fc.assert(
      fc.property(operands(c), (vals) => {
        if (tooClose(c, vals)) return;
        const xs = toArrays(c, vals);
        const { loss, w } = weighted(c, xs);
        const argnums = c.shapes.map((_, i) => i);
        const g = grad(loss, { argnums })(...xs) as Array[];
        if (c.d64) {
          const wv = w.dataSync();
          const cols = vals.map(f32);
          for (let i = 0; i < c.shapes.length; i++) {
            const expected = cols[0].map((_, k) => wv[k] * c.d64!(cols.map((col) => col[k]))[i]);
            expectAllclose(g[i], expected, { rtol: 2e-4, atol: 2e-5 });
          }
        } else {
          const h = c.h!;
          for (let i = 0; i < c.shapes.length; i++) {
            const base = vals.map(f32);
            const fd = base[i].map((_, k) => {
              const plus = base.map((v) => v.slice());
              const minus = base.map((v) => v.slice());
              plus[i][k] += h;
              minus[i][k] -= h;
              const lp = loss(...toArrays(c, plus)).item() as number;
              const lm = loss(...toArrays(c, minus)).item() as number;
              return (lp - lm) / (2 * h);
            });
            expectAllclose(g[i], fd, { rtol: c.tol ?? 2e-3, atol: c.tol ?? 2e-3 });
          }
        }
      }),
      { numRuns: 6, seed: 4 },
    );
  });

  test.runIf(c.d64 !== undefined && !['rem', 'lgamma', 'erf_inv', 'acosh', 'atanh', 'tan', 'asin', 'acos'].includes(c.name))('bfloat16 grad matches the float64 oracle within bf16 tolerance', () => {
    fc.assert(
      fc.property(operands(c), (vals) => {
        if (tooClose(c, vals)) return;
        const xs = toArrays(c, vals).map((x) => x.astype('bfloat16'));
        // The oracle sees the bf16-rounded inputs the kernels see.
        const cols = xs.map((x) => globalThis.Array.from(x.dataSync()));
        const out = c.f(...xs);
        const w = np.array(new Float32Array(out.size).map((_, i) => Math.sin(i * 1.7 + 0.3))).reshape(out.shape).astype('bfloat16');
        const wv = w.dataSync();
        const g = grad((...ys: Array[]) => np.sum(np.multiply(c.f(...ys), w)).astype('float32'), { argnums: c.shapes.map((_, i) => i) })(...xs) as Array[];
        for (let i = 0; i < c.shapes.length; i++) {
          expect(g[i].dtype).toBe('bfloat16');
          const expected = cols[0].map((_, k) => wv[k] * c.d64!(cols.map((col) => col[k]))[i]);
          expectAllclose(g[i], expected, BF16_GRAD_TOL);
        }
      }),
      { numRuns: 4, seed: 9 },
    );
  });

  test('jvp agrees with vjp (dot-product identity)', () => {
    fc.assert(
      fc.property(operands(c), operands(c), (vals, dirs) => {
        if (tooClose(c, vals)) return;
        const xs = toArrays(c, vals);
        const us = toArrays(c, dirs.map((d) => d.map((v) => v / 2)));
        const [y, ju] = jvp(c.f, xs, us) as [Array, Array];
        const v = np.array(new Float32Array(y.size).map((_, i) => Math.cos(i * 0.9 + 0.2))).reshape(y.shape);
        const [, fv] = vjp(c.f, ...xs);
        const jtv = fv(v) as Array[];
        const lhs = np.sum(np.multiply(v, ju)).item() as number;
        const rhs = jtv.reduce((acc, g, i) => acc + (np.sum(np.multiply(g, us[i])).item() as number), 0);
        expect(Math.abs(lhs - rhs)).toBeLessThanOrEqual((c.tol ?? 1e-4) * (1 + Math.abs(lhs)));
      }),
      { numRuns: 4, seed: 7 },
    );
  });

  test('vmap equals a loop over the batch', () => {
    const B = 3;
    fc.assert(
      fc.property(fc.array(operands(c), { minLength: B, maxLength: B }), (batch) => {
        const per = batch.map((vals) => c.f(...toArrays(c, vals)));
        const stacked = c.shapes.map((s, i) => np.array(new Float32Array(batch.flatMap((vals) => f32(vals[i])))).reshape([B, ...s]));
        const out = vmap(c.f)(...stacked) as Array;
        expect(out.shape).toEqual([B, ...per[0].shape]);
        expectAllclose(out, per.flatMap((p) => globalThis.Array.from(p.dataSync())), { rtol: 1e-6, atol: 1e-6 });
        // Batch axis last on the first operand, others unbatched (null axes).
        const moved = np.moveaxis(stacked[0], 0, -1);
        const inAxes = c.shapes.map((_, i) => (i === 0 ? -1 : null));
        const rest = c.shapes.slice(1).map((_, i) => toArrays(c, batch[0])[i + 1]);
        const out2 = vmap(c.f, { inAxes, outAxes: -1 })(moved, ...rest) as Array;
        const per2 = batch.map((vals) => c.f(toArrays(c, vals)[0], ...rest));
        expectAllclose(np.moveaxis(out2, -1, 0), per2.flatMap((p) => globalThis.Array.from(p.dataSync())), { rtol: 1e-6, atol: 1e-6 });
      }),
      { numRuns: 3, seed: 11 },
    );
  });
});

test('bfloat16 grads follow float32 grads within bf16 tolerance', () => {
  const x = np.array([0.5, 1.25, -0.75, 2]);
  const f = (v: Array) => np.sum(np.multiply(np.sin(v), np.exp(np.multiply(v, 0.5))));
  const g32 = grad(f)(x) as Array;
  const g16 = grad(f)(x.astype('bfloat16')) as Array;
  expect(g16.dtype).toBe('bfloat16');
  expectAllclose(g16, g32, { rtol: 3e-2, atol: 3e-2 });
});

test('cumprod and reduce_prod gradients are right at zeros; cummax averages ties', () => {
  const x = np.array([2, 0, 3]).astype('float32');
  expectAllclose(grad((v: Array) => np.sum(lax.cumprod(v, 0)))(x) as Array, [1, 8, 0]);
  expectAllclose(grad((v: Array) => lax.reduceProd(v, [0]))(x) as Array, [0, 6, 0]);
  expectAllclose(grad((v: Array) => np.sum(lax.cummax(v, 0)))(np.array([1, 1, 0.5]).astype('float32')) as Array, [2, 1, 0]);
});

/** Primitives without derivatives still batch: vmap equals a loop for each of them. */
describe('vmap equals a loop for non-differentiable primitives', () => {
  const B = 3;
  const fl = (seed: number, shape: number[]) => np.array(new Float32Array(size(shape)).map((_, i) => Math.round(Math.sin(i * 2.3 + seed) * 40) / 8)).reshape(shape);
  const it = (seed: number, shape: number[]) => np.array(new Int32Array(size(shape)).map((_, i) => Math.round(Math.sin(i * 1.7 + seed) * 9))).reshape(shape);
  const u32 = (seed: number, shape: number[]) => np.array(new Uint32Array(size(shape)).map((_, i) => (Math.abs(Math.sin(i * 3.1 + seed)) * 4e9) >>> 0)).reshape(shape);
  const cases: [string, (...xs: Array[]) => Array | Array[], (b: number) => Array[]][] = [
    ['eq/lt/ge', (a, b) => [lax.eq(a, b), lax.lt(a, b), lax.ge(a, b)], (s) => [fl(s, [4]), fl(s + 1, [4])]],
    ['floor/ceil/round/sign/is_finite', (a) => [lax.floor(a), lax.ceil(a), lax.round(a), lax.round(a, 1), lax.sign(a), lax.isFinite(a)], (s) => [fl(s, [5])]],
    ['argmax/argmin', (a) => [lax.argmax(a, 1), lax.argmin(a, 0)], (s) => [fl(s, [3, 4])]],
    ['and/or/xor/not/shifts', (a, b) => [lax.bitwiseAnd(a, b), lax.bitwiseOr(a, b), lax.bitwiseXor(a, b), lax.bitwiseNot(a), lax.shiftLeft(a, lax.abs(b)), lax.shiftRightArithmetic(a, lax.abs(b)), lax.shiftRightLogical(a, lax.abs(b))], (s) => [it(s, [4]), it(s + 2, [4])]],
    ['reduce_and/or', (a) => [lax.reduceAnd(lax.gt(a, 0), [1]), lax.reduceOr(lax.gt(a, 0), [0])], (s) => [fl(s, [2, 3])]],
    ['bitcast/nextafter/iota', (a) => [lax.bitcastConvertType(a, 'int32'), lax.nextafter(a, np.zerosLike(a)), lax.add(a, lax.iota('float32', 4))], (s) => [fl(s, [4])]],
    ['integer arithmetic', (a, b) => [lax.add(a, b), lax.mul(a, b), lax.div(a, lax.add(lax.abs(b), 1)), lax.rem(a, lax.add(lax.abs(b), 1)), lax.max(a, b)], (s) => [it(s, [4]), it(s + 5, [4])]],
    ['threefry2x32', (k1, k2, x1, x2) => threefry2x32(k1, k2, x1, x2), (s) => [u32(s, []), u32(s + 1, []), u32(s + 2, [5]), u32(s + 3, [5])]],
    ['sort (multi-operand)', (k, v) => lax.sort([k, v], { dimension: 0, numKeys: 1 }), (s) => [fl(s, [5]), it(s, [5])]],
    ['cumsum int', (a) => lax.cumsum(a, 0), (s) => [it(s, [5])]],
  ];
  test.each(cases)('%s', (_name, f, gen) => {
    const members = globalThis.Array.from({ length: B }, (_, b) => gen(b * 13));
    const stacked = members[0].map((_, i) => np.stack(members.map((m) => m[i])));
    const outs = [vmap((...xs: Array[]) => f(...xs))(...stacked)].flat() as Array[];
    const per = members.map((m) => [f(...m)].flat() as Array[]);
    outs.forEach((o, k) => {
      expect(o.shape).toEqual([B, ...per[0][k].shape]);
      expect(o.dtype).toBe(per[0][k].dtype);
      expect(globalThis.Array.from(o.dataSync())).toEqual(per.flatMap((p) => globalThis.Array.from(p[k].dataSync())));
    });
    // One member batched, the others shared (null axes).
    const inAxes = stacked.map((_, i) => (i === 0 ? 0 : null));
    const mixed = [vmap((...xs: Array[]) => f(...xs), { inAxes })(stacked[0], ...members[0].slice(1))].flat() as Array[];
    const perMixed = members.map((m) => [f(m[0], ...members[0].slice(1))].flat() as Array[]);
    mixed.forEach((o, k) => expect(globalThis.Array.from(o.dataSync())).toEqual(perMixed.flatMap((p) => globalThis.Array.from(p[k].dataSync()))));
  });
});
