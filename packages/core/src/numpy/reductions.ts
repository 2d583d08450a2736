/** jax.numpy reductions with `axis` / `keepdims`: sum, prod, max, min, mean, var, std, argmax, argmin, all, any, cumsum. */
import type { Array } from '../array';
import { type ArrayLike, asArray } from '../convert';
import { type DType, checkDType, is16BitFloat, isFloat, isInteger } from '../dtype';
import * as lax from '../lax/ops';
import { normalizeAxes, normalizeAxis } from '../shape';
import type { ArgOptions, AxisArg, AxisArgs as Args, CumOptions, ExtremumOptions, ReduceOptions, VarOptions } from '../methodArgs';
import { axisArgs } from './axisArgs';

export type Axis = AxisArg;
export type { ReduceOptions };
const REDUCE_KEYS = ['axis', 'keepdims', 'dtype'] as const;

function keep(x: Array, out: Array, axes: number[], keepdims: boolean | undefined): Array {
  if (!keepdims) return out;
  const shape = x.shape.map((d, i) => (axes.includes(i) ? 1 : d));
  return lax.reshape(out, shape);
}

/** sum/prod of bool or small ints accumulate in int32, as jnp does; bf16/f16 accumulate in f32. */
function accumType(x: Array, dtype: DType | undefined, op: string): { acc: DType; out: DType } {
  if (dtype) checkDType(dtype, op);
  if (dtype) return { acc: is16BitFloat(dtype) ? 'float32' : dtype, out: dtype };
  if (x.dtype === 'bool' || x.dtype === 'int8') return { acc: 'int32', out: 'int32' };
  if (x.dtype === 'uint8') return { acc: 'uint32', out: 'uint32' };
  if (is16BitFloat(x.dtype)) return { acc: 'float32', out: x.dtype };
  return { acc: x.dtype, out: x.dtype };
}

function sumLike(name: string, prim: typeof lax.reduceSum) {
  return function (x: ArrayLike, ..._: Args<ReduceOptions>): Array {
    const opts = axisArgs<ReduceOptions>(name, arguments, 1, REDUCE_KEYS);
    const a = asArray(x, { op: name });
    const axes = normalizeAxes(opts.axis, a.ndim, name);
    const { acc, out } = accumType(a, opts.dtype, name);
    const r = prim(lax.convertElementType(a, acc, a.weakType), axes);
    return keep(a, lax.convertElementType(r, out, a.weakType && !opts.dtype), axes, opts.keepdims);
  };
}

export const sum = sumLike('sum', lax.reduceSum);
export const prod = sumLike('prod', lax.reduceProd);

function extremum(name: string, prim: typeof lax.reduceMax) {
  return function (x: ArrayLike, ..._: Args<ExtremumOptions>): Array {
    const opts = axisArgs<ExtremumOptions>(name, arguments, 1, ['axis', 'keepdims']);
    const a = asArray(x, { op: name });
    const axes = normalizeAxes(opts.axis, a.ndim, name);
    for (const ax of axes) {
      if (a.shape[ax] === 0) throw new Error(`${name}: zero-size array along axis ${ax} has no identity (shape [${a.shape.join(',')}])`);
    }
    return keep(a, prim(a, axes), axes, opts.keepdims);
  };
}
export const max = extremum('max', lax.reduceMax);
export const min = extremum('min', lax.reduceMin);
export const amax = max;
export const amin = min;

export function all(x: ArrayLike, ..._: Args<ExtremumOptions>): Array {
  const opts = axisArgs<ExtremumOptions>('all', arguments, 1, ['axis', 'keepdims']);
  const a = asArray(x, { op: 'all' });
  const axes = normalizeAxes(opts.axis, a.ndim, 'all');
  const b = a.dtype === 'bool' ? a : lax.ne(a, 0);
  return keep(a, lax.reduceAnd(b, axes), axes, opts.keepdims);
}

export function any(x: ArrayLike, ..._: Args<ExtremumOptions>): Array {
  const opts = axisArgs<ExtremumOptions>('any', arguments, 1, ['axis', 'keepdims']);
  const a = asArray(x, { op: 'any' });
  const axes = normalizeAxes(opts.axis, a.ndim, 'any');
  const b = a.dtype === 'bool' ? a : lax.ne(a, 0);
  return keep(a, lax.reduceOr(b, axes), axes, opts.keepdims);
}

