// The WebAssembly row kernel's store-saving paths (src/wasm/rowsKernel.ts `setRowKernelPaths`):
// (1) a row kernel with column sums leaves unwritten the outputs that only those sums read
// (`FusionPlan.sumOnlyOutputs`, found by program.ts's pairing): the GPT's layer-norm backward,
// whose output dy = dq + dk + dv only the gamma/beta sums read; (2) a broadcast of a parameter
// that a later stage reads (a layer norm's gamma and beta) is read again from the parameter
// instead of a scratch row. Both must give the bits of the kernels with the paths off, for any
// shape, on 1, 2 and 3 threads, with NaN and infinite rows; (1) must leave the summed output's
// region untouched (the executable still hands on everything a reader needs).
import { type Array, np, setNumThreads, toStorage, valueAndGrad, withBackend } from '@tpukit/core';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { setKernelThreads } from '../src/index';
import { WasmProgram } from '../src/wasm/program';
import { programsOf } from './programSpy';
import { compileWithPaths, type RowFn, sameBitsOverThreads } from './rowPathHarness';
import { setRowKernelPaths } from '../src/wasm/rowsKernel';

const bits = (a: Array) => globalThis.Array.from(new Uint32Array((toStorage(a) as Float32Array).slice().buffer));
/** Values from `seed`; `special` puts NaN, +inf and -inf into rows 1, 2 and 3 (when there are). */
const seq = (shape: number[], s: number, special = false): Array => {
  const n = shape.reduce((a, b) => a * b, 1);
  const C = shape[shape.length - 1];
  const v = Float32Array.from({ length: n }, (_, i) => Math.sin(i * s + 0.3) * (1 + (i % 7) * 0.5));
  if (special) [NaN, Infinity, -Infinity].forEach((x, k) => (k + 1) * C < n && (v[(k + 1) * C + ((k * 5) % C)] = x));
  return np.array(v, 'float32').reshape(shape);
};
type Fn = RowFn;

type Paths = { skipSumOnly: boolean; reread: boolean };
/** `g` compiled for the systolic backend with the paths `on` (both, or as given) or off (the kernels are emitted at compile). */
const compile = (g: Fn, args: Array[], on: boolean | Paths) => compileWithPaths(g, args, typeof on === 'boolean' ? { skipSumOnly: on, reread: on } : on, { skipSumOnly: true, reread: true });

const POISON = 0x7fc0dead;
/** How many float32 words of the program's arena still hold POISON after `call` (filled first). */
function untouched(prog: WasmProgram, call: () => unknown): number {
  const f32 = (prog as unknown as { f32: Float32Array }).f32;
  const words = new Uint32Array(f32.buffer, f32.byteOffset + prog.base, prog.arenaBytes / 4);
  words.fill(POISON);
  call();
  let n = 0;
  for (const w of words) if (w === POISON) n++;
  return n;
}

/**
 * The GPT's layer-norm backward (its fused_computation.0): dy = d1 + d2 + d3 (the q, k and v
 * input gradients, products the row fusion cannot take in), dx from dy, xc and inv, and the
 * gamma/beta gradients sum(dy * xc * inv) and sum(dy) over the rows. dy is an output of the
 * backward row fusion that only the gamma/beta column sums read. `alsoRead`: a product reads dy
 * too (then it must be written).
 */
const lnBackward =
  (alsoRead: boolean): Fn =>
  (...[xc, inv, g, d1, d2, d3, w]: Array[]): Array[] => {
    const dy = np.add(np.add(d1, d2), d3);
    const axes = xc.shape.slice(0, -1).map((_, k) => k);
    const dyg = np.multiply(dy, g);
    const a = np.mean(np.multiply(dyg, xc), { axis: -1, keepdims: true });
    const m = np.mean(dyg, { axis: -1, keepdims: true });
    const dx = np.multiply(inv, np.subtract(np.subtract(dyg, m), np.multiply(np.multiply(xc, np.square(inv)), a)));
    const out = [dx, np.sum(np.multiply(np.multiply(dy, xc), inv), { axis: axes }), np.sum(dy, { axis: axes })];
    return alsoRead ? [...out, np.matmul(dy, w)] : out;
  };
const lnArgs = (rows: number[], C: number, seed: number, special = false): Array[] => [
  seq([...rows, C], seed * 0.29, special),
  seq([...rows, 1], 0.7 + seed * 0.01),
  seq([C], 0.3 + seed * 0.02),
  seq([...rows, C], 0.11 + seed * 0.01, special),
  seq([...rows, C], 0.13 + seed * 0.01),
  seq([...rows, C], 0.17 + seed * 0.01),
  seq([C, 3], 0.2 + seed * 0.03),
];

/** On 1, 2, 3 and again 1 thread(s), new arguments each pass: the executable with the paths on gives the bits of the one with them off. */
function sameBits(g: Fn, argsAt: (pass: number) => Array[]): void {
  sameBitsOverThreads(compile(g, argsAt(0), true), compile(g, argsAt(0), false), argsAt, bits);
}

