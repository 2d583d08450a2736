/**
 * Index grids and flat-index conversion: meshgrid, indices, unravelIndex, ravelMultiIndex.
 * All are iotas, broadcasts and integer arithmetic, so they trace like any other op.
 */
import type { Array } from '../array';
import { type ArrayLike, asArray } from '../convert';
import { type DType, isInteger } from '../dtype';
import * as lax from '../lax/ops';
import { checkShape, fmt } from '../shape';
import { broadcastArrays } from './shape';
import { showValue } from '../describe';

/** `jnp.meshgrid(...xs, {indexing='xy'})`: coordinate arrays from 1-D inputs (xy swaps the first two). */
export function meshgrid(...args: (ArrayLike | { indexing?: 'xy' | 'ij' })[]): Array[] {
  let opts: { indexing?: 'xy' | 'ij' } = {};
  const last = args[args.length - 1];
  if (last !== undefined && typeof last === 'object' && !globalThis.Array.isArray(last) && !ArrayBuffer.isView(last) && !('aval' in (last as object))) {
    opts = args.pop() as { indexing?: 'xy' | 'ij' };
  }
  const indexing = opts.indexing ?? 'xy';
  if (indexing !== 'xy' && indexing !== 'ij') throw new Error(`meshgrid: indexing must be 'xy' or 'ij'; got ${showValue(indexing)}`);
  const xs = (args as ArrayLike[]).map((x) => {
    const a = asArray(x, { op: 'meshgrid' });
    return lax.reshape(a, [a.size]);
  });
  const sizes = xs.map((a) => a.shape[0]);
  const order = xs.map((_, i) => i);
  if (indexing === 'xy' && xs.length >= 2) [order[0], order[1]] = [1, 0];
  const shape = order.map((i) => sizes[i]);
  return xs.map((a, i) => lax.broadcastInDim(a, shape, [order.indexOf(i)]));
}

/** `jnp.indices(dimensions, dtype='int32')`: a `[ndim, ...dimensions]` grid of coordinates. */
export function indices(dimensions: readonly number[], dtype: DType = 'int32'): Array {
  const dims = checkShape(dimensions, 'indices', 'dimensions');
  if (dims.length === 0) return lax.reshape(lax.iota(dtype, 0), [0]);
  return lax.concatenate(
    dims.map((_, d) => lax.reshape(lax.broadcastedIota(dtype, dims, d), [1, ...dims])),
    0,
  );
}

function checkDims(op: string, shape: readonly number[]): number[] {
  const s = checkShape(shape, op, 'shape');
  return s;
}

/** `jnp.unravel_index(indices, shape)`: one coordinate array per dimension (negative indices count from the end; out of range clamps). */
export function unravelIndex(flat: ArrayLike, shape: readonly number[]): Array[] {
  const dims = checkDims('unravel_index', shape);
  let i = asArray(flat, { op: 'unravel_index' });
  if (!isInteger(i.dtype)) throw new TypeError(`unravel_index: indices must be integers; got ${i.dtype}`);
  i = lax.convertElementType(i, 'int32');
  const total = dims.reduce((a, b) => a * b, 1);
  i = lax.select(lax.lt(i, 0), lax.add(i, total), i);
  i = lax.clamp(0, i, Math.max(total - 1, 0));
  const out: Array[] = [];
  for (let d = dims.length - 1; d >= 0; d--) {
    out.unshift(lax.rem(i, dims[d]));
    i = lax.div(i, dims[d]);
  }
  return out;
}

/** `jnp.ravel_multi_index(multiIndex, dims, {mode})`: flat indices from coordinate arrays ('clip' or 'wrap'). */
export function ravelMultiIndex(multiIndex: readonly ArrayLike[], dims: readonly number[], opts: { mode?: 'clip' | 'wrap' } = {}): Array {
  const shape = checkDims('ravel_multi_index', dims);
  if (multiIndex.length !== shape.length) {
    throw new Error(`ravel_multi_index: got ${multiIndex.length} index arrays for dims ${fmt(shape)} (${shape.length} needed)`);
  }
  const mode = opts.mode ?? 'clip';
  if (mode !== 'clip' && mode !== 'wrap') throw new Error(`ravel_multi_index: mode must be 'clip' or 'wrap'; got ${showValue(mode)}`);
  const arrays = broadcastArrays(...multiIndex.map((m) => asArray(m, { op: 'ravel_multi_index' }))).map((a) => {
    if (!isInteger(a.dtype)) throw new TypeError(`ravel_multi_index: indices must be integers; got ${a.dtype}`);
    return lax.convertElementType(a, 'int32');
  });
  let acc: Array | null = null;
  arrays.forEach((a, d) => {
    const n = shape[d];
    let c = a;
    if (mode === 'clip') c = lax.clamp(0, c, Math.max(n - 1, 0));
    else {
      const r = lax.rem(c, n);
      c = lax.select(lax.lt(r, 0), lax.add(r, n), r);
    }
    acc = acc === null ? c : lax.add(lax.mul(acc, n), c);
  });
  return acc ?? asArray(0, { dtype: 'int32' });
}
