/**
 * `nonzero`, `argwhere` and `flatnonzero`: their output shape depends on the values, so they
 * run eagerly on concrete arrays only (jnp needs a static `size` under jit; tpukit does not
 * offer that yet) and raise a clear error on a tracer. Boolean-mask indexing uses `nonzero`.
 */
import { Array } from '../array';
import { type ArrayLike, asArray } from '../convert';
import { fmt, stridesOf } from '../shape';

/** Throws unless `a` has a concrete value (is not a tracer). */
export function requireConcrete(a: Array, op: string, hint: string): void {
  if (a._trace !== null) {
    throw new Error(`${op}: needs a concrete array, but got a traced ${a.dtype}${fmt(a.shape)} (its output shape would depend on its values); ${hint}`);
  }
}

/** `jnp.nonzero(x)`: one int32 index array per dimension, in row-major order. */
export function nonzero(x: ArrayLike): Array[] {
  const a = asArray(x, { op: 'nonzero' });
  requireConcrete(a, 'nonzero', 'use jnp.where(cond, x, y) for a fixed-shape alternative');
  if (a.ndim === 0) throw new Error('nonzero: not defined for a scalar (0-d) array; use atleast1d first');
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

/** `jnp.argwhere(x)`: `[count, ndim]` int32 coordinates of the nonzero entries. */
export function argwhere(x: ArrayLike): Array {
  const a = asArray(x, { op: 'argwhere' });
  requireConcrete(a, 'argwhere', 'use jnp.where(cond, x, y) for a fixed-shape alternative');
  const cols = a.ndim === 0 ? [] : nonzero(a).map((c) => c.dataSync());
  const count = a.ndim === 0 ? (a.dataSync()[0] !== 0 ? 1 : 0) : cols[0].length;
  const out = new Int32Array(count * a.ndim);
  for (let k = 0; k < count; k++) for (let d = 0; d < a.ndim; d++) out[k * a.ndim + d] = cols[d][k];
  return Array._fromStorage(out, [count, a.ndim], 'int32');
}

/** `jnp.flatnonzero(x)`: indices of the nonzero entries of the flattened array. */
export function flatnonzero(x: ArrayLike): Array {
  const a = asArray(x, { op: 'flatnonzero' });
  requireConcrete(a, 'flatnonzero', 'use jnp.where(cond, x, y) for a fixed-shape alternative');
  const vals = a.dataSync();
  const hits: number[] = [];
  for (let i = 0; i < vals.length; i++) if (vals[i] !== 0) hits.push(i);
  return Array._fromStorage(Int32Array.from(hits), [hits.length], 'int32');
}
