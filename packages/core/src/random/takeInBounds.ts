/**
 * `jnp.take(x, indices, axis)` for int32 indices that random's own arithmetic keeps in range
 * (permutation, choice, picking split keys): a gather through core's `np.take` in clip mode.
 */
import type { Array } from '../array';
import { take } from '../numpy/rearranging';

export function takeInBounds(x: Array, indices: Array, axis: number): Array {
  return take(x, indices, { axis, mode: 'clip' });
}
