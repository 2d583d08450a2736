// checkpoint (jax.checkpoint) under jit: the backward pass's recomputation reads its inputs
// through an optimization barrier (JAX's prevent_cse, default true), which common-subexpression
// elimination does not look through; without it CSE merged the recomputation with the forward
// pass and the forward intermediates stayed alive until the backward pass (no memory saved).
// The barriers are dropped after the passes that could merge (passes/barriers.ts).
import { type Array, checkpoint, grad, lax, np, random, valueAndGrad } from '@tpukit/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jit } from '../src/index';
import { dropBarriers } from '../src/passes/barriers';
import { cse } from '../src/passes/cse';
import { lowerJaxpr } from '../src/internal';
import { makeJaxpr } from '@tpukit/core';
import { expectAllclose } from './build';

/** How many instructions of `op` the module text computes (fused bodies included). */
const count = (text: string, op: string): number => (text.match(new RegExp(` ${op}\\(`, 'g')) ?? []).length;

describe('optimization barriers in xla-lite', () => {
  it('CSE does not merge a computation fed by a barrier with the same computation on its operand', () => {
    // As jax.lax.optimization_barrier's docstring: sin of barrier(x) and sin of x both stay.
    const f = (x: Array) => np.add(np.sin(lax.optimizationBarrier(x)), np.sin(x));
    const x = np.array([0.5, 1, 2]).astype('float32');
    const c = jit(f).lower(x).compile();
    expect(count(c.asText(), 'sin')).toBe(2);
    expect(c.asText()).not.toContain('opt-barrier');
    expect(c.passStats.barriers).toBe(1);
    expectAllclose(jit(f)(x) as Array, np.multiply(np.sin(x), 2), { rtol: 1e-6 });
    // Without the barrier the two sines are one.
    expect(count(jit((v: Array) => np.add(np.sin(v), np.sin(v))).lower(x).compile().asText(), 'sin')).toBe(1);
  });

  it('two barriers over the same operand are not merged; dropping them reads the operands', () => {
    const a = np.array([1, 2]).astype('float32');
    const b = np.array([3]).astype('int32');
    const mod = lowerJaxpr(makeJaxpr((u: Array, v: Array) => [...lax.optimizationBarrier([u, v]), lax.optimizationBarrier(u), lax.optimizationBarrier(u)])(a, b));
    const c = mod.entry;
    expect(cse(c)).toBe(0);
    const barriers = c.instructions.filter((i) => i.opcode === 'opt-barrier');
    expect(barriers.length).toBe(3);
    expect(dropBarriers(c)).toBe(3);
    expect(c.instructions.some((i) => i.opcode === 'opt-barrier' || i.opcode === 'get-tuple-element')).toBe(false);
    expect(c.outputs).toEqual([c.params[0], c.params[1], c.params[0], c.params[0]]);
    const run = jit((u: Array, v: Array) => [...lax.optimizationBarrier([u, v]), lax.optimizationBarrier(np.multiply(u, 2))]);
    const [o0, o1, o2] = run(a, b) as Array[];
    expect([o0.dataSync(), o1.dtype, o1.dataSync(), o2.dataSync()]).toEqual([a.dataSync(), 'int32', b.dataSync(), Float32Array.from([2, 4])]);
  });

  it('exports as stablehlo.optimization_barrier with one result per operand', () => {
    const a = np.array([1, 2]).astype('float32');
    const b = np.array([3]).astype('int32');
    const text = jit((u: Array, v: Array) => {
      const [p, q] = lax.optimizationBarrier([u, v]);
      return [np.add(p, 1), q];
    }).lower(a, b).asStableHlo();
    expect(text).toMatch(/(%\d+):2 = "stablehlo\.optimization_barrier"\(%arg0, %arg1\) : \(tensor<2xf32>, tensor<1xi32>\) -> \(tensor<2xf32>, tensor<1xi32>\)/);
    const r = /(%\d+):2 = "stablehlo\.optimization_barrier"/.exec(text)![1];
    expect(text).toContain(`"stablehlo.add"(${r}#0,`);
  });
});

