// Multi-output loop fusion (passes/fusion.ts): an elementwise value read by a loop group and by
// instructions after that group's root joins the group and leaves it as an extra output, so it
// is written once where it is computed (wasm loop kernel and JavaScript kernel).
import { nn, np } from '@tpukit/core';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { dce, fuseElementwise, jit, kernelThreadsAvailable, poolStats, setKernelThreads, setWasmKernels } from '../src/internal';
import { B, f32, prims } from './build';
import { getParallelWork, PARALLEL_WORK, setParallelWork } from '../src/wasm/fusionPlan';

afterEach(() => {
  setWasmKernels(true);
  setKernelThreads(null);
});

const fusions = (c: { module: { entry: { instructions: { opcode: string; shapes: unknown[] }[] } } }) => c.module.entry.instructions.filter((i) => i.opcode === 'fusion');

describe('multi-output loop fusion', () => {
  it('a value read by a group and by a later op becomes an extra output of that group', () => {
    const b = new B();
    const x = b.param(f32(4, 8));
    const y = b.param(f32(4, 8));
    const t = b.op('tanh', [x]);
    const u = b.op('mul', [t, y]); // the group root
    const later = b.op('reduce_sum', [b.op('dot_general', [u, t], { dimensionNumbers: [[[1], [1]], [[], []]], precision: null, preferredElementType: null })], { axes: [0] });
    const c = b.out(later);
    expect(fuseElementwise(c, undefined, 1)).toBeGreaterThanOrEqual(1);
    dce(c);
    const loop = c.instructions.find((i) => i.opcode === 'fusion' && i.called[0].instructions.some((m) => m.prim?.name === 'tanh'))!;
    expect(loop.shapes).toHaveLength(2); // mul (root) and tanh (read again by the dot)
    expect(prims(loop.called[0]).filter((p) => p !== 'parameter')).toEqual(['tanh', 'mul']);
  });

  it('Adam: one kernel per parameter writes m, v and the parameter, equal to eager (JS kernel bit for bit)', () => {
    const p = np.array(Float32Array.from({ length: 96 }, (_, i) => Math.sin(i))).reshape([8, 12]);
    const g = np.array(Float32Array.from({ length: 96 }, (_, i) => Math.cos(i * 0.3))).reshape([8, 12]);
    const m = np.multiply(g, 0.5);
    const v = np.multiply(np.square(g), 0.25);
    const adam = (p0: any, m0: any, v0: any, g0: any) => {
      const m1 = np.add(np.multiply(m0, 0.9), np.multiply(g0, 0.1));
      const v1 = np.add(np.multiply(v0, 0.999), np.multiply(np.square(g0), 0.001));
      return [np.subtract(p0, np.multiply(3e-4, np.divide(m1, np.add(np.sqrt(v1), 1e-8)))), m1, v1];
    };
    const want: number[][] = adam(p, m, v, g).map((a: any) => Array.from(a.dataSync() as Float32Array));
    for (const wasm of [true, false]) {
      setWasmKernels(wasm);
      const c = jit(adam).lower(p, m, v, g).compile();
      expect(fusions(c)).toHaveLength(1);
      expect(fusions(c)[0].shapes).toHaveLength(3);
      expect(c.stats.wasmKernels).toBe(wasm ? 1 : 0);
      const got: number[][] = c.call([p, m, v, g]).map((a) => Array.from(a.dataSync() as Float32Array));
      // The JS kernel rounds as eager does; the wasm kernel may contract a*b+c into one rounding.
      if (!wasm) expect(got).toEqual(want);
      else got.forEach((o, q) => o.forEach((x, k) => expect(Math.abs(x - want[q][k])).toBeLessThanOrEqual(1e-6 * Math.abs(want[q][k]))));
    }
  });

  it('law: jit equals eager on random elementwise DAGs whose values are read again later', () => {
    const UN = [(a: any) => np.tanh(a), (a: any) => np.square(a), (a: any) => np.exp(np.negative(np.abs(a))), (a: any) => nn.relu(a)];
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(3), fc.nat(9), fc.nat(9), fc.boolean()), { minLength: 1, maxLength: 7 }), fc.integer({ min: 1, max: 37 }), (ops, n) => {
        const x = np.array(Float32Array.from({ length: 2 * n }, (_, i) => Math.sin(i * 1.3) * 2)).reshape([2, n]);
        const f = (a: any) => {
          const pool = [a];
          for (const [op, i, j, mul] of ops) {
            const u = UN[op](pool[i % pool.length]);
            pool.push(mul ? np.multiply(u, pool[j % pool.length]) : np.add(u, pool[j % pool.length]));
          }
          // Every value leaves: each is read by the next ops and by the output sum.
          return np.add(pool[pool.length - 1], np.sum(np.stack(pool), { axis: 0 }));
        };
        const want = Array.from(f(x).dataSync());
        for (const wasm of [true, false]) {
          setWasmKernels(wasm);
          const got = Array.from(jit(f).lower(x).compile().call([x])[0].dataSync());
          // tanh and exp: the wasm kernels' own polynomials (within a few ulps); the rest exact.
          got.forEach((v, k) => expect(Math.abs(v - want[k])).toBeLessThanOrEqual(1e-5 * (1 + Math.abs(want[k]))));
        }
      }),
      { numRuns: 40 },
    );
  });

  it('law: 1, 2 and 3 kernel threads give bit-identical results (multi-output loops, masked softmax, one-hot)', () => {
    // Every case on threads (its work is past PARALLEL_WORK; the default threshold is higher).
    const threshold = getParallelWork();
    setParallelWork(PARALLEL_WORK);
    try {
      fc.assert(
        fc.property(fc.integer({ min: 2, max: 6 }), fc.integer({ min: 64, max: 160 }), fc.integer({ min: 0, max: 1000 }), (rows, n, seed) => {
          const data = (s: number) => np.array(Float32Array.from({ length: rows * 64 * n }, (_, i) => Math.sin(i * 0.37 + s) * 3)).reshape([rows, 64, n]);
          const x = data(seed);
          const other = data(seed + 1);
          const ids = np.array(Int32Array.from({ length: rows * 64 }, (_, i) => (i * 7 + seed) % n), 'int32').reshape([rows, 64]);
          const cases: [(a: any, b: any) => any, any[]][] = [
            // tanh read by the loop root and by the later sum: a two-output loop kernel.
            [(a) => { const t = np.tanh(a); return np.add(np.multiply(t, a), np.sum(t, { axis: -1, keepdims: true })); }, [x]],
            [(a) => nn.softmax(np.where(np.tri(64, n, 0, 'bool'), a, -1e9), { axis: -1 }), [x]],
            [(a, i) => np.multiply(nn.oneHot(i, n), np.exp(a)), [x, ids]],
          ];
          for (const [f, args] of cases) {
            const c = jit(f)
              .lower(...(args as [any, any]))
              .compile();
            const out = [1, 2, 3].map((t) => {
              // Other data through the arena first (one thread), so an item a thread skipped cannot pass.
              setKernelThreads(1);
              c.call([other, ...args.slice(1)]);
              setKernelThreads(t);
              const jobs = poolStats().parallelJobs;
              const got = Array.from(c.call(args)[0].dataSync());
              // Each case at each shape ran on the pool with more than one thread.
              if (t > 1 && kernelThreadsAvailable()) expect(poolStats().parallelJobs).toBeGreaterThan(jobs);
              return got;
            });
            expect(out[1]).toEqual(out[0]);
            expect(out[2]).toEqual(out[0]);
          }
          setKernelThreads(null);
        }),
        { numRuns: 6 },
      );
    } finally {
      setKernelThreads(null);
      setParallelWork(threshold);
    }
  });
});
