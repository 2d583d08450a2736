/**
 * Rearranging elements: flip, roll, tile, repeat, take and takeAlongAxis. flip is `rev`, roll
 * is two slices and a concatenate, tile and scalar repeat are broadcasts and reshapes; per-element
 * repeat, take and takeAlongAxis are gathers (takeAlongAxis uses gather's batching dims).
 */
import { Array, numbersToStorage } from '../array';
import { type ArrayLike, asArray } from '../convert';
import { type DType, isInteger } from '../dtype';
import { defaultFill } from '../lax/gather';
import * as lax from '../lax/ops';
import type { GatherScatterMode } from '../lax/ops';
import { broadcastShapes, fmt, normalizeAxes, normalizeAxis, sizeOf } from '../shape';
import { requireConcrete } from './nonzero';
import { concatenate } from './joining';
import { searchsorted } from './sorting';
import { broadcastTo } from './promote';
import { showValue } from '../describe';
import { axisArgs } from './axisArgs';

/** `jnp.flip(x, axis?)`: reverses the given axes (all when omitted). */
export function flip(x: ArrayLike, axis?: number | readonly number[] | null): Array {
  const a = asArray(x, { op: 'flip' });
  const axes = normalizeAxes(axis, a.ndim, 'flip');
  return axes.length ? lax.rev(a, axes) : a;
}

export const fliplr = (x: ArrayLike): Array => flip(x, 1);
export const flipud = (x: ArrayLike): Array => flip(x, 0);

/** `jnp.roll(x, shift, axis?)`: circular shift; without `axis` the flattened array is rolled. */
export function roll(x: ArrayLike, shift: number | readonly number[], axis?: number | readonly number[] | null): Array {
  const a = asArray(x, { op: 'roll' });
  if (axis === undefined || axis === null) {
    if (typeof shift !== 'number') throw new Error(`roll: a list of shifts ${showValue(shift)} needs a matching list of axes`);
    return lax.reshape(roll(lax.reshape(a, [a.size]), shift, 0), a.shape);
  }
  const axes = (typeof axis === 'number' ? [axis] : axis).map((d) => normalizeAxis(d, a.ndim, 'roll'));
  const shifts = typeof shift === 'number' ? axes.map(() => shift) : shift;
  if (shifts.length !== axes.length) {
    throw new Error(`roll: shift ${showValue(shift)} and axis ${showValue(axis)} must have the same length`);
  }
  let out = a;
  axes.forEach((ax, i) => {
    const n = out.shape[ax];
    if (!Number.isInteger(shifts[i])) throw new TypeError(`roll: shift must be an integer; got ${shifts[i]}`);
    if (n === 0) return;
    const k = ((shifts[i] % n) + n) % n;
    if (k === 0) return;
    out = lax.concatenate([lax.sliceInDim(out, n - k, n, 1, ax), lax.sliceInDim(out, 0, n - k, 1, ax)], ax);
  });
  return out;
}

/** `jnp.tile(x, reps)`. */
export function tile(x: ArrayLike, reps: number | readonly number[]): Array {
  let a = asArray(x, { op: 'tile' });
  const r = typeof reps === 'number' ? [reps] : [...reps];
  if (!r.every((v) => Number.isInteger(v) && v >= 0)) throw new TypeError(`tile: reps must be non-negative integers; got ${showValue(reps)}`);
  const rank = Math.max(r.length, a.ndim);
  while (r.length < rank) r.unshift(1);
  if (a.ndim < rank) a = lax.reshape(a, [...new globalThis.Array<number>(rank - a.ndim).fill(1), ...a.shape]);
  // [d0, d1, ...] -> broadcast to [r0, d0, r1, d1, ...] -> reshape to [r0*d0, r1*d1, ...].
  const inter = a.shape.flatMap((d, i) => [r[i], d]);
  const b = lax.broadcastInDim(a, inter, a.shape.map((_, i) => 2 * i + 1));
  return lax.reshape(b, a.shape.map((d, i) => d * r[i]));
}

/**
 * `jnp.repeat(x, repeats, axis?, {totalRepeatLength?})`: a scalar count repeats every element; a
 * list (or integer Array) gives one count per element along `axis`. Without `axis` the input is
 * flattened. An Array of counts must be concrete unless `totalRepeatLength` fixes the output length.
 */
