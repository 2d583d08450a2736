/**
 * jnp.sort and jnp.argsort on top of the multi-operand `lax.sort`. Sorting is stable and NaN
 * sorts last. `descending` reverses the input, sorts stably and reverses back, so equal elements
 * keep their original order (as jnp does). argsort sorts (x, iota) and returns the second operand.
 */
import type { Array } from '../array';
import { type ArrayLike, asArray } from '../convert';
import * as lax from '../lax/index';
import { normalizeAxis } from '../shape';

export interface SortOptions {
  /** Default -1; null sorts the flattened array. */
  axis?: number | null;
  /** Default true (sorting is always stable here). */
  stable?: boolean;
  descending?: boolean;
}

function prep(op: string, x: ArrayLike, axis: number | null | undefined): [Array, number] {
  let a = asArray(x, { op });
  if (axis === null) a = lax.reshape(a, [a.size]);
  if (a.ndim === 0) throw new Error(`${op}: needs an array of rank >= 1; got a scalar`);
  return [a, normalizeAxis(axis ?? -1, a.ndim, op)];
}

/** `jnp.sort(x, {axis=-1, descending})`. */
export function sort(x: ArrayLike, opts: SortOptions = {}): Array {
  const [a, ax] = prep('sort', x, opts.axis);
  if (!opts.descending) return lax.sort(a, { dimension: ax, isStable: true });
  return lax.rev(lax.sort(lax.rev(a, [ax]), { dimension: ax, isStable: true }), [ax]);
}

/** `jnp.argsort(x, {axis=-1, descending})`: int32 indices that sort x, stably. */
export function argsort(x: ArrayLike, opts: SortOptions = {}): Array {
  const [a, ax] = prep('argsort', x, opts.axis);
  const iota = lax.broadcastedIota('int32', a.shape, ax);
  if (!opts.descending) return lax.sort([a, iota], { dimension: ax, isStable: true, numKeys: 1 })[1];
  const [, idx] = lax.sort([lax.rev(a, [ax]), lax.rev(iota, [ax])], { dimension: ax, isStable: true, numKeys: 1 });
  return lax.rev(idx, [ax]);
}
