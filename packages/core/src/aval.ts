/**
 * The abstract value of an array (shape, dtype, weak type): what tracing and shape rules see,
 * and what an `Array` carries as `aval`. Below array.ts and primitive.ts, which both name it.
 */
import type { DType } from './dtype';
import { type Shape, shapesEqual } from './shape';

/** The abstract value of an array: what tracing and shape rules see. */
export interface ShapedArray {
  readonly shape: Shape;
  readonly dtype: DType;
  readonly weakType: boolean;
}

export function aval(shape: Shape, dtype: DType, weakType = false): ShapedArray {
  return { shape, dtype, weakType };
}

/** Whether two abstract values have the same dtype, weak type and shape. */
export function sameAval(a: ShapedArray, b: ShapedArray): boolean {
  return a === b || (a.dtype === b.dtype && a.weakType === b.weakType && shapesEqual(a.shape, b.shape));
}
