/**
 * The inverse error function the way XLA computes it for float32 (and, upcast to float32, for
 * bfloat16 / float16): Giles' single-precision approximation ("Approximating the erfinv
 * function", GPU Computing Gems, 2011), w = -log1p(-x*x), a degree-8 polynomial in w - 2.5
 * (w < 5) or sqrt(w) - 3 (otherwise), times x, with erfinv(+-1) = +-inf. `random.normal` and
 * `random.truncatedNormal` use this rather than core's float64-accurate `lax.erfInv` so their
 * floats follow JAX's: every step is a lax op that rounds to float32, as XLA's kernel does.
 */
import type { Array } from '../array';
import { asArray } from '../convert';
import * as lax from '../lax/ops';
import { GE5, LT5 } from './erfinvCoefficients';
import { full } from './prng';

/** erfinv of a float32 array, step for step as XLA's ErfInv32. */
export function erfInvF32(x: Array): Array {
  const s = x.shape;
  const c = (v: number): Array => full(v, 'float32', s);
  const w0 = lax.neg(lax.log1p(lax.mul(lax.neg(x), x)));
  const lt = lax.lt(w0, c(5));
  const w = lax.select(lt, lax.sub(w0, c(2.5)), lax.sub(lax.sqrt(w0), c(3)));
  let p = lax.select(lt, c(LT5[0]), c(GE5[0]));
  for (let i = 1; i < LT5.length; i++) p = lax.add(lax.select(lt, c(LT5[i]), c(GE5[i])), lax.mul(p, w));
  const result = lax.mul(p, x);
  const edge = lax.eq(lax.abs(x), c(1));
  return lax.select(edge, lax.mul(x, c(Infinity)), result);
}

/** erfinv in `x`'s float dtype: 16-bit floats are computed in float32 and rounded back. */
export function erfInvLikeXla(x: Array): Array {
  if (x.dtype === 'float32') return erfInvF32(x);
  return lax.convertElementType(erfInvF32(lax.convertElementType(x, 'float32')), x.dtype);
}

/** A float scalar constant of `dtype`, broadcast to `shape`. */
export function constant(v: number, like: Array): Array {
  return lax.broadcastInDim(lax.convertElementType(asArray(v, { dtype: 'float32' }), like.dtype), like.shape, []);
}
