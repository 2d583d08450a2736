// The chain rule of loop-fusion rematerialisation (passes/fusion.ts `rematerializeChain`): a
// tanh-GELU forward no longer writes its tanh for the backward; the backward's fusion (the dot's
// GELU' epilogue) recomputes the whole expression from the values it reads anyway (u, the bias).
// Results stay bit-identical to the pipeline without it, wasm FMA contraction included.
import { grad, nn, np } from '@tpukit/core';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { type Compiled, envDefaults, type HloInstruction, jit, setKernelThreads, setWasmKernels } from '../src/internal';

afterEach(() => {
  setWasmKernels(true);
  setKernelThreads(null);
});

const bits = (a: any): number[] => Array.from(new Uint32Array(Float32Array.from(a.dataSync() as Float32Array).buffer));
const seq = (n: number, s: number, scale = 2): any => np.array(Float32Array.from({ length: n }, (_, i) => scale * Math.sin(i * s + 0.3)));
/** The formula written out (as the GPT's MLP), and core's nn.gelu (approximate by default). */
const geluOut = (x: any) => np.multiply(np.multiply(x, 0.5), np.add(1, np.tanh(np.multiply(0.7978845834732056, np.add(x, np.multiply(0.044715, np.multiply(np.multiply(x, x), x)))))));
const geluNn = (x: any) => nn.gelu(x);
const lossOf = (gelu: (x: any) => any) => (x: any, w1: any, b1: any, w2: any) => np.sum(np.sin(np.add(x, np.matmul(gelu(np.add(np.matmul(x, w1), b1)), w2))));
const argsOf = (n: number, d: number, m: number, special = false): any[] => {
  const x = Float32Array.from({ length: n * d }, (_, i) => 1.5 * Math.sin(i * 0.37 + 0.1));
  if (special) {
    x[3] = NaN;
    x[d + 1] = Infinity;
    x[2 * d + 2] = -Infinity;
    x[x.length - 1] = 3e38;
  }
  const b1 = Float32Array.from({ length: m }, (_, i) => 0.5 * Math.cos(i * 0.3));
  if (special) b1[m - 1] = NaN;
  return [np.array(x).reshape([n, d]), seq(d * m, 0.11, 0.2).reshape([d, m]), np.array(b1), seq(m * d, 0.23, 0.2).reshape([m, d])];
};
const fusions = (c: Compiled): HloInstruction[] => c.module.entry.instructions.filter((i) => i.opcode === 'fusion');
const prims = (f: HloInstruction): string[] => f.called[0].instructions.filter((m) => m.opcode !== 'parameter').map((m) => m.prim?.name ?? m.opcode);
/** How many fusions compute a tanh (1 when the forward writes it for the backward, 2 when the backward recomputes it). */
const tanhFusions = (c: Compiled): number => fusions(c).filter((f) => prims(f).includes('tanh')).length;

