/**
 * Shape arithmetic shared by every op: sizes, strides, broadcasting and axis normalisation.
 * Errors name the op and the argument so that a user sees `add: shapes [3,4] and [5] cannot
 * broadcast`, never an index error from deep inside a kernel.
 */
import { showValue } from './describe';

export type Shape = readonly number[];

export const fmt = (s: Shape): string => `[${s.join(',')}]`;

export function sizeOf(shape: Shape): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Row-major (C order) strides in elements. */
export function stridesOf(shape: Shape): number[] {
  const st = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    st[i] = acc;
    acc *= shape[i];
  }
  return st;
}

/** `s` itself when frozen (nobody can change it, so it may be shared), else a frozen copy. */
export function frozenShape(s: Shape): Shape {
  return Object.isFrozen(s) ? s : Object.freeze(s.slice());
}

export function shapesEqual(a: Shape, b: Shape): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function checkShape(shape: unknown, op: string, arg = 'shape'): number[] {
  const s = typeof shape === 'number' ? [shape] : shape;
  if (!Array.isArray(s) || !s.every((d) => Number.isInteger(d) && d >= 0)) {
    // An Array (usually a tracer) as a dimension: shapes are static under jit, say so plainly.
    const k = Array.isArray(s) ? s.findIndex((d) => typeof d === 'object' && d !== null && 'aval' in d) : -1;
    if (k >= 0) {
      const av = ((s as unknown[])[k] as { aval: { dtype: string; shape: number[] } }).aval;
      throw new TypeError(`${op}: ${arg} dimension ${k} is an Array (${av.dtype}[${av.shape.join(',')}]), not a number; shapes must be known when tracing: pass the size as a static argument (jit staticArgnums) or use x.shape`);
    }
    throw new TypeError(`${op}: ${arg} must be a list of non-negative integers; got ${showValue(shape)}`);
  }
  return s.slice();
}

/** NumPy broadcasting of any number of shapes. */
export function broadcastShapes(op: string, ...shapes: Shape[]): number[] {
  const rank = Math.max(0, ...shapes.map((s) => s.length));
  const out = new Array<number>(rank).fill(1);
  for (const s of shapes) {
    for (let i = 0; i < s.length; i++) {
      const j = rank - s.length + i;
      const d = s[i];
      if (out[j] === 1) out[j] = d;
      else if (d !== 1 && d !== out[j]) {
        throw new Error(`${op}: shapes ${shapes.map(fmt).join(' and ')} cannot broadcast`);
      }
    }
  }
  return out;
}

/** Normalises a possibly negative axis against `ndim`. */
export function normalizeAxis(axis: number, ndim: number, op: string, arg = 'axis'): number {
  if (!Number.isInteger(axis) || axis < -ndim || axis >= ndim) {
    throw new RangeError(`${op}: ${arg} ${axis} is out of range for an array of rank ${ndim} (valid: ${-ndim}..${ndim - 1})`);
  }
  return axis < 0 ? axis + ndim : axis;
}

/** Normalises `axis` (number, list or null/undefined for all axes) to a sorted unique list. */
export function normalizeAxes(axis: number | readonly number[] | null | undefined, ndim: number, op: string): number[] {
  if (axis === null || axis === undefined) return Array.from({ length: ndim }, (_, i) => i);
  const list = typeof axis === 'number' ? [axis] : axis;
  const out = list.map((a) => normalizeAxis(a, ndim, op));
  if (new Set(out).size !== out.length) throw new Error(`${op}: repeated axis in ${showValue(axis)}`);
  return out.sort((a, b) => a - b);
}

export function checkPermutation(perm: readonly number[], ndim: number, op: string): number[] {
  const p = perm.map((a) => normalizeAxis(a, ndim, op, 'axes'));
  if (p.length !== ndim || new Set(p).size !== ndim) {
    throw new Error(`${op}: axes ${showValue(perm)} is not a permutation of ${ndim} axes`);
  }
  return p;
}
