/**
 * dot_general: the contraction every matmul, einsum and tensordot lowers to, with jax.lax's
 * dimension numbers `[[lhsContracting, rhsContracting], [lhsBatch, rhsBatch]]`. The output is
 * batch dims, then lhs free dims, then rhs free dims. The reference kernel multiplies exactly
 * and accumulates in float64 (integers wrap at 32 bits); the systolic backend reproduces the
 * MXU's bf16-operand / f32-accumulator arithmetic instead. Defined with its rules (jvp,
 * transpose, batching) and its lax ops, `dotGeneral` and `dot`.
 */
import { type Array, numbersToStorage, storageToNumbers } from '../array';
import { type DType, allocStorage, isInteger } from '../dtype';
import { type BatchRule, definePrimitive, isUndef, type Primitive, type ShapedArray, type TransposeRule, type UndefPrimal } from '../primitive';
import { addAny, convertElementType } from './elementwise';
import type { ArrayLike as ArrayInput } from '../convert';
import { bind1 } from '../trace';
import { p1, shift } from './ruleKit';
import { moveBdim, operands, transpose } from './structural';
import { fmt, sizeOf, stridesOf } from '../shape';
import { stridedCopy } from './strided';
import { showValue } from '../describe';
import { type CanonicalPrecision, type PrecisionLike, canonicalizePrecision, isCanonicalPrecision } from './precision';

export type DotDimensionNumbers = readonly [
  readonly [readonly number[], readonly number[]],
  readonly [readonly number[], readonly number[]],
];

export type { Precision } from './precision';

export interface DotGeneralParams {
  dimensionNumbers: DotDimensionNumbers;
  /** Canonical (aliases resolved by `lax.dotGeneral`); null runs at the process default. */
  precision: CanonicalPrecision;
  preferredElementType: DType | null;
}

function checkDims(side: string, dims: readonly number[], rank: number): void {
  for (const d of dims) {
    if (!Number.isInteger(d) || d < 0 || d >= rank) throw new RangeError(`dot_general: ${side} dimension ${d} out of range for rank ${rank}`);
  }
  if (new Set(dims).size !== dims.length) throw new Error(`dot_general: repeated ${side} dimensions ${showValue(dims)}`);
}

/** Free (neither contracting nor batch) dimensions, in order. */
export function freeDims(rank: number, contract: readonly number[], batch: readonly number[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < rank; i++) if (!contract.includes(i) && !batch.includes(i)) out.push(i);
  return out;
}