describe('rematerialised chains (a GELU tanh recomputed in the backward)', () => {
  it('the forward writes only gelu; the backward fusion recomputes the tanh; fewer bytes', () => {
    const g = grad(lossOf(geluOut), { argnums: [0, 1, 2, 3] } as never);
    const args = argsOf(24, 16, 40);
    const on = jit(g).lower(...args).compile({ rematChains: true });
    const off = jit(g).lower(...args).compile({ rematChains: false });
    const withTanh = (c: Compiled) => fusions(c).filter((f) => prims(f).includes('tanh'));
    // Off: the forward kernel writes gelu and the tanh, read back by the backward.
    expect(withTanh(off).map((f) => f.shapes.length)).toEqual([2]);
    // On: the forward writes gelu alone; the backward's kernel (the dot's epilogue) computes its own tanh.
    expect(withTanh(on).map((f) => f.shapes.length)).toEqual([1, 1]);
    expect(withTanh(on).map((f) => (f.params as { kind: string }).kind)).toEqual(['kLoop', 'kOutput']);
    // The exported module is the one without it (what XLA compiles), instruction ids aside.
    const names = (t: string) => t.replace(/\.\d+/g, '');
    expect(names(on.asText())).toBe(names(off.asText()));
    expect(on.costAnalysis().bytesAccessed).toBeLessThan(off.costAnalysis().bytesAccessed);
    expect(on.costAnalysis().transcendentals).toBeGreaterThan(off.costAnalysis().transcendentals);
  });

  const cases: [string, (x: any) => any, number, number, number, boolean][] = [
    ['GPT shapes (2048x128, MLP 512), written out', geluOut, 2048, 128, 512, false],
    ['GPT shapes, nn.gelu, NaN/inf inputs', geluNn, 2048, 128, 512, true],
    ['odd shapes 37x13, MLP 29, NaN/inf inputs', geluOut, 37, 13, 29, true],
    ['odd shapes 5x7, MLP 3, nn.gelu', geluNn, 5, 7, 3, false],
  ];
  for (const [name, gelu, n, d, m, special] of cases) {
    it(`gradient bit for bit, on == off: ${name}`, () => {
      const g = grad(lossOf(gelu), { argnums: [0, 1, 2, 3] } as never);
      const args = argsOf(n, d, m, special);
      const on = jit(g).lower(...args).compile({ rematChains: true });
      const off = jit(g).lower(...args).compile({ rematChains: false });
      expect([tanhFusions(on), tanhFusions(off)]).toEqual([2, 1]); // the rule applied
      for (const wasm of [true, false]) {
        setWasmKernels(wasm);
        for (const t of wasm ? [1, 2, 3] : [1]) {
          setKernelThreads(t);
          const a = on.call(args);
          const b = off.call(args);
          a.forEach((r: any, k: number) => expect(bits(r), `${wasm ? 'wasm' : 'js'} ${t}t output ${k}`).toEqual(bits(b[k])));
        }
      }
    });
  }

  it('refuses a chain whose product the writer reads outside it (the copy would contract it, the writer does not): same bits', () => {
    // p = (x w1 + b1) * 0.7 is read by tanh's add and by h = t * p: not contracted in the writer,
    // but a copy of tanh(p + u) alone would contract p into the add (one rounding fewer).
    const f = (x: any, w1: any, b1: any, w2: any) => {
      const u = np.add(np.matmul(x, w1), b1);
      const p = np.multiply(u, 0.7);
      const t = np.tanh(np.add(p, u));
      return np.sum(np.sin(np.matmul(np.multiply(t, p), w2)));
    };
    const g = grad(f, { argnums: [0, 1, 2, 3] } as never);
    const args = argsOf(64, 24, 40, true);
    const on = jit(g).lower(...args).compile({ rematChains: true });
    const off = jit(g).lower(...args).compile({ rematChains: false });
    expect(tanhFusions(on)).toBe(tanhFusions(off));
    for (const t of [1, 2]) {
      setKernelThreads(t);
      const a = on.call(args);
      const b = off.call(args);
      a.forEach((r: any, k: number) => expect(bits(r), `${t}t output ${k}`).toEqual(bits(b[k])));
    }
  });

  it('law: random elementwise programs split by dots and row sums: chains recomputed == not, bit for bit (wasm and JavaScript kernels, 1-3 threads)', () => {
    const UN = [(a: any) => np.tanh(a), (a: any) => np.square(a), (a: any) => np.negative(a), (a: any) => np.multiply(a, 0.5), (a: any) => np.add(a, 1), (a: any) => np.exp(np.negative(np.abs(a))), (a: any) => np.maximum(a, 0)];
    let applied = 0;
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(6), fc.nat(3), fc.nat(9), fc.nat(9)), { minLength: 2, maxLength: 10 }),
        fc.integer({ min: 1, max: 19 }),
        fc.boolean(),
        fc.integer({ min: 1, max: 3 }),
        (ops, n, wasm, threads) => {
          const x = np.array(Float32Array.from({ length: 3 * n }, (_, i) => Math.sin(i * 1.3) * 2)).reshape([3, n]);
          const w = np.array(Float32Array.from({ length: n * n }, (_, i) => Math.cos(i * 0.7) * 0.5)).reshape([n, n]);
          const f = (a: any, m: any) => {
            const pool = [a];
            const pick = (j: number) => pool[j % pool.length];
            for (const [un, kind, i, j] of ops) {
              const u = UN[un](pick(i));
              const v = kind === 0 ? np.add(u, pick(j)) : kind === 1 ? np.multiply(u, pick(j)) : kind === 2 ? np.subtract(pick(j), u) : j % 2 ? np.matmul(u, m) : np.add(u, np.sum(pick(j), { axis: -1, keepdims: true }));
              pool.push(u, v);
            }
            return np.add(pool[pool.length - 1], np.multiply(pool[Math.floor(pool.length / 2)], pool[1]));
          };
          setWasmKernels(wasm);
          setKernelThreads(threads);
          const on = jit(f).lower(x, w).compile({ rematChains: true });
          const off = jit(f).lower(x, w).compile({ rematChains: false });
          if (on.costAnalysis().transcendentals !== off.costAnalysis().transcendentals) applied++;
          expect(bits(on.call([x, w])[0])).toEqual(bits(off.call([x, w])[0]));
        },
      ),
      { numRuns: 80, examples: [[[[1, 0, 0, 0], [0, 0, 0, 0], [0, 3, 8, 7]], 1, false, 1]] },
    );
    expect(applied).toBeGreaterThan(0); // the law exercises the rule
  });

  it('TPUKIT_REMAT_CHAINS=0 is a pipeline default; an explicit option wins', () => {
    const env = process.env.TPUKIT_REMAT_CHAINS;
    const g = grad(lossOf(geluOut), { argnums: [0, 1, 2, 3] } as never);
    const args = argsOf(6, 16, 32);
    const count = (opts: object) => tanhFusions(jit(g).lower(...args).compile(opts));
    process.env.TPUKIT_REMAT_CHAINS = '0';
    try {
      expect(envDefaults()).toEqual({ rematChains: false });
      expect(count({})).toBe(1);
      expect(count({ rematChains: true })).toBe(2);
    } finally {
      if (env === undefined) delete process.env.TPUKIT_REMAT_CHAINS;
      else process.env.TPUKIT_REMAT_CHAINS = env;
    }
    expect(envDefaults().rematChains).toBe(env === '0' ? false : undefined);
  });
});
