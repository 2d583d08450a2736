// Banded dot epilogues (wasm/program.ts `setEpilogueBands`): a dot writing straight into its wasm
// epilogue's arena buffer hands over each finished band of rows (core's evalPrimitiveInto bands)
// and the epilogue runs over it at once. Results must be bit-identical to the epilogue run after
// the product, for any shape, on 1, 2 and 3 threads.
import { type Array, nn, np, registerBackend, setNumThreads, systolic, toStorage, withBackend } from '@tpukit/core';
import type { ResultBands } from '@tpukit/core/internal';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { epilogueBandsEnabled, jit, setEpilogueBands, setKernelThreads } from '../src/index';
import { WasmProgram } from '../src/wasm/program';

const seq = (shape: number[], s: number): Array => {
  const n = shape.reduce((a, b) => a * b, 1);
  return np.array(globalThis.Array.from({ length: n }, (_, i) => Math.sin(i * s + 0.3) * (1 + (i % 5) * 0.25)), 'float32').reshape(shape);
};
/** The setting from the environment (off unless TPUKIT_EPILOGUE_BANDS=1), restored after each test. */
const initial = epilogueBandsEnabled();
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
    setEpilogueBands(initial);
  }
}

/**
 * The systolic backend, except that a float32 dot into caller storage with bands computes its
 * result aside and writes it into the destination band by band, in bands ending where `cuts`
 * says, with NaN past the band handed over: the epilogue's band-to-item mapping is tested on any
 * split, whatever the threads' timing, and an item run before all its elements are handed over
 * reads NaN.
 */
class SplitBands extends systolic.SystolicBackend {
  cuts: (n: number) => number[] = () => [];
  override executeInto(prim: Parameters<systolic.SystolicBackend['executeInto']>[0], inputs: unknown[], inAvals: Parameters<systolic.SystolicBackend['executeInto']>[2], params: unknown, outAval: Parameters<systolic.SystolicBackend['executeInto']>[4], out: Parameters<systolic.SystolicBackend['executeInto']>[5], bands?: ResultBands): boolean {
    if (bands === undefined || prim.name !== 'dot_general' || !(out instanceof Float32Array)) return super.executeInto(prim, inputs, inAvals, params, outAval, out);
    const aside = new Float32Array(out.length);
    if (!super.executeInto(prim, inputs, inAvals, params, outAval, aside)) return false;
    out.fill(Number.NaN);
    let at = 0;
    for (const c of this.cuts(out.length))
      if (c > at && c <= out.length) {
        out.set(aside.subarray(at, c), at);
        bands(at, (at = c));
      }
    out.set(aside.subarray(at), at);
    return true;
  }
}
const split = new SplitBands('systolic-split-bands');
registerBackend(split);

afterEach(() => {
  setEpilogueBands(initial);
  setKernelThreads(null);
  setNumThreads(null);
  vi.restoreAllMocks();
});

describe('banded dot epilogues', () => {
  it('law: banded == unbanded for random shapes and epilogues, 1-3 threads', () => {
    setEpilogueBands(true);
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
    expect(band.mock.calls.length).toBeGreaterThanOrEqual(25); // (at least one band per banded run)
  });

  it('law: an epilogue over bands of any sizes (cut anywhere, not only at rows) equals the epilogue after the product', () => {
    const band = vi.spyOn(WasmProgram.prototype, 'runEpilogueBand');
    fc.assert(
      fc.property(
        fc.constantFrom(...(Object.keys(epilogues) as (keyof typeof epilogues)[])),
        fc.integer({ min: 1, max: 2 }),
        fc.integer({ min: 1, max: 64 }),
        fc.integer({ min: 1, max: 32 }),
        // (rows past a loop work item's CHUNK of 4096 columns too)
        fc.oneof(fc.integer({ min: 1, max: 24 }).map((p) => 8 * p), fc.integer({ min: 1, max: 40 }), fc.constant(4100)),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 12 }),
        (kind, lead, M, K, N, fractions) => {
          const x = seq([lead, M, K], 0.37);
          const w = seq([K, N], 0.11);
          const b = seq([N], 0.7);
          const h = seq([lead, M, N], 0.05);
          const f = (xx: Array, ww: Array, bb: Array, hh: Array) => epilogues[kind](xx, ww, bb, hh);
          split.cuts = (n) => fractions.map((q) => Math.floor(q * n)).sort((p, q) => p - q);
          band.mockClear();
          const compile = (on: boolean) => {
            setEpilogueBands(on);
            try {
              return withBackend('systolic-split-bands', () => jit(f).lower(x, w, b, h).compile());
            } finally {
              setEpilogueBands(initial);
            }
          };
          const on = bits(withBackend('systolic-split-bands', () => compile(true).call([x, w, b, h]))[0]);
          const banded = band.mock.calls.length;
          const off = bits(withBackend('systolic-split-bands', () => compile(false).call([x, w, b, h]))[0]);
          expect(on).toEqual(off);
          // Every cut inside the result made a band of its own (the last band is core's).
          const n = lead * M * N;
          expect(banded).toBe(new Set([...fractions.map((q) => Math.floor(q * n)).filter((c) => c > 0 && c < n), n]).size);
        },
      ),
      { numRuns: 30 },
    );
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
        // One thread: the whole result at the end; the pool hands over what has finished (timing-dependent).
        if (threads === 1) expect(calls).toBe(1);
        else expect(calls).toBeGreaterThanOrEqual(1);
        band.mockClear();
        expect(runWith(f, args, false)).toEqual(on);
        expect(band.mock.calls.length).toBe(0);
      }
    });

  it('is off unless TPUKIT_EPILOGUE_BANDS=1; setEpilogueBands rejects a non-boolean by name', () => {
    expect(initial).toBe(process.env.TPUKIT_EPILOGUE_BANDS === '1');
    expect(() => setEpilogueBands(1 as unknown as boolean)).toThrow(/setEpilogueBands: on must be a boolean; got 1/);
  });
});
