// Loop kernels with tanh take its exp path (|x| >= 0.625) by a call to a function of the module
// or inline, chosen per work item from how many of the previous item's vectors needed it
// (src/wasm/loopKernel.ts). Law: over random shapes (rows whose length leaves 1-3 lanes, rows
// that split between threads) and data whose rows alternate between small and large tanh
// arguments (so that items switch walks), with NaN, ±Inf and ±0, on 1 and 2 threads, the kernels
// give exactly what the inline-only kernels give (`setOutOfLineTanh(false)`), and agree with the
// JavaScript kernels within tanh's error bound.
import { type Array, np } from '@tpukit/core';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { type Compiled, lower, setKernelThreads, setWasmKernels } from '../src/internal';
import { setOutOfLineTanh } from '../src/wasm/emitKernel';
import { getParallelWork, PARALLEL_WORK, setParallelWork } from '../src/wasm/fusionPlan';
import { expectSameValues, unitHash } from './wasmCompare';

const saved = getParallelWork();
afterAll(() => {
  setOutOfLineTanh(true);
  setWasmKernels(true);
  setKernelThreads(null);
  setParallelWork(saved);
});

const SPECIAL = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 0, -0, 0.625, -0.625, 0.6249999, 20, -9];

type Fn = (x: Array, b: Array) => Array[];
const FNS: [string, Fn][] = [
  ['tanh(x + b)', (x, b) => [np.tanh(np.add(x, b))]],
  [
    'tanh-GELU parts (two outputs)',
    (x, b) => {
      const a = np.add(x, b);
      const t = np.tanh(np.multiply(np.add(a, np.multiply(np.multiply(np.multiply(a, a), a), 0.044715)), 0.7978845608));
      return [np.multiply(np.multiply(a, 0.5), np.add(t, 1)), t];
    },
  ],
  ['tanh(x) * tanh(2x + b)', (x, b) => [np.multiply(np.tanh(x), np.tanh(np.add(np.multiply(x, 2), b)))]],
];

const run = (c: Compiled, args: Array[]): Float32Array[] => c.call(args).map((a) => a.dataSync() as Float32Array);

describe('tanh exp path by call or inline in loop kernels', () => {
  it('gives exactly the inline kernels values, items switching walks, 1 and 2 threads (property)', () => {
    setParallelWork(PARALLEL_WORK);
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 120 }),
        fc.integer({ min: 1, max: 600 }),
        fc.array(fc.double({ min: 0, max: 6, noNaN: true }), { minLength: 1, maxLength: 9 }),
        fc.double({ min: 0, max: 0.05, noNaN: true }),
        fc.nat(1000),
        (rows, C, scales, special, seed) => {
          // Row r's values have spread scales[r % n]: rows of small and of large arguments.
          const data = Float32Array.from({ length: rows * C }, (_, i) => {
            const u = unitHash(i, seed);
            if (u < special) return SPECIAL[Math.floor((u / special) * SPECIAL.length) % SPECIAL.length];
            return Math.fround((u - 0.5) * scales[Math.floor(i / C) % scales.length]);
          });
          const x = np.array(data, 'float32').reshape([rows, C]);
          const b = np.array(Float32Array.from({ length: C }, (_, j) => Math.fround(Math.cos(j) * 0.1)), 'float32');
          for (const [name, f] of FNS) {
            setWasmKernels(true);
            setOutOfLineTanh(true);
            const called = lower(f)(x, b).compile();
            setOutOfLineTanh(false);
            const inline = lower(f)(x, b).compile();
            setOutOfLineTanh(true);
            setWasmKernels(false);
            const js = lower(f)(x, b).compile();
            setWasmKernels(true);
            expect(called.stats.wasmKernels, name).toBeGreaterThan(0);
            expect(js.stats.wasmKernels, name).toBe(0);
            setKernelThreads(1);
            const want = run(inline, [x, b]);
            const ref = run(js, [x, b]);
            for (const t of [1, 2]) {
              setKernelThreads(t);
              const got = run(called, [x, b]);
              got.forEach((o, q) => {
                expectSameValues(o, want[q], `${name}, [${rows},${C}], output ${q}, ${t} thread(s)`);
                for (let i = 0; i < o.length; i++) {
                  const e = ref[q][i];
                  if (Number.isNaN(e)) expect(o[i]).toBeNaN();
                  else if (!Number.isFinite(e)) expect(o[i]).toBe(e);
                  else expect(Math.abs(o[i] - e), `${name} vs JS, element ${i}`).toBeLessThanOrEqual(2e-6 * Math.max(1, Math.abs(e)));
                }
              });
            }
            setKernelThreads(null);
          }
        },
      ),
      { numRuns: 12 },
    );
  });
});
