// Rematerialization in loop fusion (passes/fusion.ts `rematerializes`): a cheap elementwise
// value read by several loop fusions is recomputed inside each of them instead of written once
// and read back, when no fusion then reads more arrays than before. Results stay bit-identical
// to fusion without it; bytes never grow; transcendentals are never recomputed.
import { grad, nn, np } from '@tpukit/core';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { dce, envDefaults, fuseElementwise, type HloComputation, type HloInstruction, jit, setWasmKernels } from '../src/internal';
import { B, expectAllclose, f32 } from './build';

afterEach(() => setWasmKernels(true));

const loops = (c: HloComputation): HloInstruction[] => c.instructions.filter((i) => i.opcode === 'fusion');
const bodyPrims = (f: HloInstruction): string[] => f.called[0].instructions.filter((m) => m.opcode !== 'parameter').map((m) => m.prim!.name);
const bits = (a: any): number[] => Array.from(new Uint32Array(Float32Array.from(a.dataSync() as Float32Array).buffer));
const scalar = (b: B, v: number, shape: number[]): HloInstruction => b.op('broadcast_in_dim', [b.constant(v)], { shape, broadcastDimensions: [] });
const dot = (b: B, x: HloInstruction, w: HloInstruction): HloInstruction => b.op('dot_general', [x, w], { dimensionNumbers: [[[1], [0]], [[], []]], precision: null, preferredElementType: null });

/**
 * t = tanh(x); u = t + 1 (cheap); g1 = u * x feeds a dot; g2 = u * (dot + t). `u` is read by
 * two loop groups, and its operand t is read by the second group anyway.
 */
function twoReaders(): { c: HloComputation; u: HloInstruction } {
  const b = new B();
  const x = b.param(f32(4, 8));
  const w = b.param(f32(8, 8));
  const t = b.op('tanh', [x]);
  const u = b.op('add', [t, scalar(b, 1, [4, 8])]);
  const g1 = b.op('mul', [u, x]);
  const d = dot(b, g1, w);
  const g2 = b.op('mul', [u, b.op('add', [d, t])]);
  return { c: b.out(g2), u };
}