export function repeat(x: ArrayLike, repeats: number | readonly number[] | Array, axis: number | null = null, opts: { totalRepeatLength?: number } = {}): Array {
  let a = asArray(x, { op: 'repeat' });
  if (axis === null) {
    a = lax.reshape(a, [a.size]);
    axis = 0;
  }
  if (a.ndim === 0) a = lax.reshape(a, [1]);
  const ax = normalizeAxis(axis, a.ndim, 'repeat');
  const n = a.shape[ax];
  if (opts.totalRepeatLength !== undefined) return repeatTraceable(a, repeats, ax, opts.totalRepeatLength);
  let counts: number[];
  if (typeof repeats === 'number') counts = [repeats];
  else if (globalThis.Array.isArray(repeats)) counts = [...repeats];
  else {
    const r = repeats as Array;
    requireConcrete(r, 'repeat', 'pass the repeats as JS numbers');
    counts = globalThis.Array.from(r.dataSync());
  }
  if (!counts.every((c) => Number.isInteger(c) && c >= 0)) throw new TypeError(`repeat: repeats must be non-negative integers; got ${showValue(counts)}`);
  if (counts.length === 1) {
    const c = counts[0];
    const shape = a.shape.slice();
    shape.splice(ax + 1, 0, c);
    const dims = a.shape.map((_, i) => (i <= ax ? i : i + 1));
    const b = lax.broadcastInDim(a, shape, dims);
    const out = a.shape.slice();
    out[ax] = n * c;
    return lax.reshape(b, out);
  }
  if (counts.length !== n) {
    throw new Error(`repeat: repeats has ${counts.length} entries but axis ${ax} of array ${fmt(a.shape)} has ${n} elements`);
  }
  const idx: number[] = [];
  counts.forEach((c, i) => {
    for (let k = 0; k < c; k++) idx.push(i);
  });
  return take(a, asArray(idx.length ? idx : [], { dtype: 'int32', op: 'repeat' }), { axis: ax, mode: 'promise_in_bounds' });
}

/**
 * repeat with a static output length (traceable counts): output j reads element
 * searchsorted(cumsum(repeats), j, 'right'), clipped, so a short total truncates and a long
 * total repeats the last element, as jnp.repeat(total_repeat_length=...) does.
 */
function repeatTraceable(a: Array, repeats: number | readonly number[] | Array, ax: number, total: number): Array {
  if (!Number.isInteger(total) || total < 0) throw new RangeError(`repeat: totalRepeatLength must be a non-negative integer; got ${total}`);
  const n = a.shape[ax];
  let r = asArray(repeats as ArrayLike, { op: 'repeat' });
  if (!isInteger(r.dtype)) throw new TypeError(`repeat: repeats must be integers; got ${r.dtype}`);
  r = lax.convertElementType(r, 'int32');
  if (r.ndim === 0) r = lax.broadcastInDim(r, [n], []);
  if (r.ndim !== 1 || r.shape[0] !== n) {
    throw new Error(`repeat: repeats of shape ${fmt(r.shape)} must be a scalar or have one entry per element of axis ${ax} (${n})`);
  }
  if (n === 0) {
    if (total > 0) throw new Error(`repeat: cannot fill totalRepeatLength ${total} from the empty axis ${ax} of array ${fmt(a.shape)}`);
    return a;
  }
  const idx = searchsorted(lax.cumsum(r, 0), lax.iota('int32', total), { side: 'right' });
  return take(a, idx, { axis: ax, mode: 'clip' });
}

export type TakeMode = 'fill' | 'clip' | 'wrap' | 'promise_in_bounds';

export interface TakeOptions {
  /** null or omitted: take from the flattened array. */
  axis?: number | null;
  /** Default 'fill' (as jnp.take): out-of-bounds indices give `fillValue` (NaN for floats). */
  mode?: TakeMode;
  fillValue?: number | null;
}

function indexArray(op: string, indices: ArrayLike): Array {
  let i = asArray(indices, { op });
  if (i.size === 0 && i.dtype === 'float32' && !(indices as Array).dtype) i = lax.convertElementType(i, 'int32');
  if (!isInteger(i.dtype)) throw new TypeError(`${op}: indices must have an integer dtype; got ${i.dtype}`);
  return i.dtype === 'int32' ? i : lax.convertElementType(i, 'int32');
}

/** Applies a take mode's index preprocessing; returns the gather mode to use. */
function prepare(op: string, i: Array, n: number, mode: TakeMode): [Array, GatherScatterMode] {
  switch (mode) {
    case 'fill':
      return [lax.select(lax.lt(i, 0), lax.add(i, n), i), 'fill'];
    case 'clip':
      return [i, 'clip'];
    case 'promise_in_bounds':
      return [i, 'promise_in_bounds'];
    case 'wrap': {
      if (n === 0) return [i, 'fill'];
      const r = lax.rem(i, n);
      return [lax.select(lax.lt(r, 0), lax.add(r, n), r), 'promise_in_bounds'];
    }
    default:
      throw new Error(`${op}: mode must be 'fill', 'clip', 'wrap' or 'promise_in_bounds'; got ${showValue(mode)}`);
  }
}

/** An array of the gather 'fill' value (what every out-of-bounds read returns). */
function filled(shape: readonly number[], dtype: DType, fillValue: number | null | undefined): Array {
  const v = Array._fromStorage(numbersToStorage([fillValue ?? defaultFill(dtype)], dtype), [], dtype);
  return lax.broadcastInDim(v, shape, []);
}

