// Row fusions (kRow: softmax, log-softmax, layer norm, RMSNorm and their gradients) as
// WebAssembly kernels (src/wasm/rowPlan.ts, emitKernel.ts kind 'rows'), against the JavaScript
// row kernels and eager execution, through jit, on random shapes (row counts 1..40, row lengths
// 1..300, most not multiples of 4); multi-output row fusions (a training step's forward pass);
// results independent of the thread count (each row is one work item, computed by one thread
// with its own scratch rows).
import { type Array, grad, nn, np } from '@tpukit/core';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { type Compiled, getParallelWork, kernelThreadsAvailable, lower, poolStats, setKernelThreads, setParallelWork, setWasmKernels } from '../src/index';
import { PARALLEL_WORK } from '../src/wasm/fusionPlan';
import { planRowFusion, ROW_SCRATCH_THREADS } from '../src/wasm/emitKernel';
import { expectAllclose } from './build';
import { compileBoth, type Fn } from './wasmCompare';

afterAll(() => {
  setWasmKernels(true);
  setKernelThreads(null);
});


const rand = (shape: number[], seed: number, scale = 3): Array => {
  const n = shape.reduce((a, b) => a * b, 1);
  let s = seed * 2654435761 + 12345;
  const v = Float32Array.from({ length: n }, () => {
    s = (s * 1103515245 + 12345) >>> 0;
    return ((s / 2 ** 32) * 2 - 1) * scale;
  });
  return np.array(v, 'float32').reshape(shape);
};

const layerNorm: Fn = (x, g, b) => {
  const mu = np.mean(x, { axis: -1, keepdims: true });
  const v = np.mean(np.square(np.subtract(x, mu)), { axis: -1, keepdims: true });
  return np.add(np.multiply(np.multiply(np.subtract(x, mu), np.reciprocal(np.sqrt(np.add(v, 1e-5)))), g), b);
};
const rmsNorm: Fn = (x, g) => np.multiply(np.multiply(x, np.reciprocal(np.sqrt(np.add(np.mean(np.square(x), { axis: -1, keepdims: true }), 1e-6)))), g);

/** Each case: the function, and its extra arguments (per-column scales) for row length C. */
const CASES: [string, Fn, (c: number, seed: number) => Array[]][] = [
  ['softmax', (x) => nn.softmax(x), () => []],
  ['log-softmax', (x) => nn.logSoftmax(x), () => []],
  ['layer norm', layerNorm, (c, s) => [rand([c], s + 1, 1), rand([c], s + 2, 1)]],
  ['RMSNorm', rmsNorm, (c, s) => [rand([c], s + 1, 1)]],
];

/** Gradient of a scalar loss through `f` with respect to its first argument. */
const gradOf = (f: Fn): Fn => {
  const loss = (...a: Array[]) => np.sum(np.multiply(np.sin(f(...a)), 1.5));
  return (...a: Array[]) => grad(loss)(...a) as Array;
};

function rowFusionsRunAsWasm(c: Compiled, minRowFusions = 1): void {
  // Every generated kernel runs as WebAssembly: the row kernels included.
  expect(c.stats.rowFusions).toBeGreaterThanOrEqual(minRowFusions);
  expect(c.stats.wasmKernels).toBe(c.stats.fusedKernels);
}

