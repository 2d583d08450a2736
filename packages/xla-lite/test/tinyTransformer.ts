// The small transformer training loss shared by the fusion and zero-copy tests (the block of
// bench/jit.bench.ts: a norm, causal softmax attention, gelu MLP, tied log-softmax loss), with
// deterministic parameters and tokens. The norm is a parameter: the tests use RMSNorm and LayerNorm.
import { type Array, nn, np } from '@tpukit/core';

export interface TinyDims {
  V: number;
  D: number;
  H: number;
  F: number;
  T: number;
  B: number;
}

/** A float32 array of `shape` filled with s * sin(0.37 i + k). */
export const fill = (shape: number[], s: number, k: number): Array => np.array(Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => s * Math.sin(i * 0.37 + k)), 'float32').reshape(shape);

export const layerNorm = (x: Array, g: Array): Array => np.multiply(np.multiply(np.subtract(x, np.mean(x, { axis: -1, keepdims: true })), np.reciprocal(np.sqrt(np.add(np.var(x, { axis: -1, keepdims: true }), 1e-5)))), g);
export const rmsNorm = (x: Array, g: Array): Array => np.multiply(np.multiply(x, np.reciprocal(np.sqrt(np.add(np.mean(np.square(x), { axis: -1, keepdims: true }), 1e-6)))), g);

/** The loss of one block over `tokens` predicting `targets` ([B, T] int32). */
export function tinyTransformerLoss({ V, D, H, T, B }: TinyDims, norm: (x: Array, g: Array) => Array) {
  return function loss(p: Record<string, Array>, tokens: Array, targets: Array): Array {
    const dh = D / H;
    let x = np.take(p.wte, tokens, { axis: 0 });
    const h = norm(x, p.g1);
    const heads = (w: Array) => np.transpose(np.matmul(h, w).reshape([B, T, H, dh]), [0, 2, 1, 3]);
    const scores = np.multiply(np.matmul(heads(p.wq), np.swapaxes(heads(p.wk), -1, -2)), 1 / Math.sqrt(dh));
    const att = np.matmul(nn.softmax(np.where(np.tri(T, T, 0, 'bool'), scores, -1e9), { axis: -1 }), heads(p.wv));
    x = np.add(x, np.matmul(np.transpose(att, [0, 2, 1, 3]).reshape([B, T, D]), p.wo));
    x = np.add(x, np.matmul(nn.gelu(np.matmul(norm(x, p.g2), p.w1)), p.w2));
    const logp = nn.logSoftmax(np.matmul(x, np.transpose(p.wte)), { axis: -1 });
    return np.negative(np.mean(np.sum(np.multiply(logp, nn.oneHot(targets, V)), { axis: -1 })));
  };
}

/** Deterministic parameters of the block. */
export function tinyTransformerParams({ V, D, F }: TinyDims): Record<string, Array> {
  return { wte: fill([V, D], 0.05, 1), g1: np.ones([D]), g2: np.ones([D]), wq: fill([D, D], 0.2, 2), wk: fill([D, D], 0.2, 3), wv: fill([D, D], 0.2, 4), wo: fill([D, D], 0.2, 5), w1: fill([D, F], 0.2, 6), w2: fill([F, D], 0.1, 7) };
}

/** Deterministic [B, T] tokens; seed `s`. */
export const tinyTokens = ({ V, T, B }: TinyDims, s: number): Array => np.array(Int32Array.from({ length: B * T }, (_, i) => (i * 7 + s * 3) % V)).reshape([B, T]);
