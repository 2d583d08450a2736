// Dot epilogues with their column sum (wasm/program.ts `setEpilogueColumnSums`): a column sum
// of a wasm dot epilogue's result (a bias gradient) is computed by the epilogue's fused kernel
// when the epilogue runs on one thread. The sum and the epilogue's result must be the same bits
// as with the path turned off, and the sum must be the float64 sum of the result's rows in row
// order, rounded once, for any shape, on 1, 2 and 3 threads.
import { type Array, np, setNumThreads, toStorage, withBackend } from '@tpukit/core';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { epilogueColumnSumsEnabled, jit, setEpilogueColumnSums, setKernelThreads } from '../src/index';
import { WasmProgram, type WasmStep } from '../src/wasm/program';
import { getParallelWork, PARALLEL_WORK, setParallelWork } from '../src/wasm/fusionPlan';

const seq = (shape: number[], s: number): Array => {
  const n = shape.reduce((a, b) => a * b, 1);
  return np.array(globalThis.Array.from({ length: n }, (_, i) => Math.sin(i * s + 0.3) * (1 + (i % 7) * 0.5)), 'float32').reshape(shape);
};
/** The setting from the environment (on unless TPUKIT_EPILOGUE_COLSUM=0), restored after each test. */
const initial = epilogueColumnSumsEnabled();
const initialWork = getParallelWork();
const bits = (a: Array) => globalThis.Array.from(new Uint32Array((toStorage(a) as Float32Array).slice().buffer));

/** Epilogues over the dot d = x w (h: an operand of the result's shape, b: a bias along its last axis). */
const epilogues = {
  bias: (d: Array, _h: Array, b: Array) => np.add(d, b),
  // The GPT's GELU' epilogue: the incoming gradient times the derivative, from the forward's pre-bias h plus the bias, and tanh.
  geluGrad: (d: Array, h: Array, b: Array) => {
    const u = np.add(h, b);
    const t = np.tanh(np.multiply(u, 0.79788456));
    return np.multiply(d, np.add(np.multiply(np.add(t, 1), 0.5), np.multiply(np.multiply(u, np.subtract(1, np.multiply(t, t))), 0.3989)));
  },
};
type Epilogue = keyof typeof epilogues;

/** The function: the epilogue's result e (an output), its column sum over the leading axes, and a product reading e. */
const fn =
  (epi: Epilogue) =>
  (...[x, w, h, b, w2]: Array[]): Array[] => {
  const e = epilogues[epi](np.matmul(x, w), h, b);
  const axes = globalThis.Array.from({ length: e.ndim - 1 }, (_, k) => k);
  return [e, np.sum(e, { axis: axes }), np.matmul(e, w2)];
};

/** Compiled under the systolic backend with the fused sums on or off. */
function compile(epi: Epilogue, args: Array[], on: boolean) {
  setEpilogueColumnSums(on);
  try {
    return withBackend('systolic', () => jit(fn(epi)).lower(...args).compile());
  } finally {
    setEpilogueColumnSums(initial);
  }
}

/** The float64 sum of `e`'s rows of `F` columns in row order, each column rounded once to float32. */
function columnSums(e: Array, F: number): number[] {
  const v = toStorage(e) as Float32Array;
  const out: number[] = [];
  for (let j = 0; j < F; j++) {
    let s = 0;
    for (let i = j; i < v.length; i += F) s += v[i];
    out.push(Math.fround(s));
  }
  return globalThis.Array.from(new Uint32Array(Float32Array.from(out).buffer));
}

afterEach(() => {
  setEpilogueColumnSums(initial);
  setParallelWork(initialWork);
  setKernelThreads(null);
  setNumThreads(null);
  vi.restoreAllMocks();
});

