// The fused attention (nn.dotProductAttention, implementation 'fused') under xla-lite's jit: the
// compiled training step runs each of its primitives as one instruction, results equal the eager
// run, and StableHLO export writes them as custom calls.
import { type Array, grad, nn, np, random, setBackend, getBackend, systolic, toStorage, valueAndGrad, withBackend } from '@tpukit/core';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arenaTraffic, jit, setZeroCopyDots } from '../src/index';

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
    const copied0 = arenaTraffic().outputCopiedBytes;
    const firstInner = (inner(q, k, v) as Array[]).map((g) => g);
    // The gradients are the backward's results, so they came out of its reused buffers: each
    // output was copied out of one (nothing copied here would mean nothing was reused).
    expect(arenaTraffic().outputCopiedBytes - copied0).toBe(4 * (q.size + k.size + v.size));
    const snapshot = firstInner.map(vals);
    const second = (step(q2, k, v) as [Array, Array[]])[1].map(vals);
    inner(q2, k, v);
    expect(firstInner.map(vals)).toEqual(snapshot);
    const eager = (x: Array) => (valueAndGrad(loss, { argnums: [0, 1, 2] })(x, k, v) as [Array, Array[]])[1].map(vals);
    expect(first).toEqual(eager(q));
    expect(second).toEqual(eager(q2));
    expect(second).not.toEqual(first);
  });

  it('with zero-copy dots the fused results lie in the GEMM memory: the projections read them in place, bit-identical', () => {
    const [B, T, H, G, Dh, D] = [2, 32, 4, 2, 16, 64];
    const x = random.normal(random.key(6), [B, T, D]);
    const x2 = random.normal(random.key(7), [B, T, D]);
    const ws = [[D, H * Dh], [D, G * Dh], [D, G * Dh], [H * Dh, D]].map((sh, i) => random.normal(random.key(10 + i), sh));
    const attn = (wq: Array, wk: Array, wv: Array, wo: Array, xx: Array): Array => {
      const proj = (w: Array, heads: number) => np.reshape(np.matmul(xx, w), [B, T, heads, Dh]);
      const o = nn.dotProductAttention(proj(wq, H), proj(wk, G), proj(wv, G), { isCausal: true });
      return np.sum(np.square(np.matmul(np.reshape(o, [B, T, H * Dh]), wo)));
    };
    /** The step, compiled (on its first call, here) with zero-copy dots on or off. */
    const compiled = (zeroCopy: boolean) => {
      setZeroCopyDots(zeroCopy);
      try {
        const f = jit(valueAndGrad(attn, { argnums: [0, 1, 2, 3] }));
        f(...ws, x);
        return f;
      } finally {
        setZeroCopyDots(true);
      }
    };
    const on = compiled(true);
    const off = compiled(false);
    const engine = systolic.backend.engine;
    const bits = (a: Array) => [...new Uint32Array((toStorage(a) as Float32Array).slice().buffer)];
    /** One call: its results' bits and the bytes it staged into the GEMM's memory. */
    const call = (f: typeof on, xx: Array) => {
      const s0 = engine.traffic.stagedBytes;
      const [l, gs] = withBackend('systolic', () => f(...ws, xx)) as [Array, Array[]];
      return { res: [l, ...gs], staged: engine.traffic.stagedBytes - s0 };
    };
    const a = call(on, x);
    const b = call(off, x);
    expect(a.res.map(bits)).toEqual(b.res.map(bits));
    // Every fused result is read by at least one dot (out by the output projection and its
    // weight's gradient; dq, dk, dv by their weights' gradients): none of them staged.
    const bytes = 4 * B * T * Dh;
    expect(b.staged - a.staged).toBeGreaterThanOrEqual(bytes * (2 * H + H + 2 * G));
    // Results handed out stay intact through later calls, which overwrite the reused buffers.
    const kept = a.res.map(bits);
    const later = call(on, x2);
    expect(a.res.map(bits)).toEqual(kept);
    expect(later.res.map(bits)).not.toEqual(kept);
    expect(later.res.map(bits)).toEqual(call(off, x2).res.map(bits));
  });

  /**
   * A biased attention block's value and gradients (the bias gradients are column sums, wasm
   * kernels, over dq, dk, dv; the biased q, k, v, wasm epilogues, are the attention's operands),
   * compiled with zero-copy dots on or off and called on each of `xs`: each call's result bits
   * and the bytes it copied into and out of the arena.
   */
  const biasedAttention = (dims: { B: number; T: number; H: number; Dh: number; D: number }, seed: number, zeroCopy: boolean) => {
    const { B, T, H, Dh, D } = dims;
    const xs = [0, 1].map((s) => random.normal(random.key(seed + s), [B, T, D]));
    const ws = [0, 1, 2, 3].map((i) => random.normal(random.key(seed + 10 + i), i < 3 ? [D, H * Dh] : [H * Dh, D]));
    const bs = [0, 1, 2].map((i) => random.normal(random.key(seed + 20 + i), [H * Dh]));
    const attn = (wq: Array, wk: Array, wv: Array, wo: Array, bq: Array, bk: Array, bv: Array, xx: Array): Array => {
      const proj = (w: Array, b: Array) => np.reshape(np.add(np.matmul(xx, w), b), [B, T, H, Dh]);
      const o = nn.dotProductAttention(proj(wq, bq), proj(wk, bk), proj(wv, bv), { isCausal: true });
      return np.sum(np.square(np.matmul(np.reshape(o, [B, T, H * Dh]), wo)));
    };
    const bits = (a: Array) => [...new Uint32Array((toStorage(a) as Float32Array).slice().buffer)];
    setZeroCopyDots(zeroCopy);
    try {
      const f = jit(valueAndGrad(attn, { argnums: [0, 1, 2, 3, 4, 5, 6] }));
      return xs.map((x) => {
        const t0 = arenaTraffic();
        const [l, gs] = f(...ws, ...bs, x) as [Array, Array[]];
        const t1 = arenaTraffic();
        return { bits: [l, ...gs].map(bits), into: t1.copiedInBytes - t0.copiedInBytes, out: t1.copiedOutBytes - t0.copiedOutBytes };
      });
    } finally {
      setZeroCopyDots(true);
    }
  };

  it('with zero-copy dots the fused results that kernels read lie in the arena: q, k, v not copied out for it, dq, dk, dv not copied in, bit-identical', () => {
    const dims = { B: 2, T: 16, H: 2, Dh: 8, D: 16 };
    const on = biasedAttention(dims, 8, true);
    const off = biasedAttention(dims, 8, false);
    const qkv = 3 * 4 * dims.B * dims.T * dims.H * dims.Dh;
    on.forEach((a, s) => {
      expect(a.bits, `call ${s}`).toEqual(off[s].bits);
      // (dq, dk, dv written into the arena by the backend, q, k, v read there: every call.)
      expect(off[s].into - a.into, `call ${s}: bytes not copied in`).toBeGreaterThanOrEqual(qkv);
      expect(off[s].out - a.out, `call ${s}: bytes not copied out`).toBeGreaterThanOrEqual(qkv);
    });
    expect(on[1].bits).not.toEqual(on[0].bits);
    // A backend that declines to write into caller storage: its fresh results are copied into the regions.
    const b = getBackend() as { executeIntoAll?: unknown };
    const own = Object.getOwnPropertyDescriptor(b, 'executeIntoAll');
    Object.defineProperty(b, 'executeIntoAll', { value: undefined, configurable: true, writable: true });
    try {
      biasedAttention(dims, 8, true).forEach((a, s) => expect(a.bits, `declined, call ${s}`).toEqual(off[s].bits));
    } finally {
      if (own) Object.defineProperty(b, 'executeIntoAll', own);
      else delete b.executeIntoAll;
    }
    expect(typeof (getBackend() as { executeIntoAll?: unknown }).executeIntoAll).toBe('function');
  });

  it('law: zero-copy (attention views and result regions) equals the copying path, call after call, for any block shape', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 3 }), fc.constantFrom(4, 8, 12), fc.integer({ min: 1, max: 24 }), fc.integer({ min: 0, max: 1000 }), (B, T, H, Dh, D, seed) => {
        const dims = { B, T, H, Dh, D };
        const on = biasedAttention(dims, seed, true);
        const off = biasedAttention(dims, seed, false);
        on.forEach((a, s) => expect(a.bits, `call ${s}`).toEqual(off[s].bits));
      }),
      { numRuns: 6 },
    );
  });

  it('exports to StableHLO as standard ops (no tpukit custom call; see exportExpansion.test.ts)', () => {
    for (const text of [jit(grad(loss)).lower(q, k, v).asStableHlo(), jit(grad(loss)).lower(q, k, v).compile().asStableHlo()]) {
      expect(text).not.toContain('custom_call');
      expect(text).toContain('"stablehlo.dot_general"');
      expect(text).toContain('"stablehlo.exponential"');
    }
  });
});