describe('checkpoint under jit', () => {
  const L = 4;
  const B = 1024;
  const D = 16;
  const H = 512;
  const ws = globalThis.Array.from({ length: L }, (_: unknown, i: number) => [np.multiply(random.normal(random.key(10 + i), [D, H]), 0.1), np.multiply(random.normal(random.key(20 + i), [H, D]), 0.1)]);
  const x = random.normal(random.key(1), [B, D]);
  const layer = (h: Array, w: Array[]) => np.add(h, np.matmul(np.tanh(np.matmul(h, w[0])), w[1]));
  const model = (wrap: (f: typeof layer) => typeof layer) => (p: Array[][], h: Array) => {
    for (const w of p) h = wrap(layer)(h, w);
    return np.sum(np.square(h));
  };
  const plain = model((f) => f);
  const remat = model((f) => checkpoint(f));
  const merged = model((f) => checkpoint(f, { preventCse: false }));

  it('keeps the recomputation, so the peak memory drops; with preventCse false CSE merges it back', () => {
    const compiled = (f: typeof plain) => jit(valueAndGrad(f)).lower(ws, x).compile();
    const [cp, cr, cm] = [compiled(plain), compiled(remat), compiled(merged)];
    // Forward tanh per layer, plus the recomputation's under remat (the derivative reuses them).
    expect(count(cr.asText(), 'tanh')).toBe(2 * count(cp.asText(), 'tanh'));
    expect(count(cm.asText(), 'tanh')).toBe(count(cp.asText(), 'tanh'));
    const peak = (c: typeof cp) => c.memoryAnalysis().peakBytes;
    // The [1024, 512] float32 activations are 2 MiB each; measured: plain 17.6 MB, merged 11.2, remat 9.0.
    expect(peak(cr)).toBeLessThan(peak(cm) - 2 * 2 ** 20);
    expect(peak(cr)).toBeLessThan(peak(cp) / 1.5);
  });

  it('gives the gradient of the function without checkpoint', () => {
    const [v0, g0] = jit(valueAndGrad(plain))(ws, x) as [Array, Array[][]];
    const [v1, g1] = jit(valueAndGrad(remat))(ws, x) as [Array, Array[][]];
    expectAllclose(v1, v0, { rtol: 1e-6 });
    g1.forEach((pair, i) => pair.forEach((g, k) => expectAllclose(g, g0[i][k], { rtol: 1e-5, atol: 1e-6 })));
  });

  it('law: jit(grad(checkpoint(f))) equals grad(f) for random inputs, with and without preventCse, inside scan too', () => {
    const f = (v: Array, s: Array) => np.multiply(np.sin(np.multiply(v, s)), np.tanh(v));
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 0, max: 1000 }), fc.boolean(), (n, seed, preventCse) => {
        const v = random.normal(random.key(seed), [n]);
        const s = random.normal(random.key(seed + 1), [n]);
        const want = grad((u: Array) => np.sum(f(u, s)))(v) as Array;
        const got = jit(grad((u: Array) => np.sum(checkpoint(f, { preventCse })(u, s))))(v) as Array;
        expectAllclose(got, want, { rtol: 1e-5, atol: 1e-6 });
        // A checkpointed scan body (MaxText's scanned layers): three steps of the same layer.
        const scanned = (u: Array) => np.sum(lax.scan((c: Array, _: Array) => [checkpoint(f, { preventCse })(c, s), c] as [Array, Array], u, np.zeros([3]))[0]);
        const unrolled = (u: Array) => np.sum(f(f(f(u, s), s), s));
        expectAllclose(jit(grad(scanned))(v) as Array, grad(unrolled)(v) as Array, { rtol: 1e-4, atol: 1e-5 });
      }),
      { numRuns: 12 },
    );
  });
});
