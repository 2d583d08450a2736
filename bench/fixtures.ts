/**
 * Pieces the transformer benchmarks (grad, jit) share: a deterministic pseudo-random fill (so
 * every run times the same numbers without depending on core's random) and RMSNorm.
 */
import { type Array, np } from '@tpukit/core';

/** A float32 array of `shape` filled from a linear congruential stream, scaled to [-s, s). */
export function rand(shape: number[], seed: number, s: number): Array {
  const n = shape.reduce((a, b) => a * b, 1);
  const v = new Float32Array(n);
  let x = seed * 7919 + 17;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    v[i] = ((x / 2147483648) * 2 - 1) * s;
  }
  return np.array(v).reshape(shape);
}

export function rmsNorm(x: Array, g: Array): Array {
  const ms = np.mean(np.square(x), { axis: -1, keepdims: true });
  return np.multiply(np.multiply(x, np.reciprocal(np.sqrt(np.add(ms, 1e-6)))), g);
}
