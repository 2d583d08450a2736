/**
 * Symbolic zeros. A tangent or cotangent that is known to be zero travels as `null` through
 * jvp, transpose and batching instead of as an array of zeros, so that integer inputs,
 * constants and stopped gradients cost nothing. The helpers that turn such nulls into real
 * zeros live with the primitives they bind (lax/structural.ts, lax/elementwise.ts), below the
 * rules that use them; this module gathers them for the transformations.
 */
export { filled, fullLike, instantiate, isDifferentiable, zerosOf } from '../lax/structural';
export { addAny } from '../lax/elementwise';
