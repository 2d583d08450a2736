// Row maxima in the WebAssembly kernels (row reductions and row fusions) accumulate with
// `f32x4.pmax` and keep the NaN and +0 lanes pmax drops in two masks (src/wasm/kernelScope.ts).
// Law: over random shapes (row lengths that leave 1-3 lanes, rows that split between threads),
// with NaN, ±Inf, ±0 and repeated values, on 1 and 2 threads, the wasm kernels give exactly the
// JavaScript kernels' values (the same number, NaN where they give NaN) and, for a row whose
// maximum is a zero, +0 when the row holds a +0, as `f32x4.max` did before (the JavaScript
// kernel keeps the row's first zero instead: a difference in the sign of zero only, not new).
import { type Array, np } from '@tpukit/core';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { setKernelThreads, setWasmKernels } from '../src/internal';
import { getParallelWork, PARALLEL_WORK, setParallelWork } from '../src/wasm/fusionPlan';
import { compileBoth, expectSameValues, type Fn, unitHash } from './wasmCompare';

const saved = getParallelWork();
afterAll(() => {
  setWasmKernels(true);
  setKernelThreads(null);
  setParallelWork(saved);
});

// Few distinct values, so that ties (-0 and +0 among them) and specials are common.
const POOL = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 0, -0, 1, -1, 2.5, -3, 1e-40, -1e-40, 0.75];
/** The pool's values that are not above zero (rows whose maximum is a zero of either sign). */
const NONPOSITIVE = [0, -0, Number.NEGATIVE_INFINITY, -0, -1e-40, 0, -3, -0];

const FNS: [string, Fn, string][] = [
  ['max over the last axis (row reduction)', (a) => np.max(a, { axis: -1 }), 'max'],
  ['x - max(x) (row fusion)', (a) => np.subtract(a, np.max(a, { axis: -1, keepdims: true })), 'x - max'],
  ['max(x * -1) over the last axis (fused)', (a) => np.max(np.multiply(a, -1), { axis: -1 }), 'negated'],
];

/** The row maxima the wasm kernels give: NaN if any NaN, else the largest value, +0 for a zero maximum when the row holds +0. */
const rowMax = (d: Float32Array, rows: number, C: number): Float32Array =>
  Float32Array.from({ length: rows }, (_, r) => {
    const row = d.subarray(r * C, (r + 1) * C);
    if (row.some(Number.isNaN)) return Number.NaN;
    const m = row.reduce((a, v) => (v > a ? v : a), Number.NEGATIVE_INFINITY);
    return m === 0 ? (row.some((v) => Object.is(v, 0)) ? 0 : -0) : m;
  });

describe('row maxima in wasm kernels (pmax with NaN and +0 masks)', () => {
  it('equal the JavaScript kernels exactly: NaN, ±Inf, the sign of zero, remainders, 1 and 2 threads (property)', () => {
    setParallelWork(PARALLEL_WORK);
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 300 }),
        fc.integer({ min: 1, max: 70 }),
        fc.array(fc.integer({ min: 0, max: POOL.length - 1 }), { minLength: 1, maxLength: 64 }),
        fc.nat(1000),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.boolean(),
        (rows, C, picks, seed, special, nonPositive) => {
          // Ordinary values (all <= 0 in half the cases, so that rows whose maximum is a zero
          // are common); a fraction `special` of the elements from the pool.
          const data = Float32Array.from({ length: rows * C }, (_, i) => {
            const u = unitHash(i, seed);
            return u < special ? (nonPositive ? NONPOSITIVE[picks[i % picks.length] % NONPOSITIVE.length] : POOL[picks[i % picks.length]]) : Math.fround(nonPositive ? -u * 4 : (u - 0.5) * 8);
          });
          const x: Array = np.array(data, 'float32').reshape([rows, C]);
          const m = rowMax(data, rows, C);
          const negated = rowMax(data.map((v) => Math.fround(v * -1)), rows, C);
          for (const [name, f, model] of FNS) {
            const { js, wasm } = compileBoth(f, [x]);
            expect(wasm.stats.wasmKernels, name).toBeGreaterThan(0);
            const want = js.call([x])[0].dataSync();
            // The model: the maxima themselves, or x - max(x) computed from them in float32.
            const exact = model === 'max' ? m : model === 'negated' ? negated : data.map((v, i) => Math.fround(v - m[Math.floor(i / C)]));
            for (const t of [1, 2]) {
              setKernelThreads(t);
              const got = wasm.call([x])[0].dataSync();
              expectSameValues(got, exact, `${name}, [${rows},${C}], ${t} thread(s)`);
              // And the JavaScript kernel's values, zeros compared by value.
              for (let i = 0; i < want.length; i++) if (!(got[i] === want[i] || (Number.isNaN(got[i]) && Number.isNaN(want[i])))) expect(got[i], `${name} vs JS: element ${i}`).toBe(want[i]);
            }
            setKernelThreads(null);
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  it('a row of zeros: +0 once any +0 is in it, -0 only when every element is -0', () => {
    const rows = [
      [-0, -0, -0, -0, -0, 0, -0],
      [-0, -0, -0, -0, -0, -0, -0],
      [0, -0, -0, -0, -0, -0, -0],
      [-0, -0, -0, -0, -0, -0, -Infinity],
      [-1, -0, -2, -0, -0, 0, -0],
    ];
    const x = np.array(Float32Array.from(rows.flat()), 'float32').reshape([5, 7]);
    const { wasm } = compileBoth((a) => np.max(a, { axis: -1 }), [x]);
    const got = wasm.call([x])[0].dataSync();
    expect([...got].map((v) => Object.is(v, -0))).toEqual([false, true, false, true, false]);
  });
});
