/**
 * Symbolic zeros. A tangent or cotangent that is known to be zero travels as `null` through
 * jvp, transpose and batching instead of as an array of zeros, so that integer inputs,
 * constants and stopped gradients cost nothing. This file holds the few helpers that turn such
 * nulls into real zeros where a rule needs them, and adds tangents that may be zero.
 */
import type { Array } from '../array';
import { asArray } from '../convert';
import { isFloat } from '../dtype';
import * as lax from '../lax/ops';
import type { ShapedArray } from '../primitive';

/** Only floating values carry tangents; integer and bool values have zero tangent (JAX's float0). */
export function isDifferentiable(a: ShapedArray): boolean {
  return isFloat(a.dtype);
}

export function zerosOf(a: ShapedArray): Array {
  return filled(0, a);
}

/** An array shaped and typed like `a`, filled with `v`. */
export function filled(v: number, a: ShapedArray): Array {
  const z = asArray(v, { dtype: a.dtype });
  return a.shape.length === 0 ? z : lax.broadcastInDim(z, a.shape, []);
}

export function fullLike(v: number, x: Array): Array {
  return filled(v, x.aval);
}

export function instantiate(t: Array | null, a: ShapedArray): Array {
  return t ?? zerosOf(a);
}

/** Sum of two possibly-zero values. */
export function addAny(a: Array | null, b: Array | null): Array | null {
  if (a === null) return b;
  if (b === null) return a;
  return lax.add(a, b);
}