/** `jnp.take(a, indices, axis?, {mode, fillValue})`; the axis may also be an option. */
export function take(a: ArrayLike, indices: ArrayLike, axisOrOptions?: number | null | TakeOptions, options?: Omit<TakeOptions, 'axis'>): Array {
  const opts = axisArgs<TakeOptions>('take', arguments, 2, ['axis', 'mode', 'fillValue'], true);
  let x = asArray(a, { op: 'take' });
  let axis = opts.axis ?? null;
  if (axis === null) {
    x = lax.reshape(x, [x.size]);
    axis = 0;
  }
  const ax = normalizeAxis(axis, x.ndim, 'take');
  const n = x.shape[ax];
  const [i, gmode] = prepare('take', indexArray('take', indices), n, opts.mode ?? 'fill');
  const k = i.ndim;
  const sliceSizes = x.shape.map((d, j) => (j === ax ? 1 : d));
  const offsetDims = x.shape.map((_, j) => j).filter((j) => j !== ax).map((j) => (j < ax ? j : j - 1 + k));
  if (n === 0) {
    if (i.size > 0 && gmode !== 'fill') throw new RangeError(`take: cannot take from the empty axis ${ax} of array ${fmt(x.shape)} with mode ${opts.mode}`);
    return filled([...x.shape.slice(0, ax), ...i.shape, ...x.shape.slice(ax + 1)], x.dtype, opts.fillValue);
  }
  return lax.gather(x, lax.reshape(i, [...i.shape, 1]), { offsetDims, collapsedSliceDims: [ax], startIndexMap: [ax] }, sliceSizes, {
    mode: gmode,
    fillValue: opts.fillValue ?? null,
  });
}

/** `jnp.take_along_axis(arr, indices, axis, {mode, fillValue})`: indices broadcast against arr off `axis`. */
export function takeAlongAxis(arr: ArrayLike, indices: ArrayLike, axis: number | null, opts: Omit<TakeOptions, 'axis'> = {}): Array {
  let x = asArray(arr, { op: 'take_along_axis' });
  let i = indexArray('take_along_axis', indices);
  if (axis === null) {
    x = lax.reshape(x, [x.size]);
    i = lax.reshape(i, [i.size]);
    axis = 0;
  }
  if (i.ndim !== x.ndim) {
    throw new Error(`take_along_axis: indices ${fmt(i.shape)} and arr ${fmt(x.shape)} must have the same number of dimensions`);
  }
  const ax = normalizeAxis(axis, x.ndim, 'take_along_axis');
  const other = x.shape.map((_, d) => d).filter((d) => d !== ax);
  const bshape = broadcastShapes('take_along_axis', x.shape.map((d, j) => (j === ax ? 1 : d)), i.shape.map((d, j) => (j === ax ? 1 : d)));
  const xs = x.shape.slice();
  const is = i.shape.slice();
  for (const d of other) {
    xs[d] = bshape[d];
    is[d] = bshape[d];
  }
  x = broadcastTo(x, xs, 'take_along_axis');
  i = broadcastTo(i, is, 'take_along_axis');
  const n = x.shape[ax];
  const [j, gmode] = prepare('take_along_axis', i, n, opts.mode ?? 'fill');
  if (n === 0) {
    if (sizeOf(is) > 0 && gmode !== 'fill') throw new RangeError(`take_along_axis: axis ${ax} of arr ${fmt(x.shape)} is empty`);
    return filled(is, x.dtype, opts.fillValue);
  }
  return lax.gather(
    x,
    lax.reshape(j, [...is, 1]),
    { offsetDims: [], collapsedSliceDims: [ax], startIndexMap: [ax], operandBatchingDims: other, startIndicesBatchingDims: other },
    x.shape.map(() => 1),
    { mode: gmode, fillValue: opts.fillValue ?? null },
  );
}

/** `jnp.rot90(x, k=1, axes=[0, 1])`: rotates by 90 degrees k times in the plane of `axes`. */
export function rot90(x: ArrayLike, k = 1, axes: readonly [number, number] = [0, 1]): Array {
  const a = asArray(x, { op: 'rot90' });
  if (a.ndim < 2) throw new Error(`rot90: needs an array of rank >= 2; got ${fmt(a.shape)}`);
  if (!Number.isInteger(k)) throw new TypeError(`rot90: k must be an integer; got ${k}`);
  const a0 = normalizeAxis(axes[0], a.ndim, 'rot90', 'axes[0]');
  const a1 = normalizeAxis(axes[1], a.ndim, 'rot90', 'axes[1]');
  if (a0 === a1) throw new Error(`rot90: axes must be different; got ${showValue(axes)}`);
  const kk = ((k % 4) + 4) % 4;
  const perm = a.shape.map((_, i) => (i === a0 ? a1 : i === a1 ? a0 : i));
  if (kk === 0) return a;
  if (kk === 2) return lax.rev(a, [a0, a1]);
  if (kk === 1) return lax.transpose(lax.rev(a, [a1]), perm);
  return lax.rev(lax.transpose(a, perm), [a1]);
}

/** `jnp.append(arr, values, axis=null)`: concatenation; without `axis` both are flattened. */
export function append(arr: ArrayLike, values: ArrayLike, axis: number | null = null): Array {
  return concatenate([arr, values], axis);
}
