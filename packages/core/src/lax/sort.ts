/**
 * `sort` (multi-operand, along one dimension, the first `numKeys` operands compared
 * lexicographically) and `top_k` (largest k along the last dimension, with int32 indices).
 * NaN compares greater than every number, so it sorts to the end as in jnp.sort; as in JAX's
 * comparator, -0 compares equal to +0 and every NaN equal to every other. The kernel
 * (a radix sort of each line's permutation over order-preserving integer keys, radixSort.ts)
 * always sorts stably, which satisfies both `isStable` settings, and moves elements as bits.
 * argsort and sort_key_val lower to sort with an iota operand.
 */
import { storageToNumbers } from '../array';
import { allocStorage, bitView } from '../dtype';
import { definePrimitive } from '../primitive';
import { fmt, shapesEqual, sizeOf, stridesOf } from '../shape';
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

export const sort = definePrimitive<SortParams>({
  name: 'sort',
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

export const topK = definePrimitive<{ k: number }>({
  name: 'top_k',
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
