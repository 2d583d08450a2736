/**
 * `sort` (multi-operand, along one dimension, the first `numKeys` operands compared
 * lexicographically) and `top_k` (largest k along the last dimension, with int32 indices).
 * NaN compares greater than every number, so it sorts to the end as in jnp.sort; as in JAX's
 * comparator, -0 compares equal to +0 and every NaN equal to every other. The kernel
 * (a radix sort of each line's permutation over order-preserving integer keys, radixSort.ts)
 * always sorts stably, which satisfies both `isStable` settings, and moves elements as bits.
 * argsort and sort_key_val lower to sort with an iota operand. Both are defined with their
 * rules (a sort permutes, so tangents follow the permutation) and their lax ops.
 */
import { storageToNumbers } from '../array';
import { allocStorage, bitView } from '../dtype';
import { NON_LINEAR, definePrimitive } from '../primitive';
import { Array } from '../array';
import { type ArrayLike, asArray } from '../convert';
import { bind } from '../trace';
import { takeAlong } from './gatherScatter';
import { broadcastedIota, moveBdim } from './structural';
import { fmt, normalizeAxis, shapesEqual, sizeOf, stridesOf } from '../shape';
import { LineSorter, gatherLine, sortKeys } from './radixSort';

export interface SortParams {
  dimension: number;
  isStable: boolean;
  numKeys: number;
}

/** Total order used by sort: numbers ascending, NaN last. */
export function compareTotal(a: number, b: number): number {
  if (a < b) return -1;
  if (a > b) return 1;
  if (a === b) return 0;
  const an = Number.isNaN(a);
  const bn = Number.isNaN(b);
  return an === bn ? 0 : an ? 1 : -1;
}

export const sortP = definePrimitive<SortParams>({
  name: 'sort',
  rules: (self) => ({
    // Sort an iota along with the operands, then apply the permutation to the tangents.
    jvp: (xs, ts, params) => {
      const { dimension } = params;
      const iota = broadcastedIota('int32', xs[0].shape, dimension);
      const outs = bind(self, [...xs, iota], params);
      const perm = outs[outs.length - 1];
      return [outs.slice(0, xs.length), ts.map((t) => (t === null ? null : takeAlong(t, perm, dimension)))];
    },
    transpose: NON_LINEAR,
    batch: (vals, dims, params, n) => {
      const outs = bind(self, vals.map((v, i) => moveBdim(v, dims[i], 0, n)), { ...params, dimension: params.dimension + 1 });
      return [outs, outs.map(() => 0)];
    },
  }),
  abstractEval(xs, { dimension, numKeys }) {
    if (xs.length === 0) throw new Error('sort: needs at least one operand');
    const [a] = xs;
    for (const x of xs) {
      if (!shapesEqual(x.shape, a.shape)) throw new Error(`sort: operands must have equal shapes; got ${xs.map((v) => fmt(v.shape)).join(', ')}`);
    }
    if (a.shape.length === 0) throw new Error('sort: operands must have rank >= 1; got a scalar');
    if (!Number.isInteger(dimension) || dimension < 0 || dimension >= a.shape.length) {
      throw new RangeError(`sort: dimension ${dimension} out of range for operand ${fmt(a.shape)} (valid 0..${a.shape.length - 1})`);
    }
    if (!Number.isInteger(numKeys) || numKeys < 1 || numKeys > xs.length) {
      throw new RangeError(`sort: num_keys ${numKeys} must be between 1 and the number of operands (${xs.length})`);
    }
    return xs.map((x) => ({ shape: x.shape, dtype: x.dtype, weakType: x.weakType }));
  },
  impl(xs, { dimension, numKeys }) {
    const shape = xs[0].shape;
    const n = shape[dimension];
    const st = stridesOf(shape)[dimension];
    const total = sizeOf(shape);
    if (total === 0) return xs.map((x) => allocStorage(x.dtype, 0));
    // As JAX: -0 equals +0 and NaN (last) equals NaN, and the sort is stable, so equal keys keep
    // their input order.
    const keys = xs.slice(0, numKeys).map((x) => sortKeys(x.data, x.dtype));
    const outs = xs.map((x) => allocStorage(x.dtype, total));
    const srcBits = xs.map((x) => bitView(x.data));
    const dstBits = outs.map(bitView);
    const sorter = new LineSorter(n);
    const lines = total / n;
    for (let line = 0; line < lines; line++) {
      const base = Math.floor(line / st) * n * st + (line % st);
      const perm = sorter.sortLine(keys, base, st);
      for (let j = 0; j < xs.length; j++) gatherLine(srcBits[j], dstBits[j], perm, base, st, n);
    }
    return outs;
  },
});

