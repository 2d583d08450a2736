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

  it('exports to StableHLO as standard ops (no tpukit custom call; see exportExpansion.test.ts)', () => {
    for (const text of [jit(grad(loss)).lower(q, k, v).asStableHlo(), jit(grad(loss)).lower(q, k, v).compile().asStableHlo()]) {
      expect(text).not.toContain('custom_call');
      expect(text).toContain('"stablehlo.dot_general"');
      expect(text).toContain('"stablehlo.exponential"');
    }
  });
});
