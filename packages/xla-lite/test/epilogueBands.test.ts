// Banded dot epilogues (wasm/program.ts `setEpilogueBands`): a dot writing straight into its wasm
// epilogue's arena buffer hands over each finished band of rows (core's evalPrimitiveInto bands)
// and the epilogue runs over it at once. Results must be bit-identical to the epilogue run after
// the product, for any shape, on 1, 2 and 3 threads.
import { type Array, nn, np, setNumThreads, toStorage, withBackend } from '@tpukit/core';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { epilogueBandsEnabled, jit, setEpilogueBands, setKernelThreads } from '../src/index';
import { WasmProgram } from '../src/wasm/program';

const seq = (shape: number[], s: number): Array => {
  const n = shape.reduce((a, b) => a * b, 1);
  return np.array(globalThis.Array.from({ length: n }, (_, i) => Math.sin(i * s + 0.3) * (1 + (i % 5) * 0.25)), 'float32').reshape(shape);
};
const bits = (a: Array) => globalThis.Array.from(new Uint32Array((toStorage(a) as Float32Array).slice().buffer));

/** The epilogues the GPT step has: bias add, bias + tanh-GELU, and the GELU derivative times the incoming gradient. */
const epilogues = {
  bias: (x: Array, w: Array, b: Array, _h: Array) => np.add(np.matmul(x, w), b),
  gelu: (x: Array, w: Array, b: Array, _h: Array) => nn.gelu(np.add(np.matmul(x, w), b)),
  geluGrad: (x: Array, w: Array, _b: Array, h: Array) => {
    const d = np.matmul(x, w);
    const t = np.tanh(np.multiply(h, 0.79788456));
    return np.multiply(d, np.add(np.multiply(t, 0.5), np.multiply(h, np.subtract(1, np.multiply(t, t)))));
  },
};

/** `f` compiled under the systolic backend with bands on or off, called on `args` (result bits). */
function runWith(f: (...a: Array[]) => Array, args: Array[], bands: boolean): number[] {
  setEpilogueBands(bands);
  try {
    const c = withBackend('systolic', () => jit(f).lower(...args).compile());
    return bits(withBackend('systolic', () => c.call(args))[0]);
  } finally {
    setEpilogueBands(true);
  }
}

afterEach(() => {
  setEpilogueBands(true);
  setKernelThreads(null);
  setNumThreads(null);
  vi.restoreAllMocks();
});

describe('banded dot epilogues', () => {
  it('law: banded == unbanded for random shapes and epilogues, 1-3 threads', () => {
    expect(epilogueBandsEnabled()).toBe(true);
    const band = vi.spyOn(WasmProgram.prototype, 'runEpilogueBand');
    fc.assert(
      fc.property(
        fc.constantFrom(...(Object.keys(epilogues) as (keyof typeof epilogues)[])),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 300 }),
        fc.integer({ min: 1, max: 96 }),
        fc.oneof(fc.integer({ min: 1, max: 40 }).map((p) => 8 * p), fc.integer({ min: 1, max: 70 })),
        fc.constantFrom(1, 2, 3),
        (kind, lead, M, K, N, threads) => {
          setNumThreads(threads);
          setKernelThreads(threads);
          // A leading batch of rows (as the GPT's [B, T, d] activations): rows = lead * M.
          const x = seq([lead, M, K], 0.37);
          const w = seq([K, N], 0.11);
          const b = seq([N], 0.7);
          const h = seq([lead, M, N], 0.05);
          const f = (xx: Array, ww: Array, bb: Array, hh: Array) => epilogues[kind](xx, ww, bb, hh);
          expect(runWith(f, [x, w, b, h], true)).toEqual(runWith(f, [x, w, b, h], false));
        },
      ),
      { numRuns: 25 },
    );
    expect(band.mock.calls.length).toBeGreaterThan(25); // (banded runs split the larger products into several bands)
  });

  for (const threads of [1, 2])
    it(`the GPT's shapes run their epilogues by bands, bit-identical to unbanded, ${threads} thread(s)`, () => {
      setNumThreads(threads);
      setKernelThreads(threads);
      const band = vi.spyOn(WasmProgram.prototype, 'runEpilogueBand');
      const x = seq([16, 128, 128], 0.013);
      for (const [kind, N] of [['bias', 128], ['gelu', 512], ['geluGrad', 512]] as const) {
        const w = seq([128, N], 0.021);
        const args = [x, w, seq([N], 0.5), seq([16, 128, N], 0.007)];
        const f = (xx: Array, ww: Array, bb: Array, hh: Array) => epilogues[kind](xx, ww, bb, hh);
        band.mockClear();
        const on = runWith(f, args, true);
        const calls = band.mock.calls.length;
        // One thread: a band per MC row block (2048 rows / 128); the pool hands over what has finished.
        if (threads === 1) expect(calls).toBe(16);
        else expect(calls).toBeGreaterThanOrEqual(1);
        band.mockClear();
        expect(runWith(f, args, false)).toEqual(on);
        expect(band.mock.calls.length).toBe(0);
      }
    });

  it('setEpilogueBands rejects a non-boolean by name', () => {
    expect(() => setEpilogueBands(1 as unknown as boolean)).toThrow(/setEpilogueBands: on must be a boolean; got 1/);
  });
});