export const dotGeneralP = definePrimitive<DotGeneralParams>({
  name: 'dot_general',
  hlo: 'dot',
  rules: (self) => ({
    jvp: (xs, ts, params) => {
      const [a, b] = xs;
      const [ta, tb] = ts;
      const y = p1(self, [a, b], params);
      return [[y], [addAny(ta && p1(self, [ta, b], params), tb && p1(self, [a, tb], params))]];
    },
    transpose: dotTranspose(self),
    batch: dotBatch(self),
  }),
  abstractEval([lhs, rhs], { dimensionNumbers, precision, preferredElementType }) {
    // Bound directly (not through lax.dotGeneral), a typo or an alias would reach a backend.
    if (!isCanonicalPrecision(precision)) {
      canonicalizePrecision(precision, 'dot_general'); // throws for an unknown name
      throw new TypeError(`dot_general: precision ${showValue(precision)} is an alias; bind dot_general through lax.dotGeneral, which canonicalises it`);
    }
    const [[lc, rc], [lb, rb]] = dimensionNumbers;
    checkDims('lhs contracting', lc, lhs.shape.length);
    checkDims('rhs contracting', rc, rhs.shape.length);
    checkDims('lhs batch', lb, lhs.shape.length);
    checkDims('rhs batch', rb, rhs.shape.length);
    if (lc.length !== rc.length) throw new Error(`dot_general: ${lc.length} lhs contracting dims vs ${rc.length} rhs contracting dims`);
    if (lb.length !== rb.length) throw new Error(`dot_general: ${lb.length} lhs batch dims vs ${rb.length} rhs batch dims`);
    for (let i = 0; i < lc.length; i++) {
      if (lhs.shape[lc[i]] !== rhs.shape[rc[i]]) {
        throw new Error(`dot_general: contracting dims differ: lhs ${fmt(lhs.shape)} (dim ${lc[i]} = ${lhs.shape[lc[i]]}) vs rhs ${fmt(rhs.shape)} (dim ${rc[i]} = ${rhs.shape[rc[i]]})`);
      }
    }
    for (let i = 0; i < lb.length; i++) {
      if (lhs.shape[lb[i]] !== rhs.shape[rb[i]]) {
        throw new Error(`dot_general: batch dims differ: lhs ${fmt(lhs.shape)} (dim ${lb[i]}) vs rhs ${fmt(rhs.shape)} (dim ${rb[i]})`);
      }
    }
    if (lhs.dtype !== rhs.dtype) throw new TypeError(`dot_general: operand dtypes differ: ${lhs.dtype} and ${rhs.dtype}`);
    const shape = [
      ...lb.map((d) => lhs.shape[d]),
      ...freeDims(lhs.shape.length, lc, lb).map((d) => lhs.shape[d]),
      ...freeDims(rhs.shape.length, rc, rb).map((d) => rhs.shape[d]),
    ];
    return [{ shape, dtype: preferredElementType ?? lhs.dtype, weakType: lhs.weakType && rhs.weakType && !preferredElementType }];
  },
  impl([lhs, rhs], { dimensionNumbers }, [o]) {
    const [[lc, rc], [lb, rb]] = dimensionNumbers;
    const lf = freeDims(lhs.shape.length, lc, lb);
    const rf = freeDims(rhs.shape.length, rc, rb);
    const B = sizeOf(lb.map((d) => lhs.shape[d]));
    const M = sizeOf(lf.map((d) => lhs.shape[d]));
    const N = sizeOf(rf.map((d) => rhs.shape[d]));
    const K = sizeOf(lc.map((d) => lhs.shape[d]));
    // Canonicalise: lhs -> [B, M, K], rhs -> [B, N, K] (contiguous K for both).
    const a = permuteToF64(storageToNumbers(lhs.data, lhs.dtype), lhs.shape, [...lb, ...lf, ...lc]);
    const b = permuteToF64(storageToNumbers(rhs.data, rhs.dtype), rhs.shape, [...rb, ...rf, ...rc]);
    const int = isInteger(o.dtype) || o.dtype === 'bool';
    const acc = new Float64Array(B * M * N);
    for (let bi = 0; bi < B; bi++) {
      for (let i = 0; i < M; i++) {
        const ao = (bi * M + i) * K;
        for (let j = 0; j < N; j++) {
          const bo = (bi * N + j) * K;
          let s = 0;
          if (int) for (let k = 0; k < K; k++) s = (s + Math.imul(a[ao + k], b[bo + k])) | 0;
          else for (let k = 0; k < K; k++) s += a[ao + k] * b[bo + k];
          acc[(bi * M + i) * N + j] = s;
        }
      }
    }
    if (o.dtype === 'float32') return [Float32Array.from(acc)];
    if (o.dtype === 'bfloat16' || o.dtype === 'float16') return [numbersToStorage(Float32Array.from(acc), o.dtype)];
    const out = allocStorage(o.dtype, acc.length);
    // bool: a logical or of ands (any product nonzero), as XLA's pred dot.
    if (o.dtype === 'bool') for (let i = 0; i < acc.length; i++) out[i] = acc[i] !== 0 ? 1 : 0;
    else for (let i = 0; i < acc.length; i++) out[i] = acc[i];
    return [out];
  },
});

