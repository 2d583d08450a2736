/**
 * AdamW as pure functions over parameter pytrees (optax.adamw's update rule), with a linear
 * warmup then cosine decay schedule. The optimizer state is a pytree too, so orbax-ts saves it.
 */
import { type Array, np, tree } from '@tpukit/core';

export interface AdamWConfig {
  peakLr: number;
  warmupSteps: number;
  totalSteps: number;
  b1: number;
  b2: number;
  eps: number;
  weightDecay: number;
}

export interface AdamState<P> {
  mu: P;
  nu: P;
}

export function learningRate(step: number, c: AdamWConfig): number {
  if (step < c.warmupSteps) return (c.peakLr * (step + 1)) / c.warmupSteps;
  const t = Math.min(1, (step - c.warmupSteps) / Math.max(1, c.totalSteps - c.warmupSteps));
  return c.peakLr * (0.1 + 0.9 * 0.5 * (1 + Math.cos(Math.PI * t)));
}

export function adamInit<P>(params: P): AdamState<P> {
  return { mu: tree.map((p: Array) => np.zerosLike(p), params) as P, nu: tree.map((p: Array) => np.zerosLike(p), params) as P };
}

/** One AdamW step (`step` counts from 0); returns new params and state. */
export function adamUpdate<P>(params: P, grads: P, state: AdamState<P>, step: number, c: AdamWConfig): [P, AdamState<P>] {
  const lr = learningRate(step, c);
  const bc1 = 1 - c.b1 ** (step + 1);
  const bc2 = 1 - c.b2 ** (step + 1);
  const mu = tree.map((m: Array, g: Array) => np.add(np.multiply(m, c.b1), np.multiply(g, 1 - c.b1)), state.mu, grads) as P;
  const nu = tree.map((v: Array, g: Array) => np.add(np.multiply(v, c.b2), np.multiply(np.square(g), 1 - c.b2)), state.nu, grads) as P;
  const next = tree.map((p: Array, m: Array, v: Array) => {
    const update = np.divide(np.divide(m, bc1), np.add(np.sqrt(np.divide(v, bc2)), c.eps));
    return np.subtract(p, np.multiply(np.add(update, np.multiply(p, c.weightDecay)), lr));
  }, params, mu, nu) as P;
  return [next, { mu, nu }];
}