describe('row fusions as WebAssembly kernels agree with the JavaScript row kernels and eager execution', () => {
  for (const [name, f, extra] of CASES) {
    it(`${name} and its gradient on random shapes`, () => {
      fc.assert(
        fc.property(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 300 }), fc.boolean(), fc.nat(1000), (rows, C, split, seed) => {
          const shape = split && rows % 2 === 0 ? [2, rows / 2, C] : [rows, C];
          const args = [rand(shape, seed), ...extra(C, seed)];
          for (const fn of [f, gradOf(f)]) {
            const { js, wasm } = compileBoth(fn, args);
            const want = fn(...args);
            const a = wasm.call(args)[0];
            const b = js.call(args)[0];
            // (Tiny shapes may fuse without a row kernel; then there is no kRow to check.)
            rowFusionsRunAsWasm(wasm, 0);
            expect(wasm.stats.rowFusions).toBe(js.stats.rowFusions);
            if (shape.length === 2 && rows >= 2 && C >= 8) expect(wasm.stats.rowFusions).toBeGreaterThanOrEqual(1);
            expect(js.stats.wasmKernels).toBe(0);
            // The sums' order differs (four float64 partial sums vs one): ulp-level differences.
            expectAllclose(a, b, { rtol: 1e-5, atol: 1e-5 });
            expectAllclose(a, want, { rtol: 1e-4, atol: 1e-5 });
          }
        }),
        { numRuns: 8 },
      );
    });
  }

  it('max keeps NaN: a NaN in a row makes that row NaN, other rows are unaffected', () => {
    const x = rand([5, 13], 3);
    const d = x.dataSync() as Float32Array;
    const withNan = np.array(Float32Array.from(d, (v, i) => (i === 2 * 13 + 7 ? Number.NaN : v)), 'float32').reshape([5, 13]);
    const { js, wasm } = compileBoth((a) => nn.softmax(a), [withNan]);
    rowFusionsRunAsWasm(wasm);
    const a = wasm.call([withNan])[0].dataSync();
    const b = js.call([withNan])[0].dataSync();
    for (let i = 0; i < 65; i++) expect(Number.isNaN(a[i])).toBe(Math.floor(i / 13) === 2);
    for (let i = 0; i < 65; i++) if (Math.floor(i / 13) !== 2) expect(Math.abs(a[i] - b[i])).toBeLessThanOrEqual(1e-6);
  });
});

describe('multi-output row fusions in wasm', () => {
  it('a training step: the forward softmax leaves exp and the row sums as extra outputs', () => {
    const x = rand([37, 19], 4);
    const w = rand([19, 19], 5, 0.3);
    const fwds = [(a: Array) => nn.softmax(a), (a: Array) => nn.softmax(np.multiply(a, 0.5)), (a: Array) => layerNorm(a, np.ones([19]), np.zeros([19]))];
    fwds.forEach((fwd) => {
      const loss = (a: Array, m: Array) => np.sum(np.tanh(np.matmul(fwd(a), m)));
      const g: Fn = (a, m) => grad(loss)(a, m) as Array;
      const { js, wasm } = compileBoth(g, [x, w]);
      const multi = wasm.module.entry.instructions.filter((i) => i.opcode === 'fusion' && (i.params as { kind: string }).kind === 'kRow' && i.isTuple);
      // (The layer norm's forward row kernel leaves the centred rows and 1/sqrt(var + eps) for its backward.)
      expect(multi.length).toBe(1);
      rowFusionsRunAsWasm(wasm);
      expectAllclose(wasm.call([x, w])[0], js.call([x, w])[0], { rtol: 1e-5, atol: 1e-6 });
      expectAllclose(wasm.call([x, w])[0], g(x, w), { rtol: 1e-4, atol: 1e-6 });
    });
  });

  it('log-softmax feeding the loss sum (a row-reduction root)', () => {
    const logits = rand([23, 37], 6);
    const onehot = np.array(Float32Array.from({ length: 23 * 37 }, (_, i) => (i % 37 === (Math.floor(i / 37) * 7) % 37 ? 1 : 0)), 'float32').reshape([23, 37]);
    const f: Fn = (l, o) => np.negative(np.sum(np.multiply(nn.logSoftmax(l), o), { axis: -1 }));
    const { js, wasm } = compileBoth(f, [logits, onehot]);
    rowFusionsRunAsWasm(wasm);
    expectAllclose(wasm.call([logits, onehot])[0], js.call([logits, onehot])[0], { rtol: 1e-5, atol: 1e-6 });
    expectAllclose(wasm.call([logits, onehot])[0], f(logits, onehot), { rtol: 1e-5, atol: 1e-5 });
  });
});

