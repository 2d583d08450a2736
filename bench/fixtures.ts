/**
 * Pieces the transformer benchmarks (grad, jit) share: a deterministic pseudo-random fill (so
 * every run times the same numbers without depending on core's random), RMSNorm, and the
 * attention half of their pre-RMSNorm decoder block (each bench keeps its own MLP and loss).
 */
import { type Array, nn, np } from '@tpukit/core';

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

/** The GPT bench's layer norm over the last axis (eps 1e-5, with gain and bias), as a user writes it. */
export function layerNorm(x: Array, g: Array, b: Array): Array {
  const mu = np.mean(x, { axis: -1, keepdims: true });
  const xc = np.subtract(x, mu);
  const v = np.mean(np.square(xc), { axis: -1, keepdims: true });
  return np.add(np.multiply(np.multiply(xc, np.reciprocal(np.sqrt(np.add(v, 1e-5)))), g), b);
}

export function rmsNorm(x: Array, g: Array): Array {
  const ms = np.mean(np.square(x), { axis: -1, keepdims: true });
  return np.multiply(np.multiply(x, np.reciprocal(np.sqrt(np.add(ms, 1e-6)))), g);
}

/** The parameters of `attentionSublayer`: the pre-attention RMSNorm gain and the four projections. */
export type AttentionParams = Record<'g1' | 'wq' | 'wk' | 'wv' | 'wo', Array>;

/**
 * `x + wo(causal multi-head self-attention(rmsNorm(x, g1)))` for `x` [B, T, D] and `heads`
 * heads of D / heads each: the residual attention step of a pre-RMSNorm decoder block.
 */
export function attentionSublayer(p: AttentionParams, x: Array, heads: number): Array {
  const [b, t, d] = x.shape;
  const dh = d / heads;
  const h = rmsNorm(x, p.g1);
  const split = (w: Array) => np.transpose(np.matmul(h, w).reshape([b, t, heads, dh]), [0, 2, 1, 3]);
  const scores = np.multiply(np.matmul(split(p.wq), np.swapaxes(split(p.wk), -1, -2)), 1 / Math.sqrt(dh));
  const att = np.matmul(nn.softmax(np.where(np.tri(t, t, 0, 'bool'), scores, -1e9), { axis: -1 }), split(p.wv));
  return np.add(x, np.matmul(np.transpose(att, [0, 2, 1, 3]).reshape([b, t, d]), p.wo));
}
