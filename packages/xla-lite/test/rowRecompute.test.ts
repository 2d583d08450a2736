// Row fusion's dropped outputs (passes/rowFusion.ts `dropRecomputableOutputs`): an extra output
// of a kRow fusion that the loop fusions reading it can recompute is not written; they rebuild
// it from the row kernel's other outputs. Law: layer-norm and GELU gradient programs give the
// same bits with the drop and without it (`rowRecompute: false`), with wasm and JS kernels.
import { type Array, grad, np } from '@tpukit/core';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { fuseRows, HloModule, jit, setWasmKernels } from '../src/internal';
import { B, f32 } from './build';

afterEach(() => setWasmKernels(true));

const bits = (a: Array): number[] => globalThis.Array.from(new Uint32Array(Float32Array.from(a.dataSync() as Float32Array).buffer));
const wave = (n: number, s: number, a = 1, b = 0) => np.array(Float32Array.from({ length: n }, (_, i) => Math.sin(i * 1.1 + s) * a + b));
const layerNorm = (x: any, g: any, b: any) => {
  const mu = np.mean(x, { axis: -1, keepdims: true });
  const v = np.mean(np.square(np.subtract(x, mu)), { axis: -1, keepdims: true });
  return np.add(np.multiply(np.multiply(np.subtract(x, mu), np.reciprocal(np.sqrt(np.add(v, 1e-5)))), g), b);
};
const gelu = (x: any) => np.multiply(np.multiply(x, 0.5), np.add(1, np.tanh(np.multiply(0.7978845834732056, np.add(x, np.multiply(0.044715, np.multiply(np.multiply(x, x), x)))))));
/** A pre-norm residual block; with `mlp`, a GELU MLP after the norm. */
const block = (mlp: boolean) => (x: any, w1: any, w2: any, g: any, b: any) => {
  const h = layerNorm(x, g, b);
  return np.add(x, mlp ? np.matmul(gelu(np.matmul(h, w1)), w2) : np.matmul(h, w1));
};
/** Output count of every kRow fusion, in program order. */
const rowOutputs = (c: { module: HloModule }) => c.module.entry.instructions.filter((i) => i.opcode === 'fusion' && i.params.kind === 'kRow').map((i) => i.shapes.length);

describe('row fusion: recomputable outputs dropped (rowRecompute)', () => {
  it('law: layer-norm and GELU gradient programs give the same bits with and without the drop (wasm and JS kernels)', () => {
    fc.assert(
      fc.property(fc.boolean(), fc.integer({ min: 2, max: 9 }), fc.integer({ min: 4, max: 40 }), fc.integer({ min: 1, max: 24 }), fc.integer({ min: 0, max: 999 }), (mlp, rows, n, hidden, s) => {
        const x = wave(rows * n, s, 2, 0.5).reshape([rows, n]);
        const w1 = wave(n * (mlp ? hidden : n), s + 1, 0.3).reshape([n, mlp ? hidden : n]);
        const w2 = wave(hidden * n, s + 2, 0.3).reshape([hidden, n]);
        const args = [x, w1, w2, wave(n, s + 3, 1, 1), wave(n, s + 4, 0.5)];
        const dl = grad((...a: any[]) => np.sum(np.sin((block(mlp) as any)(...a))), { argnums: [0, 1, 2, 3, 4] } as any);
        const on = jit(dl).lower(...args).compile({ rowRecompute: true });
        const off = jit(dl).lower(...args).compile({ rowRecompute: false });
        // The drop happens (the forward norm writes fewer outputs), so the law compares two programs.
        const a = rowOutputs(on);
        const b = rowOutputs(off);
        expect(a.length).toBe(b.length);
        expect(a.reduce((p, q) => p + q, 0)).toBeLessThan(b.reduce((p, q) => p + q, 0));
        for (const wasm of [true, false]) {
          setWasmKernels(wasm);
          const r1 = jit(dl).lower(...args).compile({ rowRecompute: true }).call(args);
          const r2 = jit(dl).lower(...args).compile({ rowRecompute: false }).call(args);
          r1.forEach((r, k) => expect(bits(r)).toEqual(bits(r2[k])));
        }
        setWasmKernels(true);
      }),
      { numRuns: 10 },
    );
  });

  it('fuseRows rejects a non-boolean recompute flag', () => {
    const b = new B();
    const x = b.param(f32(2, 3));
    const c = b.out(b.op('exp', [x]));
    expect(() => fuseRows(c, new HloModule('m', c), 'no' as unknown as boolean)).toThrow(/fuseRows: recompute must be a boolean; got no/);
  });
});