describe('fallback', () => {
  it('a row fusion the wasm emitter does not cover (a scale broadcast across the row, not along it) keeps its JS row kernel', () => {
    // Rows of 5x6 elements; s[a] scales row element (a, b): neither contiguous along the row nor constant.
    const x = rand([7, 5, 6], 11);
    const sc = rand([5], 12, 1);
    const f: Fn = (a, t) => {
      const y = np.multiply(a, np.reshape(t, [5, 1]));
      const e = np.exp(np.subtract(y, np.max(y, { axis: [1, 2], keepdims: true })));
      return np.divide(e, np.sum(e, { axis: [1, 2], keepdims: true }));
    };
    const { js, wasm } = compileBoth(f, [x, sc]);
    expect(wasm.stats.rowFusions).toBe(1);
    expect(wasm.stats.wasmKernels).toBe(wasm.stats.fusedKernels - 1);
    expectAllclose(wasm.call([x, sc])[0], js.call([x, sc])[0], { rtol: 1e-6, atol: 0 });
    expectAllclose(wasm.call([x, sc])[0], f(x, sc), { rtol: 1e-5, atol: 1e-6 });
  });
});

describe('row kernels and threads', () => {
  it('results do not depend on the thread count (1, 2, 3 threads), bit for bit', () => {
    const x = rand([203, 301], 7);
    const other = rand([203, 301], 8);
    const g = rand([301], 9, 1);
    const b = rand([301], 10, 1);
    const before = poolStats().parallelJobs;
    // Kernels of this size on threads (the default threshold is higher).
    const threshold = getParallelWork();
    setParallelWork(PARALLEL_WORK);
    try {
      const fns: [Fn, Array[]][] = [
        [(a) => nn.softmax(a), [x]],
        [layerNorm, [x, g, b]],
        [gradOf(rmsNorm), [x, g]],
      ];
      for (const [f, args] of fns) {
        const { wasm } = compileBoth(f, args);
        rowFusionsRunAsWasm(wasm);
        const out: Float32Array[] = [];
        for (const t of [1, 2, 3]) {
          // Other data through the arena first (one thread), so a row a thread skipped cannot pass.
          setKernelThreads(1);
          wasm.call([other, ...args.slice(1)]);
          setKernelThreads(t);
          out.push(wasm.call(args)[0].dataSync() as Float32Array);
        }
        expect(out[1]).toEqual(out[0]);
        expect(out[2]).toEqual(out[0]);
        expectAllclose(np.array(out[0]).reshape(x.shape), f(...args), { rtol: 1e-4, atol: 1e-5 });
      }
    } finally {
      setKernelThreads(null);
      setParallelWork(threshold);
    }
    if (kernelThreadsAvailable()) expect(poolStats().parallelJobs - before).toBeGreaterThanOrEqual(6);
  });

  it('very long rows: scratch laid out for fewer threads (8 MiB cap), at least one', () => {
    // softmax keeps exp(x - max) in one scratch row per thread.
    const plan = (c: number) => {
      const compiled = lower((a: Array) => nn.softmax(a))(np.zeros([3, c])).compile();
      const row = compiled.module.entry.instructions.find((i) => i.opcode === 'fusion' && (i.params as { kind: string }).kind === 'kRow')!;
      return planRowFusion(row.called[0])!;
    };
    const short = plan(1000);
    expect(short.scratchRowBytes).toBe(Math.ceil((1000 * 4) / 64) * 64); // (whole cache lines per thread)
    expect(short.scratchThreads).toBe(ROW_SCRATCH_THREADS);
    expect(plan(1 << 19).scratchThreads).toBe(4);
    const long = plan(1 << 21);
    expect(long.scratchThreads).toBe(1);
    expect(long.scratchBytes).toBe(8 << 20);
  });
});
