// Centered outputs recomputed by their readers (src/passes/centeredOutputs.ts): a training step's
// layer norm writes h and x - mean = h - mean for its backward; with the pass it writes the mean
// (one value per row) instead of x - mean, and the backward row fusion and the gamma/beta sums
// compute h - mean themselves. Laws: the same bits as without the pass (wasm kernels on 1-3
// threads, and the JavaScript kernels), for odd row lengths and NaN/inf rows; the row fusion
// writes one full output fewer; the exported module (HLO text, StableHLO) is the one without it.
import { type Array, np, setNumThreads, toStorage, valueAndGrad, withBackend } from '@tpukit/core';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { type Compiled, jit, setKernelThreads, setWasmKernels } from '../src/index';
import { envDefaults } from '../src/internal';

/** The float32 bits, every NaN as one (WebAssembly leaves a NaN's sign and payload to the engine). */
const bits = (a: Array) => globalThis.Array.from(new Uint32Array((toStorage(a) as Float32Array).slice().buffer), (w) => ((w & 0x7fffffff) > 0x7f800000 ? 0x7fc00000 : w));
const seq = (shape: number[], s: number, special = false, scale = 1): Array => {
  const n = shape.reduce((a, b) => a * b, 1);
  const C = shape[shape.length - 1];
  const v = Float32Array.from({ length: n }, (_, i) => Math.sin(i * s + 0.3) * scale * (1 + (i % 7) * 0.25));
  if (special) [NaN, Infinity, -Infinity].forEach((x, k) => (k + 1) * C < n && (v[(k + 1) * C + ((k * 5) % C)] = x));
  return np.array(v, 'float32').reshape(shape);
};
const layerNorm = (x: Array, g: Array, b: Array): Array => {
  const xc = np.subtract(x, np.mean(x, { axis: -1, keepdims: true }));
  const inv = np.divide(1, np.sqrt(np.add(np.mean(np.square(xc), { axis: -1, keepdims: true }), 1e-5)));
  return np.add(np.multiply(np.multiply(xc, inv), g), b);
};
type P = { g1: Array; b1: Array; g2: Array; b2: Array; w: Array; bias: Array };
/** A residual block's loss: h = h0 + a + bias, two layer norms (the first's h also feeds the second's residual), a product; value and gradients. */
const step = (...x: Array[]): Array[] => {
  const loss = (p: P, h0: Array, a: Array) => {
    const h = np.add(h0, np.add(a, p.bias));
    const h2 = np.add(h, np.matmul(layerNorm(h, p.g1, p.b1), p.w));
    return np.mean(np.square(layerNorm(h2, p.g2, p.b2)));
  };
  const [v, g] = valueAndGrad(loss)({ g1: x[0], b1: x[1], g2: x[2], b2: x[3], w: x[4], bias: x[5] }, x[6], x[7]) as [Array, P];
  return [v, g.g1, g.b1, g.g2, g.b2, g.w, g.bias];
};
const argsOf = (rows: number[], C: number, seed: number, special: boolean): Array[] => [
  np.add(seq([C], 0.3 + seed * 0.01), 1),
  seq([C], 0.5 + seed * 0.01),
  np.add(seq([C], 0.7 + seed * 0.01), 1),
  seq([C], 0.9 + seed * 0.01),
  seq([C, C], 0.11 + seed * 0.001, false, 0.2),
  seq([C], 0.13 + seed * 0.01),
  seq([...rows, C], 0.17 + seed * 0.001, special, 2),
  seq([...rows, C], 0.19 + seed * 0.001),
];
const rowFusions = (c: Compiled) => c.module.entry.instructions.filter((i) => i.opcode === 'fusion' && (i.params as { kind: string }).kind === 'kRow');
const fullOutputs = (c: Compiled, n: number) => rowFusions(c).reduce((a, f) => a + f.shapes.filter((s) => s.shape.reduce((x, y) => x * y, 1) === n).length, 0);

afterEach(() => {
  setKernelThreads(null);
  setNumThreads(null);
  setWasmKernels(true);
});

describe('centered outputs recomputed by their readers', () => {
  it('law: a residual block with two layer norms, value and gradients, with the pass == without, bit for bit (wasm on 1-3 threads, JS kernels); odd rows, NaN/inf rows', () => {
    fc.assert(
      fc.property(
        fc.record({ lead: fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 1 }), M: fc.integer({ min: 2, max: 37 }), C: fc.oneof(fc.integer({ min: 2, max: 70 }), fc.constantFrom(128, 131)), special: fc.boolean(), seed: fc.integer({ min: 1, max: 1000 }) }),
        ({ lead, M, C, special, seed }) => {
          const rows = [...lead, M];
          const at = (pass: number) => argsOf(rows, C, seed + pass, special);
          for (const wasmKernels of [true, false]) {
            setWasmKernels(wasmKernels);
            const [on, off] = withBackend('systolic', () => [jit(step).lower(...at(0)).compile(), jit(step).lower(...at(0)).compile({ centeredOutputs: false })]);
            expect(on.passStats.centeredOutputs).toBe(1);
            expect(off.passStats.centeredOutputs).toBe(0);
            (wasmKernels ? [1, 2, 3] : [1]).forEach((t, pass) => {
              setNumThreads(t);
              setKernelThreads(t);
              const args = at(pass + 1);
              const got = withBackend('systolic', () => on.call(args)) as Array[];
              const want = withBackend('systolic', () => off.call(args)) as Array[];
              got.forEach((x, q) => expect(bits(x), `output ${q} at ${t} thread(s), wasm ${wasmKernels}`).toEqual(bits(want[q])));
            });
          }
        },
      ),
      { numRuns: 8, examples: [[{ lead: [2], M: 16, C: 128, special: false, seed: 3 }], [{ lead: [], M: 5, C: 7, special: true, seed: 2 }]] },
    );
  });

  it("the first layer norm (whose h is an output) writes one full output fewer (x - mean; the second layer norm's h2 is no output of its fusion), and the exports are the module without the pass", () => {
    const rows = [4, 9];
    const C = 36;
    const args = argsOf(rows, C, 1, false);
    const [on, off] = withBackend('systolic', () => [jit(step).lower(...args).compile(), jit(step).lower(...args).compile({ centeredOutputs: false })]);
    expect(fullOutputs(off, 36 * C) - fullOutputs(on, 36 * C)).toBe(1);
    // (names come from global counters: compare with the numbers out)
    const norm = (t: string): string => t.replace(/\.\d+/g, '.N');
    expect(norm(on.asText())).toBe(norm(off.asText()));
    expect(norm(on.asStableHlo())).toBe(norm(off.asStableHlo()));
  });

  it('TPUKIT_CENTERED_OUTPUTS=0 is a pipeline default (so compile-cache keys see it); an explicit option wins', () => {
    const env = process.env.TPUKIT_CENTERED_OUTPUTS;
    const args = argsOf([3, 5], 9, 1, false);
    try {
      process.env.TPUKIT_CENTERED_OUTPUTS = '0';
      expect(envDefaults()).toEqual({ centeredOutputs: false });
      expect(withBackend('systolic', () => jit(step).lower(...args).compile()).passStats.centeredOutputs).toBe(0);
      expect(withBackend('systolic', () => jit(step).lower(...args).compile({ centeredOutputs: true })).passStats.centeredOutputs).toBe(1);
    } finally {
      if (env === undefined) delete process.env.TPUKIT_CENTERED_OUTPUTS;
      else process.env.TPUKIT_CENTERED_OUTPUTS = env;
    }
  });
});
