/**
 * dot_general: the contraction every matmul, einsum and tensordot lowers to, with jax.lax's
 * dimension numbers `[[lhsContracting, rhsContracting], [lhsBatch, rhsBatch]]`. The output is
 * batch dims, then lhs free dims, then rhs free dims. The reference kernel multiplies exactly
 * and accumulates in float64 (integers wrap at 32 bits); the systolic backend reproduces the
 * MXU's bf16-operand / f32-accumulator arithmetic instead.
 */
import { numbersToStorage, storageToNumbers } from '../array';
import { type DType, allocStorage, isInteger } from '../dtype';
import { definePrimitive } from '../primitive';
import { fmt, sizeOf, stridesOf } from '../shape';
import { stridedCopy } from './strided';
import { showValue } from '../describe';
import { type CanonicalPrecision, canonicalizePrecision, isCanonicalPrecision } from './precision';

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

export const dotGeneral = definePrimitive<DotGeneralParams>({
  name: 'dot_general',
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
