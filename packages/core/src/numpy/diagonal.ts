/**
 * Diagonals and triangles: diagonal, diag, trace, tril, triu. `diagonal` moves the two axes
 * last, flattens them and takes a strided `lax.slice` (stride m+1), so it needs no gather;
 * tril/triu select against an iota comparison mask.
 */
import type { Array } from '../array';
import { type ArrayLike, asArray } from '../convert';
import * as lax from '../lax/ops';
import { fmt, normalizeAxis } from '../shape';
import { castTo } from './promote';
import { sum } from './reductions';

/** `jnp.diagonal(x, offset=0, axis1=0, axis2=1)`: the diagonal becomes the last axis. */
export function diagonal(x: ArrayLike, offset = 0, axis1 = 0, axis2 = 1): Array {
  const a = asArray(x, { op: 'diagonal' });
  if (a.ndim < 2) throw new Error(`diagonal: needs an array of rank >= 2; got ${fmt(a.shape)}`);
  if (!Number.isInteger(offset)) throw new TypeError(`diagonal: offset must be an integer; got ${offset}`);
  const a1 = normalizeAxis(axis1, a.ndim, 'diagonal', 'axis1');
  const a2 = normalizeAxis(axis2, a.ndim, 'diagonal', 'axis2');
  if (a1 === a2) throw new Error(`diagonal: axis1 and axis2 cannot be the same (both ${a1})`);
  const rest = a.shape.map((_, i) => i).filter((i) => i !== a1 && i !== a2);
  const t = lax.transpose(a, [...rest, a1, a2]);
  const n = a.shape[a1];
  const m = a.shape[a2];
  const len = offset >= 0 ? Math.max(0, Math.min(n, m - offset)) : Math.max(0, Math.min(n + offset, m));
  const lead = rest.map((i) => a.shape[i]);
  const flat = lax.reshape(t, [...lead, n * m]);
  const start = offset >= 0 ? offset : -offset * m;
  const zeros = lead.map(() => 0);
  if (len === 0) return lax.slice(flat, [...zeros, 0], [...lead, 0]);
  return lax.slice(flat, [...zeros, start], [...lead, start + (len - 1) * (m + 1) + 1], [...lead.map(() => 1), m + 1]);
}

/** `jnp.diag(v, k=0)`: a 1-D input builds a square matrix with v on diagonal k; a 2-D input extracts diagonal k. */
export function diag(v: ArrayLike, k = 0): Array {
  const a = asArray(v, { op: 'diag' });
  if (!Number.isInteger(k)) throw new TypeError(`diag: k must be an integer; got ${k}`);
  if (a.ndim === 2) return diagonal(a, k);
  if (a.ndim !== 1) throw new Error(`diag: input must be 1-D or 2-D; got shape ${fmt(a.shape)}`);
  const n = a.shape[0];
  const N = n + Math.abs(k);
  const vp = Math.abs(k) ? lax.pad(a, castTo(0, a.dtype, false, 'diag'), [[0, Math.abs(k), 0]]) : a;
  const full = lax.broadcastInDim(vp, [N, N], [k >= 0 ? 0 : 1]);
  const mask = lax.eq(lax.sub(lax.broadcastedIota('int32', [N, N], 1), lax.broadcastedIota('int32', [N, N], 0)), k);
  return lax.select(mask, full, lax.broadcastInDim(castTo(0, a.dtype, a.weakType, 'diag'), [N, N], []));
}

/** `jnp.trace(x, offset=0, axis1=0, axis2=1)`: sum along a diagonal. */
export function trace(x: ArrayLike, offset = 0, axis1 = 0, axis2 = 1): Array {
  return sum(diagonal(x, offset, axis1, axis2), { axis: -1 });
}

function triangle(op: string, x: ArrayLike, k: number, keepLower: boolean): Array {
  const a = asArray(x, { op });
  if (a.ndim < 2) throw new Error(`${op}: needs an array of rank >= 2; got ${fmt(a.shape)}`);
  if (!Number.isInteger(k)) throw new TypeError(`${op}: k must be an integer; got ${k}`);
  const [n, m] = a.shape.slice(-2);
  const diff = lax.sub(lax.broadcastedIota('int32', [n, m], 1), lax.broadcastedIota('int32', [n, m], 0));
  const mask2 = keepLower ? lax.le(diff, k) : lax.ge(diff, k);
  const mask = lax.broadcastInDim(mask2, a.shape, [a.ndim - 2, a.ndim - 1]);
  return lax.select(mask, a, lax.broadcastInDim(castTo(0, a.dtype, a.weakType, op), a.shape, []));
}

/** `jnp.tril(x, k=0)`: zeroes the entries above diagonal k of the last two axes. */
export const tril = (x: ArrayLike, k = 0): Array => triangle('tril', x, k, true);
/** `jnp.triu(x, k=0)`: zeroes the entries below diagonal k of the last two axes. */
export const triu = (x: ArrayLike, k = 0): Array => triangle('triu', x, k, false);
