/**
 * Joining and splitting arrays: concatenate, stack, hstack, vstack, dstack, columnStack, split,
 * arraySplit, hsplit, vsplit. Joins promote dtypes as jnp does and lower to `lax.concatenate`;
 * splits lower to static `lax.slice`s.
 */
import type { Array } from '../array';
import { type ArrayLike, asArray, typeOf } from '../convert';
import { resultType } from '../dtype';
import * as lax from '../lax/ops';
import { fmt, normalizeAxis } from '../shape';
import { castTo } from './promote';
import { atleast1d, atleast2d } from './shape';
import { showValue } from '../describe';

function promoteAll(op: string, xs: readonly ArrayLike[]): Array[] {
  if (!globalThis.Array.isArray(xs) || xs.length === 0) throw new Error(`${op}: needs a non-empty list of arrays`);
  const rt = resultType(...xs.map(typeOf));
  return xs.map((x) => castTo(x, rt.dtype, rt.weak, op));
}

/** `jnp.concatenate(arrays, axis=0)`; `axis: null` flattens first. */
export function concatenate(arrays: readonly ArrayLike[], axis: number | null = 0): Array {
  let xs = promoteAll('concatenate', arrays);
  if (axis === null) {
    xs = xs.map((a) => lax.reshape(a, [a.size]));
    axis = 0;
  }
  const rank = xs[0].ndim;
  if (rank === 0) throw new Error('concatenate: zero-dimensional arrays cannot be concatenated');
  const ax = normalizeAxis(axis, rank, 'concatenate');
  for (const [i, a] of xs.entries()) {
    if (a.ndim !== rank) {
      throw new Error(`concatenate: all arrays must have the same rank; array 0 has shape ${fmt(xs[0].shape)} but array ${i} has shape ${fmt(a.shape)}`);
    }
    a.shape.forEach((d, j) => {
      if (j !== ax && d !== xs[0].shape[j]) {
        throw new Error(`concatenate: array ${i} of shape ${fmt(a.shape)} does not match array 0 of shape ${fmt(xs[0].shape)} in dimension ${j} (only axis ${ax} may differ)`);
      }
    });
  }
  return lax.concatenate(xs, ax);
}

/** `jnp.stack(arrays, axis=0)`: joins along a new axis. */
export function stack(arrays: readonly ArrayLike[], axis = 0): Array {
  const xs = promoteAll('stack', arrays);
  const shape = xs[0].shape;
  xs.forEach((a, i) => {
    if (a.ndim !== shape.length || a.shape.some((d, j) => d !== shape[j])) {
      throw new Error(`stack: all input arrays must have the same shape; array 0 has ${fmt(shape)}, array ${i} has ${fmt(a.shape)}`);
    }
  });
  const ax = normalizeAxis(axis, shape.length + 1, 'stack');
  return lax.concatenate(xs.map((a) => lax.expandDims(a, [ax])), ax);
}

/** `jnp.hstack`: along axis 1, or axis 0 for 1-D inputs. */
export function hstack(arrays: readonly ArrayLike[]): Array {
  const xs = promoteAll('hstack', arrays).map(atleast1d);
  return concatenate(xs, xs[0].ndim === 1 ? 0 : 1);
}

/** `jnp.vstack`: along axis 0 after making inputs at least 2-D. */
export function vstack(arrays: readonly ArrayLike[]): Array {
  return concatenate(promoteAll('vstack', arrays).map(atleast2d), 0);
}

/** `jnp.dstack`: along axis 2 after making inputs at least 3-D. */
export function dstack(arrays: readonly ArrayLike[]): Array {
  const xs = promoteAll('dstack', arrays).map((a) => (a.ndim === 0 ? lax.reshape(a, [1, 1, 1]) : a.ndim === 1 ? lax.reshape(a, [1, a.shape[0], 1]) : a.ndim === 2 ? lax.reshape(a, [...a.shape, 1]) : a));
  return concatenate(xs, 2);
}

/** `jnp.column_stack`: 1-D inputs become columns. */
export function columnStack(arrays: readonly ArrayLike[]): Array {
  const xs = promoteAll('column_stack', arrays).map((a) => (a.ndim < 2 ? lax.reshape(a, [a.size, 1]) : a));
  return concatenate(xs, 1);
}

function splitAt(a: Array, ax: number, bounds: number[]): Array[] {
  const n = a.shape[ax];
  const out: Array[] = [];
  for (let i = 0; i + 1 < bounds.length; i++) {
    const lo = Math.min(Math.max(bounds[i], 0), n);
    const hi = Math.max(Math.min(bounds[i + 1], n), lo);
    out.push(lax.sliceInDim(a, lo, hi, 1, ax));
  }
  return out;
}

function splitImpl(op: string, x: ArrayLike, sections: number | readonly number[], axis: number, even: boolean): Array[] {
  const a = asArray(x, { op });
  if (a.ndim === 0) throw new Error(`${op}: cannot split a 0-d array`);
  const ax = normalizeAxis(axis, a.ndim, op);
  const n = a.shape[ax];
  if (typeof sections === 'number') {
    if (!Number.isInteger(sections) || sections <= 0) throw new RangeError(`${op}: number of sections must be a positive integer; got ${sections}`);
    if (even && n % sections !== 0) {
      throw new Error(`${op}: array split does not result in an equal division: axis ${ax} of size ${n} into ${sections} sections (use arraySplit for unequal parts)`);
    }
    const base = Math.floor(n / sections);
    const extra = n % sections;
    const bounds = [0];
    for (let i = 0; i < sections; i++) bounds.push(bounds[i] + base + (i < extra ? 1 : 0));
    return splitAt(a, ax, bounds);
  }
  if (!globalThis.Array.isArray(sections) || !sections.every(Number.isInteger)) {
    throw new TypeError(`${op}: indices_or_sections must be an integer or a list of integers; got ${showValue(sections)}`);
  }
  const idx = sections.map((i) => (i < 0 ? i + n : i));
  return splitAt(a, ax, [0, ...idx, n]);
}

/** `jnp.split(x, sectionsOrIndices, axis=0)`: equal sections (must divide) or split points. */
export function split(x: ArrayLike, indicesOrSections: number | readonly number[], axis = 0): Array[] {
  return splitImpl('split', x, indicesOrSections, axis, true);
}

/** `jnp.array_split`: like split, but sections need not divide the axis (earlier parts get one more). */
export function arraySplit(x: ArrayLike, indicesOrSections: number | readonly number[], axis = 0): Array[] {
  return splitImpl('array_split', x, indicesOrSections, axis, false);
}

export function hsplit(x: ArrayLike, indicesOrSections: number | readonly number[]): Array[] {
  const a = asArray(x, { op: 'hsplit' });
  return splitImpl('hsplit', a, indicesOrSections, a.ndim === 1 ? 0 : 1, true);
}

export function vsplit(x: ArrayLike, indicesOrSections: number | readonly number[]): Array[] {
  const a = asArray(x, { op: 'vsplit' });
  if (a.ndim < 2) throw new Error(`vsplit: needs an array of rank >= 2; got ${fmt(a.shape)}`);
  return splitImpl('vsplit', a, indicesOrSections, 0, true);
}
