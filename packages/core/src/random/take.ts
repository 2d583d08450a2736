/**
 * `randomTake`: `jnp.take(x, indices, axis)` with in-range int32 indices, as a primitive
 * (`random_take`). `random.permutation` and `random.choice` need a gather, and core's lax has no
 * gather yet; this narrow one keeps those functions traceable. When lax grows `gather`, the
 * callers here should switch to it and this file can go.
 */
import { allocStorage } from '../dtype';
import { definePrimitive } from '../primitive';
import { fmt, sizeOf } from '../shape';
import { bind1 } from '../trace';
import type { Array } from '../array';

export const randomTakeP = definePrimitive<{ axis: number }>({
  name: 'random_take',
  abstractEval([x, ind], { axis }) {
    if (!Number.isInteger(axis) || axis < 0 || axis >= x.shape.length) {
      throw new RangeError(`random_take: axis ${axis} out of range for operand ${x.dtype}${fmt(x.shape)}`);
    }
    if (ind.dtype !== 'int32') throw new TypeError(`random_take: indices must be int32; got ${ind.dtype}`);
    const shape = [...x.shape.slice(0, axis), ...ind.shape, ...x.shape.slice(axis + 1)];
    return [{ shape, dtype: x.dtype, weakType: x.weakType }];
  },
  impl([x, ind], { axis }, [o]) {
    const outer = sizeOf(x.shape.slice(0, axis));
    const len = x.shape[axis];
    const inner = sizeOf(x.shape.slice(axis + 1));
    const idx = ind.data as Int32Array;
    const k = idx.length;
    const out = allocStorage(o.dtype, outer * k * inner);
    const src = x.data;
    for (let a = 0; a < outer; a++) {
      for (let j = 0; j < k; j++) {
        // Indices come from random's own arithmetic and are in range; clamp defensively.
        const i = Math.min(Math.max(idx[j], 0), len - 1);
        const s = (a * len + i) * inner;
        const d = (a * k + j) * inner;
        for (let t = 0; t < inner; t++) out[d + t] = src[s + t];
      }
    }
    return [out];
  },
});

/** `take(x, indices, axis)` for int32 indices known to lie in `[0, x.shape[axis])`. */
export function randomTake(x: Array, indices: Array, axis: number): Array {
  return bind1(randomTakeP, [x, indices], { axis });
}
