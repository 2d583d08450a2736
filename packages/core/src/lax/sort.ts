/**
 * `sort` (multi-operand, along one dimension, the first `numKeys` operands compared
 * lexicographically) and `top_k` (largest k along the last dimension, with int32 indices).
 * NaN compares greater than every number, so it sorts to the end as in jnp.sort; -0 and +0
 * compare equal (JAX orders -0 first; not reproduced). The kernel always sorts stably (JS sort
 * is stable), which satisfies both `isStable` settings. argsort and sort_key_val lower to sort
 * with an iota operand.
 */
import { storageToNumbers } from '../array';
import { allocStorage } from '../dtype';
import { definePrimitive } from '../primitive';
import { fmt, shapesEqual, sizeOf, stridesOf } from '../shape';

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
    const keys = xs.slice(0, numKeys).map((x) => storageToNumbers(x.data, x.dtype));
    const outs = xs.map((x) => allocStorage(x.dtype, total));
    if (total === 0) return outs;
    const perm = new globalThis.Array<number>(n);
    const lines = total / n;
    const cmp = (p: number, q: number): number => {
      for (const k of keys) {
        const c = compareTotal(k[p], k[q]);
        if (c !== 0) return c;
      }
      return 0;
    };
    for (let line = 0; line < lines; line++) {
      // Offset of element 0 of this line: lines are indexed over all dims but `dimension`.
      const outer = Math.floor(line / st);
      const base = outer * n * st + (line % st);
      for (let i = 0; i < n; i++) perm[i] = base + i * st;
      perm.sort(cmp);
      for (let j = 0; j < xs.length; j++) {
        const src = xs[j].data;
        const dst = outs[j];
        for (let i = 0; i < n; i++) dst[base + i * st] = src[perm[i]];
      }
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
    const perm = new globalThis.Array<number>(n);
    for (let line = 0; line < lines; line++) {
      const base = line * n;
      for (let i = 0; i < n; i++) perm[i] = i;
      // Descending, NaN first (largest), ties by lower index (stable).
      perm.sort((p, q) => compareTotal(vals[base + q], vals[base + p]));
      for (let i = 0; i < k; i++) {
        outV[line * k + i] = x.data[base + perm[i]];
        outI[line * k + i] = perm[i];
      }
    }
    return [outV, outI];
  },
});
