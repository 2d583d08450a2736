// The transformer training step of bench/jit.bench.ts (same block: RMSNorm, causal softmax
// attention, gelu MLP, log-softmax loss; small sizes): with layout assignment, row fusion and
// dot epilogue fusion it runs fewer kernels and moves fewer bytes, with the same loss and grads.
import { type Array, valueAndGrad } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { jit } from '../src/index';
import { expectAllclose } from './build';
import { type TinyDims, rmsNorm, tinyTokens, tinyTransformerLoss, tinyTransformerParams } from './tinyTransformer';

const dims: TinyDims = { V: 32, D: 16, H: 2, F: 32, T: 8, B: 2 };
const loss = tinyTransformerLoss(dims, rmsNorm);

describe('transformer step', () => {
  it('fewer kernels and fewer bytes than elementwise fusion alone, same loss and gradients', () => {
    const p = tinyTransformerParams(dims);
    const tok = (s: number) => tinyTokens(dims, s);
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