describe('rematerialization of cheap values in loop fusion', () => {
  it('a cheap value read by two loop groups is recomputed in both and written by neither', () => {
    const off = twoReaders().c;
    fuseElementwise(off, undefined, 1, false);
    dce(off);
    // Without it: the first group writes g1, u and t (u and t read again after the dot).
    const first = loops(off).find((f) => bodyPrims(f).includes('tanh'))!;
    expect(first.shapes).toHaveLength(3);
    const { c } = twoReaders();
    fuseElementwise(c, undefined, 1, true);
    dce(c);
    const fs = loops(c);
    expect(fs).toHaveLength(2);
    const [a, z] = fs;
    expect(a.shapes).toHaveLength(2); // g1 and t
    expect(bodyPrims(a).filter((p) => p === 'tanh')).toHaveLength(1);
    expect(bodyPrims(z)).not.toContain('tanh'); // tanh is read, never recomputed
    expect(bodyPrims(a)).toContain('add');
    expect(bodyPrims(z).filter((p) => p === 'add')).toHaveLength(2); // u's copy and dot + t
  });

  it('leaves a value whose recomputation would read more arrays (two operands read by neither group)', () => {
    const b = new B();
    const x = b.param(f32(4, 8));
    const y = b.param(f32(4, 8));
    const w = b.param(f32(8, 8));
    const v = b.op('add', [x, y]);
    const g1 = b.op('exp', [v]);
    const d = dot(b, g1, w);
    const c = b.out(b.op('mul', [v, b.op('exp', [d])]));
    fuseElementwise(c, undefined, 1, true);
    dce(c);
    const withV = loops(c).filter((f) => bodyPrims(f).includes('add'));
    expect(withV).toHaveLength(1); // computed once, read back by the other group
    expect(withV[0].shapes).toHaveLength(2);
  });

  it('leaves a product read by an add in another group (that pair would become one rounding)', () => {
    const b = new B();
    const x = b.param(f32(4, 8));
    const w = b.param(f32(8, 8));
    const t = b.op('tanh', [x]);
    const p = b.op('mul', [t, scalar(b, 3, [4, 8])]);
    const d = dot(b, b.op('mul', [p, x]), w);
    const c = b.out(b.op('add', [p, b.op('mul', [d, t])]));
    fuseElementwise(c, undefined, 1, true);
    dce(c);
    expect(loops(c).filter((f) => bodyPrims(f).includes('mul') && f.shapes.length > 1)).toHaveLength(1);
    expect(loops(c).map(bodyPrims).flat().filter((q) => q === 'mul')).toHaveLength(3); // p once, p*x, d*t
  });

  it('tanh-GELU MLP block, forward and backward: one forward loop kernel writing gelu and tanh, fewer bytes, same bits', () => {
    const seq = (n: number, s: number) => np.array(Float32Array.from({ length: n }, (_, i) => 2 * Math.sin(i * s)));
    const gelu = (x: any) => np.multiply(np.multiply(x, 0.5), np.add(1, np.tanh(np.multiply(0.7978845834732056, np.add(x, np.multiply(0.044715, np.multiply(np.multiply(x, x), x)))))));
    const args = [seq(6 * 16, 1).reshape([6, 16]), seq(16 * 32, 0.1).reshape([16, 32]), seq(32, 0.3), seq(32 * 16, 0.2).reshape([32, 16])];
    const block = (x: any, w1: any, b1: any, w2: any) => np.add(x, np.matmul(gelu(np.add(np.matmul(x, w1), b1)), w2));
    const loss = (x: any, w1: any, b1: any, w2: any) => np.sum(np.sin(block(x, w1, b1, w2)));
    const g = grad(loss, { argnums: [0, 1, 2, 3] } as any);
    const on = jit(g).lower(...args).compile({ rematerialize: true });
    const off = jit(g).lower(...args).compile({ rematerialize: false });
    const tanhLoops = (c: typeof on) => loops(c.module.entry).filter((f) => bodyPrims(f).includes('tanh'));
    expect(tanhLoops(on)).toHaveLength(1);
    expect(tanhLoops(on)[0].shapes).toHaveLength(2);
    expect(tanhLoops(off).map((f) => f.shapes.length)).toEqual([2]); // tanh and x*x; then a second kernel for gelu, x/2 and 1+t
    expect(loops(off.module.entry).length).toBeGreaterThan(loops(on.module.entry).length);
    expect(on.costAnalysis().bytesAccessed).toBeLessThan(off.costAnalysis().bytesAccessed);
    expect(on.costAnalysis().transcendentals).toBe(off.costAnalysis().transcendentals);
    for (const wasm of [true, false]) {
      setWasmKernels(wasm);
      const a = jit(g).lower(...args).compile({ rematerialize: true }).call(args);
      const b = jit(g).lower(...args).compile({ rematerialize: false }).call(args);
      a.forEach((r, k) => expect(bits(r)).toEqual(bits(b[k])));
    }
  });

  it('law: random elementwise programs split by dots and row sums: rematerialized == not, bit for bit; bytes never grow', () => {
    const UN = [(a: any) => np.tanh(a), (a: any) => np.square(a), (a: any) => np.negative(a), (a: any) => np.multiply(a, 0.5), (a: any) => np.add(a, 1), (a: any) => np.exp(np.negative(np.abs(a))), (a: any) => np.maximum(a, 0)];
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(6), fc.nat(3), fc.nat(9), fc.nat(9)), { minLength: 2, maxLength: 10 }),
        fc.integer({ min: 1, max: 19 }),
        fc.boolean(),
        (ops, n, wasm) => {
          const x = np.array(Float32Array.from({ length: 3 * n }, (_, i) => Math.sin(i * 1.3) * 2)).reshape([3, n]);
          const w = np.array(Float32Array.from({ length: n * n }, (_, i) => Math.cos(i * 0.7) * 0.5)).reshape([n, n]);
          const f = (a: any, m: any) => {
            const pool = [a];
            const pick = (j: number) => pool[j % pool.length];
            for (const [un, kind, i, j] of ops) {
              const u = UN[un](pick(i));
              // add, mul, sub, or a barrier (a dot or a row sum) that starts new loop groups
              const v = kind === 0 ? np.add(u, pick(j)) : kind === 1 ? np.multiply(u, pick(j)) : kind === 2 ? np.subtract(pick(j), u) : j % 2 ? np.matmul(u, m) : np.add(u, np.sum(pick(j), { axis: -1, keepdims: true }));
              pool.push(u, v);
            }
            return np.add(pool[pool.length - 1], np.multiply(pool[Math.floor(pool.length / 2)], pool[1]));
          };
          setWasmKernels(wasm);
          const on = jit(f).lower(x, w).compile({ rematerialize: true });
          const off = jit(f).lower(x, w).compile({ rematerialize: false });
          expect(on.costAnalysis().bytesAccessed).toBeLessThanOrEqual(off.costAnalysis().bytesAccessed);
          expect(on.costAnalysis().transcendentals).toBe(off.costAnalysis().transcendentals);
          expect(bits(on.call([x, w])[0])).toEqual(bits(off.call([x, w])[0]));
          const want = f(x, w).dataSync();
          on.call([x, w])[0]
            .dataSync()
            .forEach((v: number, k: number) => expect(Math.abs(v - want[k])).toBeLessThanOrEqual(1e-4 * (1 + Math.abs(want[k]))));
        },
      ),
      {
        numRuns: 60,
        // max(v, 0) read by a loop group and by a dot's epilogue, where v = tanh(x) + x would
        // join the loop group: recomputing the max moved v's write there (and read one more
        // scalar), 108 bytes against 104.
        // tanh(dot) read by tanh(tanh(dot)) and by the last dot's epilogue: as an extra output
        // of the later group it was no longer the first dot's epilogue, 152 bytes against 140.
        // tanh(dot) + x the same, one step further from the dot (152 against 140).
        // tanh(x) read by tanh(dot) + tanh(x)'s group and by the last dot's epilogue: as an
        // extra output it kept that group from being the first dot's epilogue (164 against 152).
        // dot * 0.5 read by two groups: recomputed in both (136 bytes) rather than written as
        // an extra output of the first (144).
        // max(dot, 0) recomputed in two groups instead of being the dot's epilogue: each group
        // reads the dot's result and the scalar 0, which the cost counted as 4 bytes read (a
        // scalar constant is a compile-time value in the kernel, as XLA fuses it: now 0), 144
        // against 140.
        examples: [
          [[[0, 0, 0, 0], [6, 0, 8, 5], [0, 3, 9, 3]], 1, false],
          [[[0, 0, 0, 0], [0, 0, 0, 0], [0, 3, 0, 3], [0, 0, 0, 0], [0, 0, 6, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 3, 9, 7]], 1, false],
          [[[0, 3, 0, 1], [0, 0, 0, 0], [0, 0, 2, 0], [0, 0, 6, 0], [0, 0, 0, 0], [0, 0, 0, 0], [1, 3, 6, 3]], 1, false],
          [[[1, 3, 0, 3], [0, 0, 0, 0], [0, 0, 7, 8], [0, 0, 0, 0], [0, 3, 6, 5], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]], 1, false],
          [[[0, 3, 0, 3], [0, 0, 0, 0], [0, 0, 0, 0], [3, 0, 2, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 3, 7, 3]], 1, false],
          [[[0, 3, 0, 7], [0, 0, 0, 0], [6, 0, 7, 0], [0, 0, 0, 0], [0, 3, 0, 6]], 1, false],
        ],
      },
    );
  });

  it('law: a cheap value shared across a dot, every way it can be read: rematerialized == not, bit for bit', () => {
    const FIRST = [(a: any) => np.tanh(a), (a: any) => np.exp(np.negative(np.abs(a))), (a: any) => a];
    const CHEAP = [(a: any) => np.multiply(a, 0.75), (a: any) => np.add(a, 1), (a: any) => np.multiply(a, a), (a: any) => np.negative(a), (a: any) => np.subtract(1, np.square(a))];
    const COMB = [(p: any, q: any) => np.add(p, q), (p: any, q: any) => np.multiply(p, q), (p: any, q: any) => np.subtract(p, q), (p: any, q: any) => np.subtract(q, p)];
    let rematerialized = 0;
    fc.assert(
      fc.property(fc.nat(2), fc.nat(4), fc.nat(3), fc.nat(3), fc.nat(3), fc.integer({ min: 1, max: 21 }), fc.boolean(), (f0, ch, c1, c2, c3, n, wasm) => {
        const x = np.array(Float32Array.from({ length: 3 * n }, (_, i) => Math.sin(i * 1.7) * 1.5)).reshape([3, n]);
        const w = np.array(Float32Array.from({ length: n * n }, (_, i) => Math.cos(i * 0.9) * 0.4)).reshape([n, n]);
        const f = (xa: any, m: any) => {
          const a = FIRST[f0](xa);
          const p = CHEAP[ch](a);
          const d = np.matmul(COMB[c1](p, xa), m);
          return COMB[c3](COMB[c2](p, d), a);
        };
        setWasmKernels(wasm);
        const on = jit(f).lower(x, w).compile({ rematerialize: true });
        const off = jit(f).lower(x, w).compile({ rematerialize: false });
        if (on.costAnalysis().bytesAccessed < off.costAnalysis().bytesAccessed) rematerialized++;
        expect(on.costAnalysis().bytesAccessed).toBeLessThanOrEqual(off.costAnalysis().bytesAccessed);
        expect(bits(on.call([x, w])[0])).toEqual(bits(off.call([x, w])[0]));
      }),
      { numRuns: 80 },
    );
    expect(rematerialized).toBeGreaterThan(10); // the law exercises the rule
  });

  it('softmax cross-entropy gradient: same bits, equal to eager', () => {
    const logits = np.array(Float32Array.from({ length: 4 * 9 }, (_, i) => Math.sin(i))).reshape([4, 9]);
    const labels = nn.oneHot(np.array([1, 3, 8, 0], 'int32'), 9);
    const f = (l: any, y: any) => np.negative(np.mean(np.sum(np.multiply(nn.logSoftmax(l), y), { axis: -1 })));
    const g = grad(f);
    const on = jit(g).lower(logits, labels).compile({ rematerialize: true });
    const off = jit(g).lower(logits, labels).compile({ rematerialize: false });
    expect(bits(on.call([logits, labels])[0])).toEqual(bits(off.call([logits, labels])[0]));
    expectAllclose(on.call([logits, labels])[0], g(logits, labels), { rtol: 1e-5, atol: 1e-6 });
  });

  it('TPUKIT_FUSION_REMAT=0 is a pipeline default (so compile-cache keys see it, as TPUKIT_ONEHOT); an explicit option wins', () => {
    const env = process.env.TPUKIT_FUSION_REMAT;
    // The tanh-GELU MLP's gradient (the reviewer's case: 7 kernels without rematerialisation, 5 with).
    const seq = (n: number, k: number) => np.array(Float32Array.from({ length: n }, (_, i) => 2 * Math.sin(i * k)));
    const args = [seq(6 * 16, 1).reshape([6, 16]), seq(16 * 32, 0.1).reshape([16, 32]), seq(32, 0.3), seq(32 * 16, 0.2).reshape([32, 16])];
    const gelu = (v: any) => np.multiply(np.multiply(v, 0.5), np.add(1, np.tanh(np.multiply(0.7978845834732056, np.add(v, np.multiply(0.044715, np.multiply(np.multiply(v, v), v)))))));
    const f = grad((xx: any, w1: any, b1: any, w2: any) => np.sum(np.sin(np.add(xx, np.matmul(gelu(np.add(np.matmul(xx, w1), b1)), w2)))), { argnums: [0, 1, 2, 3] } as never);
    const kernels = (opts: object) => (jit(f).lower(...args).compile(opts).asText().match(/ fusion\(/g) ?? []).length;
    process.env.TPUKIT_FUSION_REMAT = '0';
    try {
      expect(envDefaults()).toEqual({ rematerialize: false });
      expect(kernels({})).toBe(kernels({ rematerialize: false }));
      expect(kernels({ rematerialize: true })).not.toBe(kernels({ rematerialize: false }));
    } finally {
      if (env === undefined) delete process.env.TPUKIT_FUSION_REMAT;
      else process.env.TPUKIT_FUSION_REMAT = env;
    }
    expect(envDefaults().rematerialize).toBe(env === '0' ? false : undefined);
  });
});
