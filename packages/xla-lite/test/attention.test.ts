// The fused attention (nn.dotProductAttention, implementation 'fused') under xla-lite's jit: the
// compiled training step runs each of its primitives as one instruction, results equal the eager
// run, and StableHLO export writes them as custom calls.
import { type Array, grad, nn, np, random, setBackend, getBackend, valueAndGrad } from '@tpukit/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jit } from '../src/index';

describe('fused attention under jit', () => {
  let prev = '';
  beforeAll(() => {
    prev = getBackend().name;
    setBackend('systolic');
  });
  afterAll(() => setBackend(prev));
  const q = random.normal(random.key(1), [2, 9, 4, 6]);
  const k = random.normal(random.key(2), [2, 9, 2, 6]);
  const v = random.normal(random.key(3), [2, 9, 2, 6]);
  const w = random.normal(random.key(4), [2, 9, 4, 6]);
  const loss = (a: Array, b: Array, c: Array): Array => np.sum(np.multiply(nn.dotProductAttention(a, b, c, { isCausal: true }), w));
  const vals = (a: Array): number[] => [...a.dataSync()];

  it('grad through the compiled step equals eager, with one instruction per fused primitive', () => {
    const step = jit(valueAndGrad(loss, { argnums: [0, 1, 2] }));
    const [l, gs] = step(q, k, v) as [Array, Array[]];
    const [le, ges] = valueAndGrad(loss, { argnums: [0, 1, 2] })(q, k, v) as [Array, Array[]];
    expect(vals(l)).toEqual(vals(le));
    gs.forEach((g, i) => expect(vals(g)).toEqual(vals(ges[i])));
    const text = step.lower(q, k, v).compile().asText();
    expect(text.match(/= \(.*\) dot_product_attention_fwd\(/g)?.length).toBe(1);
    expect(text.match(/= \(.*\) dot_product_attention_bwd\(/g)?.length).toBe(1);
    expect(text).not.toMatch(/exponential/);
  });

  it('inference (no grad) is one dot_product_attention instruction', () => {
    const f = jit((a: Array, b: Array, c: Array) => nn.dotProductAttention(a, b, c, { isCausal: true }));
    expect(vals(f(q, k, v) as Array)).toEqual(vals(nn.dotProductAttention(q, k, v, { isCausal: true })));
    const text = f.lower(q, k, v).compile().asText();
    expect(text.match(/ dot_product_attention\(/g)?.length).toBe(1);
    expect(text).not.toMatch(/dot_product_attention_(fwd|bwd|lin)/);
  });

  it('calls of a compiled step reuse the fused results\' buffers, yet results handed out stay intact', () => {
    // (the forward's out and lse and the backward's dq, dk, dv land in reused buffers: see
    // Backend.executeIntoAll; the step's outputs that are such results are copied out per call)
    const step = jit(valueAndGrad(loss, { argnums: [0, 1, 2] }));
    const inner = jit((a: Array, b: Array, c: Array) => grad(loss, { argnums: [0, 1, 2] })(a, b, c));
    const q2 = random.normal(random.key(5), q.shape);
    const first = (step(q, k, v) as [Array, Array[]])[1].map(vals);
    const firstInner = (inner(q, k, v) as Array[]).map((g) => g);
    const snapshot = firstInner.map(vals);
    const second = (step(q2, k, v) as [Array, Array[]])[1].map(vals);
    inner(q2, k, v);
    expect(firstInner.map(vals)).toEqual(snapshot);
    const eager = (x: Array) => (valueAndGrad(loss, { argnums: [0, 1, 2] })(x, k, v) as [Array, Array[]])[1].map(vals);
    expect(first).toEqual(eager(q));
    expect(second).toEqual(eager(q2));
    expect(second).not.toEqual(first);
  });

  it('exports to StableHLO as standard ops (no tpukit custom call; see exportExpansion.test.ts)', () => {
    for (const text of [jit(grad(loss)).lower(q, k, v).asStableHlo(), jit(grad(loss)).lower(q, k, v).compile().asStableHlo()]) {
      expect(text).not.toContain('custom_call');
      expect(text).toContain('"stablehlo.dot_general"');
      expect(text).toContain('"stablehlo.exponential"');
    }
  });
});
