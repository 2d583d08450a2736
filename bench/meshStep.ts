/**
 * A device program of `pnpm bench:mesh` (a device worker loads it through meshStep.cjs): pure
 * compute with no communication, to compare one device with two.
 */
import { type Array, np, setBackend } from '@tpukit/core';

/** Compute-bound work with no communication: `reps` chained [n,n] matmuls (systolic backend). */
export function matmulChain(x: Array, reps: number): Array {
  setBackend('systolic');
  let y = x;
  for (let i = 0; i < reps; i++) y = np.tanh(np.matmul(y, x));
  return np.sum(y);
}