afterEach(() => {
  setRowKernelPaths({ skipSumOnly: true, reread: true });
  setKernelThreads(null);
  setNumThreads(null);
  vi.restoreAllMocks();
});

describe('row kernel store-saving paths', () => {
  it('law: the layer-norm backward with paths on == off, bit for bit, random shapes (odd row lengths, NaN/inf rows), 1-3 threads', () => {
    fc.assert(
      fc.property(
        fc.record({
          lead: fc.oneof(fc.constant([] as number[]), fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 2 })),
          M: fc.integer({ min: 2, max: 37 }),
          C: fc.oneof(fc.integer({ min: 1, max: 70 }), fc.constantFrom(128, 131)),
          special: fc.boolean(),
          alsoRead: fc.boolean(),
          seed: fc.integer({ min: 1, max: 1000 }),
        }),
        ({ lead, M, C, special, alsoRead, seed }) => sameBits(lnBackward(alsoRead), (pass) => lnArgs([...lead, M], C, seed + pass, special)),
      ),
      { numRuns: 12, examples: [[{ lead: [2], M: 16, C: 128, special: false, alsoRead: false, seed: 3 }], [{ lead: [], M: 5, C: 7, special: true, alsoRead: true, seed: 2 }]] },
    );
  });

  it('the layer-norm backward with its sums on one thread leaves dy (read only by the sums) unwritten; read elsewhere too, it writes it', () => {
    setNumThreads(1);
    setKernelThreads(1);
    const [rows, C] = [[4, 16], 36];
    for (const alsoRead of [false, true]) {
      const g = lnBackward(alsoRead);
      // (gamma is read again either way: its scratch row stays untouched in both)
      const count = (skipSumOnly: boolean): number => {
        const c = compile(g, lnArgs(rows, C, 1), { skipSumOnly, reread: true });
        const args = lnArgs(rows, C, 2);
        const progs = programsOf(() => withBackend('systolic', () => c.call(args)));
        expect(progs.size).toBe(1);
        const [prog] = progs;
        return untouched(prog, () => withBackend('systolic', () => c.call(lnArgs(rows, C, 3))));
      };
      const on = count(true);
      const off = count(false);
      if (alsoRead) expect(on).toBe(off);
      else expect(on - off).toBe(4 * 16 * C);
    }
  });

  it('a layer norm forward reads gamma and beta again in its last stage: their scratch rows stay untouched', () => {
    setNumThreads(1);
    setKernelThreads(1);
    const fwd: Fn = (x, g, b) => {
      const xc = np.subtract(x, np.mean(x, { axis: -1, keepdims: true }));
      const inv = np.divide(1, np.sqrt(np.add(np.mean(np.square(xc), { axis: -1, keepdims: true }), 1e-5)));
      return [np.add(np.multiply(np.multiply(xc, inv), g), b)];
    };
    const C = 21;
    const argsAt = (s: number) => [seq([9, C], 0.3 + s), seq([C], 0.5 + s), seq([C], 0.9 + s)];
    const count = (reread: boolean): number => {
      const c = compile(fwd, argsAt(0), { skipSumOnly: true, reread });
      const [prog] = programsOf(() => withBackend('systolic', () => c.call(argsAt(1))));
      return untouched(prog, () => withBackend('systolic', () => c.call(argsAt(2))));
    };
    // One thread's two scratch rows (the copies' padding lanes copy what follows gamma and beta, which may be the poison itself).
    const d = count(true) - count(false);
    expect(d).toBeGreaterThanOrEqual(2 * C);
    expect(d).toBeLessThanOrEqual(2 * Math.ceil(C / 4) * 4);
  });

  it('law: layer norm forwards (gamma and beta read again in the last stage) with paths on == off, bit for bit, 1-3 threads', () => {
    const fwd: Fn = (x, g, b, r) => {
      const h = np.add(x, r);
      const xc = np.subtract(h, np.mean(h, { axis: -1, keepdims: true }));
      const v = np.mean(np.square(xc), { axis: -1, keepdims: true });
      const inv = np.divide(1, np.sqrt(np.add(v, 1e-5)));
      return [np.add(np.multiply(np.multiply(xc, inv), g), b), h, xc, inv];
    };
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 41 }), fc.integer({ min: 1, max: 150 }), fc.boolean(), fc.integer({ min: 1, max: 1000 }), (R, C, special, seed) => {
        sameBits(fwd, (pass) => [seq([R, C], seed * 0.31 + pass, special), seq([C], 0.5 + pass), seq([C], 0.9 + pass), seq([R, C], 0.23 + seed * 0.01 + pass)]);
      }),
      { numRuns: 15, examples: [[128, 128, false, 4], [3, 5, true, 7]] },
    );
  });
});
