/**
 * What jax.numpy does before binding a primitive: promote operands to a common dtype (JAX's
 * lattice, weak types included) and broadcast them to a common shape (NumPy rules).
 */
import type { Array } from '../array';
import { type ArrayLike, asArray, typeOf } from '../convert';
import { type DType, intRange, isInteger, resultType } from '../dtype';
import * as lax from '../lax/ops';
import { broadcastShapes, shapesEqual } from '../shape';

/** Converts an input to `dtype` keeping the weak bit it should have. */
export function castTo(x: ArrayLike, dtype: DType, weak: boolean, op: string): Array {
  if (typeof x === 'number' || typeof x === 'boolean') {
    // A JS number goes straight to the target dtype (as a Python scalar does in JAX), so
    // `float32 * 2**40` works, and an integer that does not fit the target is an error (JAX
    // raises OverflowError) rather than a silent wrap-around.
    if (typeof x === 'number' && isInteger(dtype) && Number.isInteger(x)) {
      const [lo, hi] = intRange(dtype);
      if (x < lo || x > hi) throw new RangeError(`${op}: JS number ${x} does not fit in ${dtype} (range ${lo}..${hi}); convert the array to a wider dtype first`);
    }
    return asArray(x, { dtype, weak, op });
  }
  const a = asArray(x, { op });
  if (a.dtype === dtype && a.weakType === weak) return a;
  return lax.convertElementType(a, dtype, weak);
}

export function broadcastTo(x: Array, shape: readonly number[], op = 'broadcast_to'): Array {
  if (shapesEqual(x.shape, shape)) return x;
  const out = broadcastShapes(op, x.shape, shape);
  if (!shapesEqual(out, shape)) {
    throw new Error(`${op}: cannot broadcast shape [${x.shape.join(',')}] to [${shape.join(',')}]`);
  }
  const lead = shape.length - x.ndim;
  return lax.broadcastInDim(x, shape, x.shape.map((_, i) => i + lead));
}

/** Promotes and broadcasts operands for an elementwise jnp op. */
export function promoteArgs(op: string, xs: ArrayLike[], opts: { dtype?: DType; weak?: boolean } = {}): Array[] {
  const types = xs.map(typeOf);
  const rt = opts.dtype ? { dtype: opts.dtype, weak: opts.weak ?? false } : resultType(...types);
  const arrays = xs.map((x) => castTo(x, rt.dtype, rt.weak, op));
  const shape = broadcastShapes(op, ...arrays.map((a) => a.shape));
  return arrays.map((a) => broadcastTo(a, shape, op));
}

/** Promotes float-only ops: integer/bool inputs become float32 (as jnp.sin(int) does). */
export function promoteInexact(op: string, xs: ArrayLike[]): Array[] {
  const rt = resultType(...xs.map(typeOf));
  if (rt.dtype === 'bool' || rt.dtype.startsWith('int') || rt.dtype.startsWith('uint')) {
    return promoteArgs(op, xs, { dtype: 'float32', weak: rt.weak });
  }
  return promoteArgs(op, xs);
}
