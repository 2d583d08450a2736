/** jax.numpy array creation: array / asarray, zeros / ones / full (and *Like), arange, linspace, eye, tri. */
import { Array } from '../array';
import { type ArrayLike, asArray as convert } from '../convert';
import { type DType, checkDType, isFloat } from '../dtype';
import * as lax from '../lax/ops';
import { checkShape } from '../shape';
import { checkArrayBytes } from '../sizeGuard';

/** `jnp.array`: always a new array (a copy when given an Array). */
export function array(x: ArrayLike, dtype?: DType): Array {
  if (x instanceof Array) {
    const d = dtype ?? x.dtype;
    return d === x.dtype ? Array._fromStorage(x._storage().slice(), x.shape, x.dtype, x.weakType) : astype(x, d);
  }
  return convert(x, { dtype, op: 'array' });
}

/** `jnp.asarray`: no copy when given an Array of the right dtype. */
export function asarray(x: ArrayLike, dtype?: DType): Array {
  if (x instanceof Array) return dtype === undefined || dtype === x.dtype ? x : astype(x, dtype);
  return convert(x, { dtype, op: 'asarray' });
}

export function astype(x: ArrayLike, dtype: DType): Array {
  checkDType(dtype, 'astype');
  return lax.convertElementType(convert(x, { op: 'astype' }), dtype, false);
}

export function full(shape: number | readonly number[], fillValue: number | boolean | Array, dtype?: DType, opts: { weak?: boolean; op?: string } = {}): Array {
  const op = opts.op ?? 'full';
  const s = checkShape(shape, op);
  if (dtype !== undefined) checkDType(dtype, op);
  // As lax.full: a JS number fill with no dtype gives a weakly typed result; with a dtype the
  // value is checked to fit (300 into int8 is an error, not a wrap-around).
  const v = fillValue instanceof Array ? fillValue : convert(fillValue, { op, dtype });
  if (v.ndim !== 0) throw new Error(`${op}: fill_value must be a scalar; got shape [${v.shape.join(',')}]`);
  const d = dtype ?? v.dtype;
  checkArrayBytes(op, s, d);
  const weak = opts.weak ?? (dtype === undefined && v.weakType);
  const c = lax.convertElementType(v, d, weak);
  return lax.broadcastInDim(c, s, []);
}

export const zeros = (shape: number | readonly number[], dtype: DType = 'float32'): Array => full(shape, 0, dtype, { op: 'zeros' });
export const ones = (shape: number | readonly number[], dtype: DType = 'float32'): Array => full(shape, 1, dtype, { op: 'ones' });
export const empty = zeros;

/** `jnp.full_like`: the result is weakly typed when `x` is and no dtype is given (as lax.full_like). */
export const fullLike = (x: Array, fillValue: number | boolean, dtype?: DType, shape?: readonly number[]): Array =>
  full(shape ?? x.shape, fillValue, dtype ?? x.dtype, { weak: dtype === undefined && x.weakType });
export const zerosLike = (x: Array, dtype?: DType, shape?: readonly number[]): Array => fullLike(x, 0, dtype, shape);
export const onesLike = (x: Array, dtype?: DType, shape?: readonly number[]): Array => fullLike(x, 1, dtype, shape);

/** `jnp.arange(stop)` / `arange(start, stop, step)`. Integer arguments give int32. */
export function arange(start: number, stop?: number, step = 1, dtype?: DType): Array {
  if (stop === undefined) {
    stop = start;
    start = 0;
  }
  for (const [n, v] of [['start', start], ['stop', stop], ['step', step]] as const) {
    if (!Number.isFinite(v)) throw new RangeError(`arange: ${n} must be finite; got ${v}`);
  }
  if (step === 0) throw new RangeError('arange: step must not be 0');
  const n = Math.max(0, Math.ceil((stop - start) / step));
  const d = dtype ?? ([start, stop, step].every(Number.isInteger) ? 'int32' : 'float32');
  checkDType(d, 'arange');
  if (start === 0 && step === 1 && !isFloat(d)) return lax.iota(d, n);
  // As NumPy (which jnp.arange defers to for concrete arguments): start + i * step in float64,
  // rounded once to the dtype (computing in float32 would round twice).
  const vals = new Float64Array(n);
  for (let i = 0; i < n; i++) vals[i] = start + i * step;
  return convert(vals, { dtype: d, op: 'arange' });
}

export function linspace(start: number, stop: number, num = 50, opts: { endpoint?: boolean; dtype?: DType } = {}): Array {
  if (!Number.isInteger(num) || num < 0) throw new RangeError(`linspace: num must be a non-negative integer; got ${num}`);
  const endpoint = opts.endpoint ?? true;
  const div = endpoint ? num - 1 : num;
  const stepv = div > 0 ? (stop - start) / div : 0;
  const vals = new Float64Array(num);
  for (let i = 0; i < num; i++) vals[i] = start + i * stepv;
  if (endpoint && num > 1) vals[num - 1] = stop;
  const d = opts.dtype ?? 'float32';
  checkDType(d, 'linspace');
  // jnp.linspace floors (not truncates) for integer dtypes.
  if (!isFloat(d)) for (let i = 0; i < num; i++) vals[i] = Math.floor(vals[i]);
  return convert(vals, { dtype: d, op: 'linspace' });
}

/** `jnp.eye(N, M, k)`. */
export function eye(n: number, m?: number, k = 0, dtype: DType = 'float32'): Array {
  const mm = m ?? n;
  const r = lax.broadcastedIota('int32', [n, mm], 0);
  const c = lax.broadcastedIota('int32', [n, mm], 1);
  return lax.convertElementType(lax.eq(lax.add(r, k), c), dtype, false);
}

export function identity(n: number, dtype: DType = 'float32'): Array {
  return eye(n, n, 0, dtype);
}

/** `jnp.tri(N, M, k)`: ones at and below the k-th diagonal. */
export function tri(n: number, m?: number, k = 0, dtype: DType = 'float32'): Array {
  const mm = m ?? n;
  const r = lax.broadcastedIota('int32', [n, mm], 0);
  const c = lax.broadcastedIota('int32', [n, mm], 1);
  return lax.convertElementType(lax.le(c, lax.add(r, k)), dtype, false);
}