describe('dot epilogues with their column sum', () => {
  it('law: fused == separate, and the sum is the rows summed in order in float64, for random shapes, 1-3 threads', () => {
    // The steps of the fused executables' calls: the epilogue with its sum kernel, the sum fed by it.
    const seen: WasmStep[] = [];
    const run = WasmProgram.prototype.run;
    vi.spyOn(WasmProgram.prototype, 'run').mockImplementation(function (this: WasmProgram, ...a: Parameters<WasmProgram['run']>) {
      if (a[0].withSum !== null || a[0].sumBy !== null) seen.push(a[0]);
      return run.apply(this, a);
    });
    let fusedRuns = 0;
    fc.assert(
      fc.property(
        fc.record({
          lead: fc.oneof(fc.constant([] as number[]), fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 2 })),
          M: fc.integer({ min: 1, max: 70 }),
          K: fc.integer({ min: 1, max: 24 }),
          F: fc.oneof(fc.integer({ min: 1, max: 70 }), fc.constantFrom(128, 512, 1030)),
          epi: fc.constantFrom<Epilogue>('bias', 'geluGrad'),
          seed: fc.integer({ min: 1, max: 1000 }),
        }),
        ({ lead, M, K, F, epi, seed }) => {
          const rows = [...lead, M];
          const args = [seq([...rows, K], seed * 0.37), seq([K, F], seed * 0.11 + 1), seq([...rows, F], seed * 0.05 + 2), seq([F], 0.9), seq([F, 3], 0.7)];
          const fused = compile(epi, args, true);
          const separate = compile(epi, args, false);
          for (const t of [1, 2, 3, 1]) {
            setNumThreads(t);
            setKernelThreads(t);
            seen.length = 0;
            const [e, sum, p] = withBackend('systolic', () => fused.call(args)) as Array[];
            const [e0, sum0, p0] = withBackend('systolic', () => separate.call(args)) as Array[];
            expect(bits(e)).toEqual(bits(e0));
            expect(bits(sum)).toEqual(bits(sum0));
            expect(bits(p)).toEqual(bits(p0));
            expect(bits(sum)).toEqual(columnSums(e, F));
            // The fused executable pairs its epilogue with the sum; on one thread the epilogue computed it.
            const epilogue = seen.find((s) => s.withSum !== null);
            expect(epilogue).toBeDefined();
            expect(seen.some((s) => s.sumBy === epilogue!.withSum)).toBe(true);
            if (t === 1) {
              expect(epilogue!.withSum!.ran).not.toBe(0);
              fusedRuns++;
            }
          }
        },
      ),
      { numRuns: 25, examples: [[{ lead: [16], M: 128, K: 8, F: 512, epi: 'geluGrad', seed: 3 }], [{ lead: [], M: 5, K: 3, F: 7, epi: 'bias', seed: 2 }]] },
    );
    expect(fusedRuns).toBeGreaterThan(0);
  });

  it('a sum the epilogue computed in one call is computed by its own kernel in the next, on threads', () => {
    // (epilogues from PARALLEL_WORK on run on threads: this one, 128 x 96 with tanh, does)
    setParallelWork(PARALLEL_WORK);
    const args = [seq([128, 8], 0.3), seq([8, 96], 1.1), seq([128, 96], 2.2), seq([96], 0.9), seq([96, 3], 0.7)];
    const fused = compile('geluGrad', args, true);
    const separate = compile('geluGrad', args, false);
    const args2 = [seq([128, 8], 0.8), ...args.slice(1)];
    const want = [args, args2].map((a) => bits((withBackend('systolic', () => separate.call(a)) as Array[])[1]));
    const steps: WasmStep[] = [];
    const run = WasmProgram.prototype.run;
    vi.spyOn(WasmProgram.prototype, 'run').mockImplementation(function (this: WasmProgram, ...a: Parameters<WasmProgram['run']>) {
      if (a[0].withSum !== null) steps.push(a[0]);
      return run.apply(this, a);
    });
    withBackend('systolic', () => fused.call(args));
    const step = steps[0];
    expect(step.withSum).not.toBeNull();
    let onThreads = 0;
    for (const [t1, t2] of [[1, 2], [2, 1], [1, 1], [2, 2]]) {
      for (const [t, a, w] of [[t1, args, want[0]], [t2, args2, want[1]]] as const) {
        setKernelThreads(t);
        const before = step.withSum!.ran;
        expect(bits((withBackend('systolic', () => fused.call(a)) as Array[])[1])).toEqual(w);
        // On one thread the epilogue computed the sum; on threads it ran its loop kernel (the sum its own).
        if (t === 1) expect(step.withSum!.ran).not.toBe(before);
        else if (step.parallel) {
          expect(step.withSum!.ran).toBe(before);
          onThreads++;
        }
      }
    }
    if (onThreads === 0) expect(step.parallel).toBe(false); // (no worker threads here)
  });

  it('law: a row fusion (layer norm, softmax) with the column sum of its output: fused == separate == the rows summed in order, 1-3 threads', () => {
    const seen: WasmStep[] = [];
    const run = WasmProgram.prototype.run;
    vi.spyOn(WasmProgram.prototype, 'run').mockImplementation(function (this: WasmProgram, ...a: Parameters<WasmProgram['run']>) {
      if (a[0].withSum !== null) seen.push(a[0]);
      return run.apply(this, a);
    });
    const rowFns = {
      layerNorm: (x: Array, g: Array, w: Array) => {
        const m = np.mean(x, { axis: -1, keepdims: true });
        const v = np.mean(np.square(np.subtract(x, m)), { axis: -1, keepdims: true });
        return np.multiply(np.divide(np.subtract(x, m), np.sqrt(np.add(v, 1e-5))), g);
      },
      softmax: (x: Array, _g: Array, _w: Array) => {
        const e = np.exp(np.subtract(x, np.max(x, { axis: -1, keepdims: true })));
        return np.divide(e, np.sum(e, { axis: -1, keepdims: true }));
      },
    };
    let fusedRuns = 0;
    fc.assert(
      fc.property(
        fc.record({ lead: fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 0, maxLength: 2 }), M: fc.integer({ min: 1, max: 60 }), C: fc.oneof(fc.integer({ min: 2, max: 70 }), fc.constant(128)), kind: fc.constantFrom<keyof typeof rowFns>('layerNorm', 'softmax'), seed: fc.integer({ min: 1, max: 1000 }) }),
        ({ lead, M, C, kind, seed }) => {
          const rows = [...lead, M];
          const args = [seq([...rows, C], seed * 0.29), seq([C], 0.7), seq([C, 3], 0.4)];
          const g = (...[x, gamma, w]: Array[]): Array[] => {
            const y = rowFns[kind](x, gamma, w);
            return [y, np.sum(y, { axis: rows.map((_, k) => k) }), np.matmul(y, w)];
          };
          const build = (on: boolean) => {
            setEpilogueColumnSums(on);
            try {
              return withBackend('systolic', () => jit(g).lower(...args).compile());
            } finally {
              setEpilogueColumnSums(initial);
            }
          };
          const fused = build(true);
          const separate = build(false);
          for (const t of [1, 2, 3, 1]) {
            setNumThreads(t);
            setKernelThreads(t);
            seen.length = 0;
            const [y, sum, p] = withBackend('systolic', () => fused.call(args)) as Array[];
            const [y0, sum0, p0] = withBackend('systolic', () => separate.call(args)) as Array[];
            expect(bits(y)).toEqual(bits(y0));
            expect(bits(sum)).toEqual(bits(sum0));
            expect(bits(p)).toEqual(bits(p0));
            expect(bits(sum)).toEqual(columnSums(y, C));
            const step = seen.find((x) => x.withSum !== null);
            if (t === 1 && step !== undefined && !step.parallel) {
              expect(step.withSum!.ran).not.toBe(0);
              fusedRuns++;
            }
          }
        },
      ),
      { numRuns: 20, examples: [[{ lead: [16], M: 128, C: 128, kind: 'layerNorm', seed: 3 }], [{ lead: [], M: 7, C: 5, kind: 'softmax', seed: 2 }]] },
    );
    expect(fusedRuns).toBeGreaterThan(0);
  });

  it('setEpilogueColumnSums rejects a non-boolean', () => {
    expect(() => setEpilogueColumnSums(1 as unknown as boolean)).toThrow(/setEpilogueColumnSums: on must be a boolean; got 1/);
  });
});
