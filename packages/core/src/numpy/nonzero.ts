/**
 * `nonzero`, `argwhere` and `flatnonzero`. Their output length depends on the values, so
 * without a `size` they run eagerly on concrete arrays only and raise a clear error on a tracer.
 * With a static `size` (as in jnp) they trace: a cumulative sum numbers the nonzero entries, a
 * dropping scatter writes the first `size` flat positions, and slots past the count get
 * `fillValue` (default 0). Boolean-mask indexing uses the eager form.
 */
import { Array } from '../array';
import { type ArrayLike, asArray } from '../convert';
import * as lax from '../lax/ops';
import { fmt, stridesOf } from '../shape';
import { showValue } from '../describe';

/** Throws unless `a` has a concrete value (is not a tracer). */
export function requireConcrete(a: Array, op: string, hint: string): void {
  if (a._trace !== null) {
    throw new Error(`${op}: needs a concrete array, but got a traced ${a.dtype}${fmt(a.shape)} (its output shape would depend on its values); ${hint}`);
  }
}

export interface NonzeroOptions {
  /** Static output length: the first `size` hits, padded with `fillValue`. Makes the op traceable. */
  size?: number;
  /** Pad value for slots past the number of hits: one number, or one per dimension. Default 0. */
  fillValue?: number | readonly number[];
}

const HINT = 'pass a static { size } (and optionally fillValue) to make it traceable';

function checkSize(op: string, size: number): void {
  if (!Number.isInteger(size) || size < 0) throw new RangeError(`${op}: size must be a non-negative integer; got ${size}`);
}

/** First `size` flat positions of the nonzero entries (int32) and a validity mask, traceably. */
function firstHits(a: Array, size: number): { flat: Array; valid: Array } {
  const n = a.size;
  const mask = lax.convertElementType(lax.reshape(lax.ne(a, a.dtype === 'bool' ? false : 0), [n]), 'int32');
  const count = lax.reduceSum(mask, [0]);
  const pos = lax.select(lax.eq(mask, 1), lax.sub(lax.cumsum(mask, 0), 1), lax.broadcastInDim(asArray(size, { dtype: 'int32' }), [n], []));
  const base = lax.broadcastInDim(asArray(0, { dtype: 'int32' }), [size], []);
  const flat = lax.scatter(base, lax.reshape(pos, [n, 1]), lax.iota('int32', n), { updateWindowDims: [], insertedWindowDims: [0], scatterDimsToOperandDims: [0] });
  const valid = lax.lt(lax.iota('int32', size), lax.broadcastInDim(count, [size], []));
  return { flat, valid };
}

function fillFor(op: string, fillValue: number | readonly number[] | undefined, ndim: number): number[] {
  const f = fillValue ?? 0;
  const list = typeof f === 'number' ? new globalThis.Array<number>(ndim).fill(f) : [...f];
  if (list.length !== ndim || !list.every(Number.isInteger)) {
    throw new Error(`${op}: fillValue must be an integer or one integer per dimension (${ndim}); got ${showValue(fillValue)}`);
  }
  return list;
}

/** `jnp.nonzero(x, {size, fillValue})`: one int32 index array per dimension, in row-major order. */
export function nonzero(x: ArrayLike, opts: NonzeroOptions = {}): Array[] {
  const a = asArray(x, { op: 'nonzero' });
  if (a.ndim === 0) throw new Error('nonzero: not defined for a scalar (0-d) array; use atleast1d first');
  if (opts.size !== undefined) {
    checkSize('nonzero', opts.size);
    const fills = fillFor('nonzero', opts.fillValue, a.ndim);
    const { flat, valid } = firstHits(a, opts.size);
    const st = stridesOf(a.shape);
    return a.shape.map((n, d) => {
      const coord = lax.rem(lax.div(flat, st[d]), n);
      return lax.select(valid, coord, lax.broadcastInDim(asArray(fills[d], { dtype: 'int32' }), [opts.size!], []));
    });
  }
  requireConcrete(a, 'nonzero', HINT);
  const vals = a.dataSync();
  const st = stridesOf(a.shape);
  const hits: number[] = [];
  for (let i = 0; i < vals.length; i++) if (vals[i] !== 0) hits.push(i);
  return a.shape.map((n, d) => {
    const out = new Int32Array(hits.length);
    for (let k = 0; k < hits.length; k++) out[k] = Math.floor(hits[k] / st[d]) % n;
    return Array._fromStorage(out, [hits.length], 'int32');
  });
}

/** `jnp.argwhere(x, {size, fillValue})`: `[count, ndim]` int32 coordinates of the nonzero entries. */
export function argwhere(x: ArrayLike, opts: NonzeroOptions = {}): Array {
  const a = asArray(x, { op: 'argwhere' });
  if (a.ndim === 0) {
    const count = nonzero(lax.reshape(a, [1]), opts)[0].shape[0];
    return lax.broadcastInDim(asArray(0, { dtype: 'int32' }), [count, 0], []);
  }
  if (opts.size === undefined) requireConcrete(a, 'argwhere', HINT);
  const cols = nonzero(a, opts);
  return lax.concatenate(
    cols.map((c) => lax.reshape(c, [c.shape[0], 1])),
    1,
  );
}

/** `jnp.flatnonzero(x, {size, fillValue})`: indices of the nonzero entries of the flattened array. */
export function flatnonzero(x: ArrayLike, opts: Omit<NonzeroOptions, 'fillValue'> & { fillValue?: number } = {}): Array {
  const a = asArray(x, { op: 'flatnonzero' });
  return nonzero(lax.reshape(a, [a.size]), opts)[0];
}