function countOf(a: Array, axes: number[]): number {
  return axes.reduce((n, ax) => n * a.shape[ax], 1);
}

export function mean(x: ArrayLike, ..._: Args<ReduceOptions>): Array {
  const opts = axisArgs<ReduceOptions>('mean', arguments, 1, REDUCE_KEYS);
  const a = asArray(x, { op: 'mean' });
  const axes = normalizeAxes(opts.axis, a.ndim, 'mean');
  const outDtype = opts.dtype ?? (isFloat(a.dtype) ? a.dtype : 'float32');
  const acc: DType = is16BitFloat(outDtype) ? 'float32' : outDtype;
  const s = lax.reduceSum(lax.convertElementType(a, acc, a.weakType), axes);
  const m = lax.div(s, countOf(a, axes));
  return keep(a, lax.convertElementType(m, outDtype, a.weakType && !opts.dtype), axes, opts.keepdims);
}

export function variance(x: ArrayLike, ..._: Args<VarOptions>): Array {
  const opts = axisArgs<VarOptions>('var', arguments, 1, [...REDUCE_KEYS, 'ddof']);
  const a = asArray(x, { op: 'var' });
  const axes = normalizeAxes(opts.axis, a.ndim, 'var');
  const outDtype = opts.dtype ?? (isFloat(a.dtype) ? a.dtype : 'float32');
  const acc: DType = is16BitFloat(outDtype) || isInteger(outDtype) ? 'float32' : outDtype;
  const af = lax.convertElementType(a, acc, false);
  const mu = lax.div(lax.reduceSum(af, axes), countOf(a, axes));
  const shapeKeep = a.shape.map((d, i) => (axes.includes(i) ? 1 : d));
  const centered = lax.sub(af, lax.broadcastInDim(lax.reshape(mu, shapeKeep), a.shape, a.shape.map((_, i) => i)));
  const n = countOf(a, axes) - (opts.ddof ?? 0);
  const v = lax.div(lax.reduceSum(lax.mul(centered, centered), axes), Math.max(n, 0));
  return keep(a, lax.convertElementType(v, outDtype, false), axes, opts.keepdims);
}
export { variance as var };

export function std(x: ArrayLike, ..._: Args<VarOptions>): Array {
  const opts = axisArgs<VarOptions>('std', arguments, 1, [...REDUCE_KEYS, 'ddof']);
  const v = variance(x, { ...opts, dtype: undefined, keepdims: opts.keepdims });
  const outDtype = opts.dtype ?? v.dtype;
  return lax.convertElementType(lax.sqrt(lax.convertElementType(v, 'float32')), outDtype, false);
}

function argReduce(name: 'argmax' | 'argmin') {
  return function (x: ArrayLike, ..._: Args<ArgOptions>): Array {
    const opts = axisArgs<ArgOptions>(name, arguments, 1, ['axis', 'keepdims'], true);
    let a = asArray(x, { op: name });
    let axis: number;
    if (opts.axis === undefined || opts.axis === null) {
      a = lax.reshape(a, [a.size]);
      axis = 0;
    } else axis = normalizeAxis(opts.axis, a.ndim, name);
    const r = name === 'argmax' ? lax.argmax(a, axis) : lax.argmin(a, axis);
    if (!opts.keepdims) return r;
    const shape = opts.axis === undefined || opts.axis === null ? asArray(x).shape.map(() => 1) : a.shape.map((d, i) => (i === axis ? 1 : d));
    return lax.reshape(r, shape);
  };
}
export const argmax = argReduce('argmax');
export const argmin = argReduce('argmin');

function cumulative(name: string, prim: typeof lax.cumsum) {
  return function (x: ArrayLike, ..._: Args<CumOptions>): Array {
    const opts = axisArgs<CumOptions>(name, arguments, 1, ['axis', 'dtype'], true);
    let a = asArray(x, { op: name });
    if (opts.axis === undefined || opts.axis === null) a = lax.reshape(a, [a.size]);
    const axis = normalizeAxis(opts.axis ?? 0, a.ndim, name);
    const { acc, out } = accumType(a, opts.dtype, name);
    return lax.convertElementType(prim(lax.convertElementType(a, acc), axis), out, false);
  };
}
export const cumsum = cumulative('cumsum', lax.cumsum);
export const cumprod = cumulative('cumprod', lax.cumprod);
