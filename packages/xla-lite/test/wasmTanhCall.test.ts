// Loop kernels with tanh take its exp path (|x| >= 0.625) by a call to a function of the module
// or inline, chosen per work item from how many of the previous item's vectors needed it, or
// (the default 'defer' walks) first by a walk with no exp path at all, an item where a lane
// needed it computed again (src/wasm/loopKernel.ts). Laws: over random shapes (rows whose length
// leaves 1-3 lanes, rows that split between threads) and data whose rows alternate between small
// and large tanh arguments (so that items switch walks), with NaN, ±Inf and ±0, on 1 and 2
// threads, the 'call' and 'defer' kernels give exactly what the inline-only kernels give
// (`setTanhWalks('inline')`), and agree with the JavaScript kernels within tanh's error bound;
// the same over a sweep of every float32 exponent; and an in-place kernel (an output over its
// donated input) never computes an item twice.
import { type Array, np, withBackend } from '@tpukit/core';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { type Compiled, jit, lower, setKernelThreads, setWasmKernels } from '../src/internal';
import { setTanhWalks, type TanhWalks } from '../src/wasm/emitKernel';
import { getParallelWork, PARALLEL_WORK, setParallelWork } from '../src/wasm/fusionPlan';
import { expectSameValues, unitHash } from './wasmCompare';

const saved = getParallelWork();
afterAll(() => {
  setTanhWalks(null);
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
            const walks = (['call', 'defer'] as TanhWalks[]).map((w): [TanhWalks, Compiled] => {
              setTanhWalks(w);
              return [w, lower(f)(x, b).compile()];
            });
            setTanhWalks('inline');
            const inline = lower(f)(x, b).compile();
            setTanhWalks(null);
            setWasmKernels(false);
            const js = lower(f)(x, b).compile();
            setWasmKernels(true);
            expect(inline.stats.wasmKernels, name).toBeGreaterThan(0);
            expect(js.stats.wasmKernels, name).toBe(0);
            setKernelThreads(1);
            const want = run(inline, [x, b]);
            const ref = run(js, [x, b]);
            for (const t of [1, 2])
              for (const [w, called] of walks) {
                setKernelThreads(t);
                const got = run(called, [x, b]);
                got.forEach((o, q) => {
                  expectSameValues(o, want[q], `${name}, ${w} walks, [${rows},${C}], output ${q}, ${t} thread(s)`);
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

  it('defer walks give the inline values for every float32 exponent, the 0.625 boundary, NaN, ±Inf, ±0', () => {
    // Every exponent (both signs) x 48 mantissas (0, the largest, 46 spread), then ulps around
    // ±0.625 and the specials; laid out in rows of 4104 (items of 4096 columns plus a partial
    // item ending in a 0-3 lane partial vector), sorted within blocks so that whole items are
    // small (no second pass), others hold one large lane at varying places (tail lanes too).
    const vals: number[] = [];
    const u32 = new Uint32Array(1);
    const f32 = new Float32Array(u32.buffer);
    for (let e = 0; e < 256; e++)
      for (let k = 0; k < 48; k++)
        for (const sign of [0, 1]) {
          u32[0] = (sign << 31) | (e << 23) | (k === 47 ? 0x7fffff : Math.floor((k / 47) * 0x7fffff));
          vals.push(f32[0]);
        }
    const q = Math.fround(0.625);
    u32[0] = new Uint32Array(new Float32Array([q]).buffer)[0];
    const base = u32[0];
    for (let d = -64; d <= 64; d++) {
      u32[0] = base + d;
      vals.push(f32[0], -f32[0]);
    }
    vals.push(...SPECIAL);
    // Mostly small values: tanh of an argument below 0.625 in most items.
    const C = 4103;
    const rows = Math.ceil((vals.length * 8) / C);
    const data = new Float32Array(rows * C);
    for (let i = 0; i < data.length; i++) data[i] = Math.fround((unitHash(i, 3) - 0.5) * 0.4);
    // Each special value at a spread-out place: (i * 7919) mod n visits rows and lanes evenly.
    vals.forEach((v, k) => {
      data[(k * 7919 + (k % 5)) % data.length] = v;
    });
    const x = np.array(data, 'float32').reshape([rows, C]);
    const b = np.array(Float32Array.from({ length: C }, () => 0), 'float32');
    for (const [name, f] of FNS) {
      setTanhWalks('defer');
      const deferred = lower(f)(x, b).compile();
      setTanhWalks('inline');
      const inline = lower(f)(x, b).compile();
      setTanhWalks(null);
      setKernelThreads(1);
      const want = run(inline, [x, b]);
      for (const t of [1, 2]) {
        setKernelThreads(t);
        run(deferred, [x, b]).forEach((o, k) => expectSameValues(o, want[k], `${name}, output ${k}, ${t} thread(s)`));
      }
      setKernelThreads(null);
    }
  });

  it('an in-place kernel (outputs over its donated input) takes no defer walk and gives the inline values', () => {
    // tanh(x) written over donated x: an item computed twice would read its own first results.
    const n = 3 * 4096 + 5;
    const data = Float32Array.from({ length: n }, (_, i) => (i % 997 === 0 ? 3 : Math.fround((unitHash(i, 9) - 0.5) * 0.3)));
    const f = (a: Array): Array => np.tanh(np.multiply(a, 1.5));
    const results = (['defer', 'inline'] as TanhWalks[]).map((w) => {
      setTanhWalks(w);
      const g = jit(f, { donateArgnums: [0] });
      const out = withBackend('systolic', () => g(np.array(data, 'float32')).dataSync() as Float32Array);
      setTanhWalks(null);
      return Float32Array.from(out);
    });
    expectSameValues(results[0], results[1], 'tanh over its donated input');
  });
});
