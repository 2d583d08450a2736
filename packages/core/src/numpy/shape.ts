/** jax.numpy shape manipulation: reshape, transpose, swapaxes, moveaxis, expandDims, squeeze, ravel, broadcastTo, broadcastArrays, atleast*. */
import type { Array } from '../array';
import { type ArrayLike, asArray } from '../convert';
import * as lax from '../lax/ops';
import { broadcastShapes, fmt, normalizeAxes, normalizeAxis, sizeOf } from '../shape';
import { broadcastTo as broadcastToShape } from './promote';
import { showValue } from '../describe';

/** `jnp.reshape(x, shape)`; one dimension may be -1. */
export function reshape(x: ArrayLike, shape: number | readonly number[]): Array {
  const a = asArray(x, { op: 'reshape' });
  const s = typeof shape === 'number' ? [shape] : shape.slice();
  const unknown = s.filter((d) => d === -1).length;
  if (unknown > 1) throw new Error(`reshape: can only specify one unknown dimension; got ${fmt(s)}`);
  for (const d of s) {
    if (!Number.isInteger(d) || d < -1) throw new TypeError(`reshape: invalid dimension ${d} in ${fmt(s)}`);
  }
  if (unknown === 1) {
    const known = sizeOf(s.filter((d) => d !== -1));
    if (known === 0 || a.size % known !== 0) throw new Error(`reshape: cannot reshape ${fmt(a.shape)} (size ${a.size}) to ${fmt(s)}`);
    s[s.indexOf(-1)] = a.size / known;
  }
  if (sizeOf(s) !== a.size) throw new Error(`reshape: cannot reshape ${fmt(a.shape)} (size ${a.size}) to ${fmt(s)} (size ${sizeOf(s)})`);
  return lax.reshape(a, s);
}

export function ravel(x: ArrayLike): Array {
  const a = asArray(x, { op: 'ravel' });
  return lax.reshape(a, [a.size]);
}

/** `jnp.transpose(x, axes)`; reverses the axes when `axes` is omitted. */
export function transpose(x: ArrayLike, axes?: readonly number[] | null): Array {
  const a = asArray(x, { op: 'transpose' });
  const perm = axes ?? a.shape.map((_, i) => a.ndim - 1 - i);
  if (perm.length !== a.ndim) throw new Error(`transpose: axes ${showValue(axes)} do not match an array of rank ${a.ndim}`);
  return lax.transpose(a, perm);
}

export function swapaxes(x: ArrayLike, axis1: number, axis2: number): Array {
  const a = asArray(x, { op: 'swapaxes' });
  const i = normalizeAxis(axis1, a.ndim, 'swapaxes', 'axis1');
  const j = normalizeAxis(axis2, a.ndim, 'swapaxes', 'axis2');
  const perm = a.shape.map((_, k) => k);
  perm[i] = j;
  perm[j] = i;
  return lax.transpose(a, perm);
}

export function moveaxis(x: ArrayLike, source: number | readonly number[], destination: number | readonly number[]): Array {
  const a = asArray(x, { op: 'moveaxis' });
  const src = (typeof source === 'number' ? [source] : source).map((s) => normalizeAxis(s, a.ndim, 'moveaxis', 'source'));
  const dst = (typeof destination === 'number' ? [destination] : destination).map((s) => normalizeAxis(s, a.ndim, 'moveaxis', 'destination'));
  if (src.length !== dst.length) throw new Error(`moveaxis: source ${showValue(source)} and destination ${showValue(destination)} differ in length`);
  const rest = a.shape.map((_, i) => i).filter((i) => !src.includes(i));
  const perm = new globalThis.Array<number>(a.ndim);
  const pairs = src.map((s, i) => [dst[i], s] as const).sort((p, q) => p[0] - q[0]);
  let r = 0;
  for (let i = 0, k = 0; i < a.ndim; i++) {
    if (k < pairs.length && pairs[k][0] === i) perm[i] = pairs[k++][1];
    else perm[i] = rest[r++];
  }
  return lax.transpose(a, perm);
}

export function expandDims(x: ArrayLike, axis: number | readonly number[]): Array {
  return lax.expandDims(x, typeof axis === 'number' ? [axis] : axis);
}

export function squeeze(x: ArrayLike, axis?: number | readonly number[] | null): Array {
  const a = asArray(x, { op: 'squeeze' });
  const axes = axis === undefined || axis === null ? a.shape.flatMap((d, i) => (d === 1 ? [i] : [])) : normalizeAxes(axis, a.ndim, 'squeeze');
  return axes.length ? lax.squeeze(a, axes) : a;
}

export function broadcastTo(x: ArrayLike, shape: readonly number[]): Array {
  return broadcastToShape(asArray(x, { op: 'broadcast_to' }), shape);
}

export function broadcastArrays(...xs: ArrayLike[]): Array[] {
  const arrays = xs.map((x) => asArray(x, { op: 'broadcast_arrays' }));
  const shape = broadcastShapes('broadcast_arrays', ...arrays.map((a) => a.shape));
  return arrays.map((a) => broadcastToShape(a, shape, 'broadcast_arrays'));
}

export function atleast1d(x: ArrayLike): Array {
  const a = asArray(x, { op: 'atleast_1d' });
  return a.ndim >= 1 ? a : lax.reshape(a, [1]);
}

export function atleast2d(x: ArrayLike): Array {
  const a = atleast1d(x);
  return a.ndim >= 2 ? a : lax.reshape(a, [1, ...a.shape]);
}

export function shape(x: ArrayLike): readonly number[] {
  return asArray(x, { op: 'shape' }).shape;
}
export function ndim(x: ArrayLike): number {
  return asArray(x, { op: 'ndim' }).ndim;
}
export function size(x: ArrayLike): number {
  return asArray(x, { op: 'size' }).size;
}