export const topKP = definePrimitive<{ k: number }>({
  name: 'top_k',
  rules: (self) => ({
    jvp: ([x], [t], params) => {
      const [v, i] = bind(self, [x], params);
      return [[v, i], [takeAlong(t!, i, x.ndim - 1), null]];
    },
    transpose: NON_LINEAR,
    batch: ([x], [d], params, n) => [bind(self, [moveBdim(x, d, 0, n)], params), [0, 0]],
  }),
  abstractEval([x], { k }) {
    if (x.shape.length === 0) throw new Error('top_k: operand must have rank >= 1; got a scalar');
    const n = x.shape[x.shape.length - 1];
    if (!Number.isInteger(k) || k < 0 || k > n) {
      throw new RangeError(`top_k: k ${k} must be between 0 and the last dimension of operand ${fmt(x.shape)} (${n})`);
    }
    const shape = [...x.shape.slice(0, -1), k];
    return [
      { shape, dtype: x.dtype, weakType: x.weakType },
      { shape, dtype: 'int32', weakType: false },
    ];
  },
  impl([x], { k }, [vo]) {
    const n = x.shape[x.shape.length - 1];
    const lines = n === 0 ? 0 : x.data.length / n;
    const vals = storageToNumbers(x.data, x.dtype);
    const outV = allocStorage(vo.dtype, lines * k);
    const outI = new Int32Array(lines * k);
    // Per line, keep the best k seen so far in descending order (NaN largest; a later equal
    // value goes after earlier ones, so ties keep the lower index first): O(n) when k << n.
    const best = new Int32Array(k);
    for (let line = 0; line < lines; line++) {
      const base = line * n;
      let count = 0;
      for (let i = 0; i < n && k > 0; i++) {
        const v = vals[base + i];
        if (count === k && compareTotal(v, vals[base + best[k - 1]]) <= 0) continue;
        let j = count < k ? count++ : k - 1;
        while (j > 0 && compareTotal(v, vals[base + best[j - 1]]) > 0) {
          best[j] = best[j - 1];
          j--;
        }
        best[j] = i;
      }
      for (let i = 0; i < k; i++) {
        outV[line * k + i] = x.data[base + best[i]];
        outI[line * k + i] = best[i];
      }
    }
    return [outV, outI];
  },
});

// ---------------------------------------------------------------------------------------------
// The lax ops (re-exported by ops.ts)

export interface SortOptions {
  /** Default -1 (the last dimension). */
  dimension?: number;
  isStable?: boolean;
  numKeys?: number;
}

/** `lax.sort`: one operand gives one Array; a list gives a list, sorted by the first `numKeys`. */
export function sort(operand: ArrayLike, opts?: SortOptions): Array;
export function sort(operands: readonly Array[], opts?: SortOptions): Array[];
export function sort(operand: ArrayLike | readonly Array[], opts: SortOptions = {}): Array | Array[] {
  const many = globalThis.Array.isArray(operand) && operand.length > 0 && operand.every((o) => o instanceof Array);
  const xs = many ? (operand as Array[]) : [asArray(operand as ArrayLike, { op: 'sort' })];
  if (xs.length === 0) throw new Error('sort: needs at least one operand');
  const rank = xs[0].ndim;
  if (rank === 0) throw new Error('sort: operands must have rank >= 1; got a scalar');
  const dimension = normalizeAxis(opts.dimension ?? -1, rank, 'sort', 'dimension');
  const outs = bind(sortP, xs, { dimension, isStable: opts.isStable ?? true, numKeys: opts.numKeys ?? 1 });
  return many ? outs : outs[0];
}

/** `lax.sort_key_val(keys, values, dimension, isStable)`. */
export function sortKeyVal(keys: ArrayLike, values: ArrayLike, dimension = -1, isStable = true): [Array, Array] {
  const k = asArray(keys, { op: 'sort_key_val' });
  const v = asArray(values, { op: 'sort_key_val' });
  const [a, b] = sort([k, v], { dimension, isStable, numKeys: 1 });
  return [a, b];
}

/** `lax.top_k(x, k)`: the k largest entries along the last axis and their int32 indices. */
export function topK(x: ArrayLike, k: number): [Array, Array] {
  const a = asArray(x, { op: 'top_k' });
  const [v, i] = bind(topKP, [a], { k });
  return [v, i];
}
