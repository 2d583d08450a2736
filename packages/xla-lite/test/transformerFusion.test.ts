// The transformer training step of bench/jit.bench.ts (same block: RMSNorm, causal softmax
// attention, gelu MLP, log-softmax loss; small sizes): with layout assignment, row fusion and
// dot epilogue fusion it runs fewer kernels and moves fewer bytes, with the same loss and grads.
import { type Array, nn, np, valueAndGrad } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { jit } from '../src/index';
import { expectAllclose } from './build';

const [V, D, H, F, T, B] = [32, 16, 2, 32, 8, 2];
const fill = (shape: number[], s: number, k: number) => np.array(Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => s * Math.sin(i * 0.37 + k)), 'float32').reshape(shape);
const rmsNorm = (x: Array, g: Array) => np.multiply(np.multiply(x, np.reciprocal(np.sqrt(np.add(np.mean(np.square(x), { axis: -1, keepdims: true }), 1e-6)))), g);

function loss(p: Record<string, Array>, tokens: Array, targets: Array): Array {
  const dh = D / H;
  let x = np.take(p.wte, tokens, { axis: 0 });
  const h = rmsNorm(x, p.g1);
  const heads = (w: Array) => np.transpose(np.matmul(h, w).reshape([B, T, H, dh]), [0, 2, 1, 3]);
  const scores = np.multiply(np.matmul(heads(p.wq), np.swapaxes(heads(p.wk), -1, -2)), 1 / Math.sqrt(dh));
  const att = np.matmul(nn.softmax(np.where(np.tri(T, T, 0, 'bool'), scores, -1e9), { axis: -1 }), heads(p.wv));
  x = np.add(x, np.matmul(np.transpose(att, [0, 2, 1, 3]).reshape([B, T, D]), p.wo));
  x = np.add(x, np.matmul(nn.gelu(np.matmul(rmsNorm(x, p.g2), p.w1)), p.w2));
  const logp = nn.logSoftmax(np.matmul(x, np.transpose(p.wte)), { axis: -1 });
  return np.negative(np.mean(np.sum(np.multiply(logp, nn.oneHot(targets, V)), { axis: -1 })));
}

describe('transformer step', () => {
  it('fewer kernels and fewer bytes than elementwise fusion alone, same loss and gradients', () => {
    const p = { wte: fill([V, D], 0.05, 1), g1: np.ones([D]), g2: np.ones([D]), wq: fill([D, D], 0.2, 2), wk: fill([D, D], 0.2, 3), wv: fill([D, D], 0.2, 4), wo: fill([D, D], 0.2, 5), w1: fill([D, F], 0.2, 6), w2: fill([F, D], 0.1, 7) };
    const tok = (s: number) => np.array(Int32Array.from({ length: B * T }, (_, i) => (i * 7 + s * 3) % V)).reshape([B, T]);
    const lowered = jit(valueAndGrad(loss)).lower(p, tok(0), tok(1));
    const before = lowered.compile({ layout: false, rowFusion: false, outputFusion: false });
    const after = lowered.compile();
    const kernels = (s: typeof after.stats) => s.fusedKernels + s.primitiveOps;
    expect(after.stats.rowFusions).toBeGreaterThan(0);
    expect(after.stats.outputFusions).toBeGreaterThan(0);
    expect(kernels(after.stats)).toBeLessThan(kernels(before.stats));
    expect(after.costAnalysis().bytesAccessed).toBeLessThan(before.costAnalysis().bytesAccessed);
    // No broadcast is materialised for a fusion to read: each fusion broadcasts for itself
    // (the one kept is the zeros a scatter-add accumulates the embedding gradient into).
    for (const compiled of [before, after]) {
      const entry = compiled.module.entry;
      const users = entry.users();
      const broadcastOnly = entry.instructions.filter((i) => i.opcode === 'fusion' && i.called[0].instructions.every((m) => m.opcode === 'parameter' || m.prim?.name === 'broadcast_in_dim'));
      expect(broadcastOnly.flatMap((i) => users.get(i)!).filter((u) => u?.opcode === 'fusion')).toEqual([]);
      expect(broadcastOnly.length).toBeLessThanOrEqual(1);
    }
    const transposes = (t: string) => (t.split('ENTRY')[1].match(/ transpose\(/g) ?? []).length;
    expect(transposes(after.asText())).toBeLessThan(transposes(before.asText()));
    const flat = [...lowered.jaxpr.consts, ...[p.g1, p.g2, p.w1, p.w2, p.wk, p.wo, p.wq, p.wte, p.wv], tok(0), tok(1)];
    const r0 = before.call(flat);
    const r1 = after.call(flat);
    expect(r1.length).toBe(r0.length);
    r0.forEach((v, k) => expectAllclose(r1[k], v, { rtol: 1e-4, atol: 1e-6 }));
    const [l] = valueAndGrad(loss)(p, tok(0), tok(1)) as [Array, unknown];
    expectAllclose(r1[0], l, { rtol: 1e-5 });
  });
});