function permuteToF64(vals: ArrayLike<number>, shape: readonly number[], perm: number[]): Float64Array {
  const src = Float64Array.from(vals);
  if (perm.every((p, i) => p === i)) return src;
  const st = stridesOf(shape);
  const out = new Float64Array(src.length);
  stridedCopy(src, out, perm.map((p) => shape[p]), perm.map((p) => st[p]));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Rules

function dotTransposeLhs(prim: Primitive, g: Array, y: Array, xAval: ShapedArray, dn: DotDimensionNumbers, params: any, swapAns: boolean): Array {
  const [[xc, yc], [xb, yb]] = dn;
  const xNd = xAval.shape.length;
  const xKept = freeDims(xNd, xc, xb);
  const yKept = freeDims(y.ndim, yc, yb);
  const nb = xb.length;
  const range = (s: number, n: number) => globalThis.Array.from({ length: n }, (_, i) => s + i);
  const ansBatch = range(0, nb);
  const ansY = swapAns ? range(nb, yKept.length) : range(nb + xKept.length, yKept.length);
  const order = yc.map((_, i) => i).sort((a, b) => yc[a] - yc[b]);
  const xcSortedByY = order.map((i) => xc[i]);
  const pre = [...xb, ...xKept, ...xcSortedByY];
  const outAxes = pre.map((_, i) => i).sort((a, b) => pre[a] - pre[b]);
  const r = p1(prim, [g, y], { ...params, dimensionNumbers: [[ansY, yKept], [ansBatch, yb]], preferredElementType: null });
  const t = outAxes.every((a, i) => a === i) ? r : transpose(r, outAxes);
  return t.dtype === xAval.dtype ? t : convertElementType(t, xAval.dtype);
}

function dotTranspose(prim: Primitive): TransposeRule {
  return ([ct], [x, y], params) => {
    const dn = params.dimensionNumbers;
    if (isUndef(x) && isUndef(y)) throw new Error('transpose: dot_general of two linear values is not linear');
    if (isUndef(x)) return [dotTransposeLhs(prim, ct!, y as Array, x.aval, dn, params, false), null];
    const [[xc, yc], [xb, yb]] = dn;
    return [null, dotTransposeLhs(prim, ct!, x as Array, (y as UndefPrimal).aval, [[yc, xc], [yb, xb]], params, true)];
  };
}

function dotBatch(prim: Primitive): BatchRule {
  return ([a, b], [da, db], params) => {
    const [[lc, rc], [lb, rb]] = params.dimensionNumbers as [[number[], number[]], [number[], number[]]];
    if (da !== null && db !== null) {
      const x = moveBdim(a, da, 0, 0);
      const y = moveBdim(b, db, 0, 0);
      const dn = [[shift(lc), shift(rc)], [[0, ...shift(lb)], [0, ...shift(rb)]]];
      return [[p1(prim, [x, y], { ...params, dimensionNumbers: dn })], [0]];
    }
    if (da !== null) {
      const x = moveBdim(a, da, 0, 0);
      const dn = [[shift(lc), rc], [shift(lb), rb]];
      // The batch dim is lhs's first free dim: it lands right after the batch dims.
      return [[p1(prim, [x, b], { ...params, dimensionNumbers: dn })], [lb.length]];
    }
    const y = moveBdim(b, db, 0, 0);
    const dn = [[lc, shift(rc)], [lb, shift(rb)]];
    const lhsFree = freeDims(a.ndim, lc, lb).length;
    return [[p1(prim, [a, y], { ...params, dimensionNumbers: dn })], [lb.length + lhsFree]];
  };
}

// ---------------------------------------------------------------------------------------------
// The lax ops (re-exported by ops.ts)

export function dotGeneral(
  lhs: ArrayInput,
  rhs: ArrayInput,
  dimensionNumbers: DotDimensionNumbers,
  opts: { precision?: PrecisionLike; preferredElementType?: DType | null } = {},
): Array {
  const [l, r] = operands('dot_general', [lhs, rhs]);
  return bind1(dotGeneralP, [l, r], {
    dimensionNumbers,
    precision: canonicalizePrecision(opts.precision, 'dot_general'),
    preferredElementType: opts.preferredElementType ?? null,
  });
}

/** `lax.dot`: matrix/vector product contracting lhs's last and rhs's first dimension. */
export function dot(lhs: ArrayInput, rhs: ArrayInput, opts: { precision?: PrecisionLike; preferredElementType?: DType | null } = {}): Array {
  const [l, r] = operands('dot', [lhs, rhs]);
  return dotGeneral(l, r, [[[l.ndim - 1], [0]], [[], []]], opts);
}
