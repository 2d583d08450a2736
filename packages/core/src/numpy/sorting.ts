/**
 * jnp.sort and jnp.argsort on top of the multi-operand `lax.sort`. Sorting is stable and NaN
 * sorts last. `descending` reverses the input, sorts stably and reverses back, so equal elements
 * keep their original order (as jnp does). argsort sorts (x, iota) and returns the second operand.
 */
import type { Array } from '../array';
import { type ArrayLike, asArray, typeOf } from '../convert';
import { resultType } from '../dtype';
import * as lax from '../lax/ops';
import { normalizeAxis } from '../shape';
import { axisArgs } from './axisArgs';
import type { SortOptions } from '../methodArgs';
import { castTo } from './promote';
import { showValue } from '../describe';

export type { SortOptions };

function prep(op: string, x: ArrayLike, axis: number | null | undefined): [Array, number] {
  let a = asArray(x, { op });
  if (axis === null) a = lax.reshape(a, [a.size]);
  if (a.ndim === 0) throw new Error(`${op}: needs an array of rank >= 1; got a scalar`);
  return [a, normalizeAxis(axis ?? -1, a.ndim, op)];
}

const SORT_KEYS = ['axis', 'stable', 'descending'] as const;

/** `jnp.sort(x, axis=-1, {stable, descending})`; the axis may also be an option. */
export function sort(x: ArrayLike, axisOrOptions?: number | null | SortOptions, options?: Omit<SortOptions, 'axis'>): Array {
  const opts = axisArgs<SortOptions>('sort', arguments, 1, SORT_KEYS, true);
  const [a, ax] = prep('sort', x, opts.axis);
  if (!opts.descending) return lax.sort(a, { dimension: ax, isStable: true });
  return lax.rev(lax.sort(lax.rev(a, [ax]), { dimension: ax, isStable: true }), [ax]);
}

/** `jnp.argsort(x, axis=-1, {stable, descending})`: int32 indices that sort x, stably. */
export function argsort(x: ArrayLike, axisOrOptions?: number | null | SortOptions, options?: Omit<SortOptions, 'axis'>): Array {
  const opts = axisArgs<SortOptions>('argsort', arguments, 1, SORT_KEYS, true);
  const [a, ax] = prep('argsort', x, opts.axis);
  const iota = lax.broadcastedIota('int32', a.shape, ax);
  if (!opts.descending) return lax.sort([a, iota], { dimension: ax, isStable: true, numKeys: 1 })[1];
  const [, idx] = lax.sort([lax.rev(a, [ax]), lax.rev(iota, [ax])], { dimension: ax, isStable: true, numKeys: 1 });
  return lax.rev(idx, [ax]);
}

/**
 * `jnp.searchsorted(a, v, {side})`: insertion points of `v` in the sorted 1-D `a`, as int32.
 * Lowered as JAX's 'compare_all' method: count the entries of `a` below (or not above) each value.
 */
export function searchsorted(a: ArrayLike, v: ArrayLike, opts: { side?: 'left' | 'right' } = {}): Array {
  const side = opts.side ?? 'left';
  if (side !== 'left' && side !== 'right') throw new Error(`searchsorted: side must be 'left' or 'right'; got ${showValue(side)}`);
  const [sa, sv] = promotePair(a, v);
  if (sa.ndim !== 1) throw new Error(`searchsorted: a must be 1-D; got shape [${sa.shape.join(',')}]`);
  const n = sa.shape[0];
  const shape = [...sv.shape, n];
  const A = lax.broadcastInDim(sa, shape, [sv.ndim]);
  const V = lax.broadcastInDim(sv, shape, sv.shape.map((_, i) => i));
  const hit = side === 'left' ? lax.lt(A, V) : lax.le(A, V);
  return lax.reduceSum(lax.convertElementType(hit, 'int32'), [sv.ndim]);
}

function promotePair(a: ArrayLike, v: ArrayLike): [Array, Array] {
  const rt = resultType(typeOf(a), typeOf(v));
  return [castTo(a, rt.dtype, rt.weak, 'searchsorted'), castTo(v, rt.dtype, rt.weak, 'searchsorted')];
}
