/** jax.numpy products: matmul (with batch broadcasting), dot, vdot, inner. */
import type { Array } from '../array';
import { type ArrayLike, typeOf } from '../convert';
import { type DType, resultType } from '../dtype';
import * as lax from '../lax/ops';
import type { PrecisionLike } from '../lax/precision';
import { broadcastShapes, fmt } from '../shape';
import { broadcastTo, castTo, promoteArgs } from './promote';

export interface DotOptions {
  precision?: PrecisionLike;
  preferredElementType?: DType | null;
}

/** `jnp.matmul`: 1-D operands are promoted to matrices and the added axis removed; leading dims broadcast. */
export function matmul(x: ArrayLike, y: ArrayLike, opts: DotOptions = {}): Array {
  let [a, b] = promoteArgsNoBroadcast('matmul', x, y);
  if (a.ndim === 0 || b.ndim === 0) throw new Error(`matmul: operands must have rank >= 1; got ${fmt(a.shape)} and ${fmt(b.shape)}`);
  const aVec = a.ndim === 1;
  const bVec = b.ndim === 1;
  if (aVec) a = lax.reshape(a, [1, a.shape[0]]);
  if (bVec) b = lax.reshape(b, [b.shape[0], 1]);
  const k1 = a.shape[a.ndim - 1];
  const k2 = b.shape[b.ndim - 2];
  if (k1 !== k2) {
    throw new Error(`matmul: contracting dims differ: lhs ${fmt(aVec ? [k1] : a.shape)} (k=${k1}) vs rhs ${fmt(bVec ? [k2] : b.shape)} (k=${k2})`);
  }
  const batch = broadcastShapes('matmul', a.shape.slice(0, -2), b.shape.slice(0, -2));
  a = broadcastTo(a, [...batch, ...a.shape.slice(-2)], 'matmul');
  b = broadcastTo(b, [...batch, ...b.shape.slice(-2)], 'matmul');
  const nb = batch.length;
  const bd = batch.map((_, i) => i);
  let out = lax.dotGeneral(a, b, [[[nb + 1], [nb]], [bd, bd]], opts);
  if (aVec || bVec) {
    const shape = out.shape.slice();
    if (bVec) shape.splice(shape.length - 1, 1);
    if (aVec) shape.splice(shape.length - (bVec ? 1 : 2), 1);
    out = lax.reshape(out, shape);
  }
  return out;
}

/** Promotes dtypes only: products broadcast (or not) by their own rules. */
function promoteArgsNoBroadcast(op: string, x: ArrayLike, y: ArrayLike): [Array, Array] {
  const rt = resultType(typeOf(x), typeOf(y));
  return [castTo(x, rt.dtype, rt.weak, op), castTo(y, rt.dtype, rt.weak, op)];
}

/** `jnp.dot`: matmul for 2-D, sum over the last axis of x and second-to-last of y for N-D. */
export function dot(x: ArrayLike, y: ArrayLike, opts: DotOptions = {}): Array {
  const [a, b] = promoteArgsNoBroadcast('dot', x, y);
  if (a.ndim === 0 || b.ndim === 0) return lax.mul(...(promoteArgs('dot', [a, b]) as [Array, Array]));
  if (b.ndim === 1) return lax.dotGeneral(a, b, [[[a.ndim - 1], [0]], [[], []]], opts);
  const kb = b.ndim - 2;
  if (a.shape[a.ndim - 1] !== b.shape[kb]) {
    throw new Error(`dot: contracting dims differ: lhs ${fmt(a.shape)} (k=${a.shape[a.ndim - 1]}) vs rhs ${fmt(b.shape)} (k=${b.shape[kb]})`);
  }
  return lax.dotGeneral(a, b, [[[a.ndim - 1], [kb]], [[], []]], opts);
}

export function vdot(x: ArrayLike, y: ArrayLike): Array {
  const [a, b] = promoteArgsNoBroadcast('vdot', x, y);
  return lax.dotGeneral(lax.reshape(a, [a.size]), lax.reshape(b, [b.size]), [[[0], [0]], [[], []]]);
}

export function inner(x: ArrayLike, y: ArrayLike): Array {
  const [a, b] = promoteArgsNoBroadcast('inner', x, y);
  return lax.dotGeneral(a, b, [[[a.ndim - 1], [b.ndim - 1]], [[], []]]);
}
