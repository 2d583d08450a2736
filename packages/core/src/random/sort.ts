/**
 * `randomSortKeyVal`: `lax.sort_key_val(keys, values, dimension, is_stable=True)` as a primitive
 * (`random_sort_key_val`): a stable ascending sort of `keys` along one axis that carries `values`
 * along. JAX's shuffle is rounds of exactly this sort keyed by fresh random bits, and JAX's
 * `argsort` (used by `choice` without replacement) is the same sort with an iota as values. Core's
 * lax has no sort yet; when it does, the callers should switch to it and this file can go.
 * Float keys order as XLA's total order for sorting does for non-NaN values (-0 before +0 is
 * not distinguished here; NaNs go last).
 */
import { storageToNumbers } from '../array';
import { allocStorage } from '../dtype';
import { definePrimitive } from '../primitive';
import { fmt, shapesEqual, stridesOf } from '../shape';
import { bind } from '../trace';
import type { Array } from '../array';

export const randomSortKeyValP = definePrimitive<{ axis: number }>({
  name: 'random_sort_key_val',
  abstractEval([k, v], { axis }) {
    if (!shapesEqual(k.shape, v.shape)) {
      throw new Error(`random_sort_key_val: keys ${k.dtype}${fmt(k.shape)} and values ${v.dtype}${fmt(v.shape)} must have the same shape`);
    }
    if (!Number.isInteger(axis) || axis < 0 || axis >= k.shape.length) {
      throw new RangeError(`random_sort_key_val: axis ${axis} out of range for keys of shape ${fmt(k.shape)}`);
    }
    return [k, v];
  },
  impl([k, v], { axis }, [ko, vo]) {
    const keys = storageToNumbers(k.data, k.dtype);
    const n = k.data.length;
    const len = k.shape[axis];
    const stride = stridesOf(k.shape)[axis];
    const outK = allocStorage(ko.dtype, n);
    const outV = allocStorage(vo.dtype, n);
    const lines = len === 0 ? 0 : n / len;
    const order = new Int32Array(len);
    const lineKeys = new Float64Array(len);
    for (let b = 0; b < lines; b++) {
      const base = Math.floor(b / stride) * len * stride + (b % stride);
      for (let j = 0; j < len; j++) {
        order[j] = j;
        const key = keys[base + j * stride];
        lineKeys[j] = Number.isNaN(key) ? Infinity : key;
      }
      // Array.prototype.sort is stable; ties keep their original order, as is_stable=True does.
      const sorted = globalThis.Array.from(order).sort((p, q) => {
        const d = lineKeys[p] - lineKeys[q];
        if (d !== 0 && !Number.isNaN(d)) return d;
        const nanP = Number.isNaN(keys[base + p * stride]) ? 1 : 0;
        const nanQ = Number.isNaN(keys[base + q * stride]) ? 1 : 0;
        return nanP - nanQ;
      });
      for (let j = 0; j < len; j++) {
        const src = base + sorted[j] * stride;
        const dst = base + j * stride;
        outK[dst] = k.data[src];
        outV[dst] = v.data[src];
      }
    }
    return [outK, outV];
  },
});

/** Stable ascending sort of `keys` along `axis`, permuting `values` the same way. */
export function randomSortKeyVal(keys: Array, values: Array, axis: number): [Array, Array] {
  const [k, v] = bind(randomSortKeyValP, [keys, values], { axis });
  return [k, v];
}
