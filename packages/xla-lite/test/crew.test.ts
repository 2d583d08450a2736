// core's worker crew (core/src/wasm/workerPool.ts): one worker set runs the jobs of the systolic
// GEMM pool, the fused attention's pool and xla-lite's kernel pool. Jobs of the three kinds in any
// order and at any thread count give the one-thread results bit for bit.
import { type Array, getNumThreads, nn, np, random, setNumThreads, toStorage, withBackend } from '@tpukit/core';
import { wasm } from '@tpukit/core/internal';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { jit, kernelThreadsAvailable, setKernelThreads } from '../src/internal';

const bits = (a: Array): number[] => [...new Uint32Array(Float32Array.from(toStorage(a) as Float32Array).buffer)];

describe('one worker crew for the GEMM, attention and kernel pools', () => {
  const threads = getNumThreads();
  afterAll(() => {
    setNumThreads(threads);
    setKernelThreads(null);
  });
  // A product the GEMM splits (192 x 256 x 256 multiply-adds), a fused attention with 8 items, and a
  // kernel over 2^18 elements (past xla-lite's parallel work of 2^18).
  const a = random.normal(random.key(1), [192, 256]);
  const b = random.normal(random.key(2), [256, 256]);
  const q = random.normal(random.key(3), [2, 16, 4, 8]);
  const k = random.normal(random.key(4), [2, 16, 4, 8]);
  const x = random.normal(random.key(5), [512, 512]);
  const kernel = jit((v: Array) => np.tanh(np.multiply(v, 1.5)));
  const ops: (() => Array)[] = [
    () => withBackend('systolic', () => np.matmul(a, b)),
    () => withBackend('systolic', () => nn.dotProductAttention(q, k, k, { isCausal: true, implementation: 'fused' })),
    () => withBackend('systolic', () => kernel(x) as Array),
  ];

  it.runIf(wasm.WorkerPool.available() && kernelThreadsAvailable())('jobs of every kind back to back on the same workers, at 1-3 threads, equal the one-thread results', () => {
    setNumThreads(1);
    const want = ops.map((f) => bits(f()));
    const enabled = wasm.poolJobTimes.enabled;
    const jobs = (n: string): number => wasm.poolJobTimes.byPool[n]?.jobs ?? 0;
    const before = ['gemm', 'attention', 'kernels'].map(jobs);
    const switches = wasm.poolJobTimes.switches;
    wasm.poolJobTimes.enabled = true;
    try {
      fc.assert(
        fc.property(fc.array(fc.record({ op: fc.integer({ min: 0, max: 2 }), threads: fc.integer({ min: 1, max: 3 }) }), { minLength: 1, maxLength: 8 }), (seq) => {
          for (const { op, threads: t } of seq) {
            setNumThreads(t);
            expect(bits(ops[op]()), `op ${op} on ${t} threads`).toEqual(want[op]);
          }
        }),
        { numRuns: 12 },
      );
      // Kinds interleaved on 2 threads until the worker has joined a job of every pool (a worker
      // running the wrong kind's code, or none, never joins: the calling thread computes alone and
      // the results stay right, so this counts joins; bounded, not timed).
      setNumThreads(2);
      const joined = (): number[] => ['gemm', 'attention', 'kernels'].map((n) => wasm.poolJobTimes.byPool[n]?.joined ?? 0);
      const j0 = joined();
      for (let r = 0; r < 100 && joined().some((n, i) => n === j0[i]); r++) for (const op of [0, 1, 2]) expect(bits(ops[op]())).toEqual(want[op]);
      joined().forEach((n, i) => expect(n - j0[i], `${['gemm', 'attention', 'kernels'][i]} pool jobs a worker joined`).toBeGreaterThan(0));
      const after = ['gemm', 'attention', 'kernels'].map(jobs);
      after.forEach((n, i) => expect(n - before[i], `${['gemm', 'attention', 'kernels'][i]} pool jobs`).toBeGreaterThanOrEqual(1));
      expect(wasm.poolJobTimes.switches - switches).toBeGreaterThanOrEqual(2);
      expect(wasm.crewStats().workers, 'one crew: at most 2 workers for 3 threads').toBeLessThanOrEqual(2);
    } finally {
      wasm.poolJobTimes.enabled = enabled;
    }
  });
});
