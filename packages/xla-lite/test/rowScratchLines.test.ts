// Row kernels' per-thread scratch rows on cache lines of their own (src/wasm/emitKernel.ts
// `setRowScratchAlign`, program.ts's placement): thread t's scratch block starts at
// addr + t * rowBytes; with the blocks a whole number of 64-byte lines from a 64-byte aligned
// address, no two threads write one line (the old layout, 16-byte multiples from a 16-byte
// address, had thread 0's last line shared with thread 1's first). Only addresses move: the
// same bits at 1 and 2 threads.
import { type Array, np, toStorage, valueAndGrad, withBackend } from '@tpukit/core';
import { afterEach, describe, expect, it } from 'vitest';
import { jit, setKernelThreads } from '../src/index';
import { setRowScratchAlign } from '../src/wasm/emitKernel';
import { programsOf } from './programSpy';

const LINE = 64;
const bits = (a: Array) => globalThis.Array.from(new Uint32Array((toStorage(a) as Float32Array).slice().buffer));
const seq = (shape: number[], s: number): Array => {
  const n = shape.reduce((a, b) => a * b, 1);
  return np.array(Float32Array.from({ length: n }, (_, i) => Math.sin(i * s + 0.3) * (1 + (i % 7) * 0.5)), 'float32').reshape(shape);
};

function layerNorm(x: Array, g: Array, b: Array): Array {
  const mu = np.mean(x, { axis: -1, keepdims: true });
  const xc = np.subtract(x, mu);
  const v = np.mean(np.square(xc), { axis: -1, keepdims: true });
  return np.add(np.multiply(np.multiply(xc, np.reciprocal(np.sqrt(np.add(v, 1e-5)))), g), b);
}
/** A residual add, a layer norm (forward and backward row kernels) and a product, as in the GPT's block. */
const loss = (p: { g: Array; b: Array; w: Array }, h0: Array, a: Array): Array => np.sum(np.square(np.matmul(layerNorm(np.add(h0, a), p.g, p.b), p.w)));
const f = (...x: Array[]) => {
  const [l, gr] = valueAndGrad(loss)({ g: x[0], b: x[1], w: x[2] }, x[3], x[4]) as [Array, { g: Array; b: Array; w: Array }];
  return [l, gr.g, gr.b, gr.w];
};

/** `f` compiled for the systolic backend with the scratch on lines (`on`) or in the old layout. */
function compile(args: Array[], on: boolean) {
  setRowScratchAlign(on);
  try {
    return withBackend('systolic', () => jit(f).lower(...args).compile());
  } finally {
    setRowScratchAlign(true);
  }
}

/** The row kernels' scratch blocks of the programs `call` runs: [address, bytes per thread]. */
function scratchOf(call: () => unknown): [number, number][] {
  const out: [number, number][] = [];
  for (const p of programsOf(call)) for (const s of p.steps.values()) if (s.scratch !== null) out.push([s.scratch.addr, s.scratch.rowBytes]);
  return out;
}

/** Whether two threads' scratch blocks (thread t: [addr + t * rowBytes, + rowBytes)) share a line, for threads 0..3. */
const shared = ([addr, rowBytes]: [number, number]): boolean => {
  for (let t = 0; t < 3; t++) if (Math.floor((addr + (t + 1) * rowBytes - 1) / LINE) === Math.floor((addr + (t + 1) * rowBytes) / LINE)) return true;
  return false;
};

describe('row kernel scratch on cache lines', () => {
  afterEach(() => setKernelThreads(null));
  // Rows of 36 columns: 144-byte scratch rows (not a multiple of 64), so the old layout shares a
  // line between threads whatever the region's address; 128 columns as in the GPT.
  for (const D of [36, 128]) {
    const args = [seq([D], 0.11), seq([D], 0.23), seq([D, 8], 0.31), seq([4, 40, D], 0.47), seq([4, 40, D], 0.53)];
    it(`every thread's scratch block starts on a line and no two share one (D=${D})`, () => {
      const c = compile(args, true);
      const blocks = scratchOf(() => c.call(args));
      expect(blocks.length).toBeGreaterThanOrEqual(1); // (the forward keeps xc in scratch)
      for (const b of blocks) {
        expect(b[0] % LINE, `scratch at ${b[0]}`).toBe(0);
        expect(b[1] % LINE, `scratch rows of ${b[1]} bytes`).toBe(0);
        expect(shared(b)).toBe(false);
      }
    });
    it(`the same bits as the old layout on 1 and 2 threads (D=${D})`, () => {
      const on = compile(args, true);
      const off = compile(args, false);
      for (const threads of [1, 2]) {
        setKernelThreads(threads);
        const a = on.call(args);
        const b = off.call(args);
        a.forEach((x, q) => expect(bits(x), `output ${q} at ${threads} threads`).toEqual(bits(b[q])));
      }
    });
  }
  it('the old layout shares lines (the layout this replaces)', () => {
    const args = [seq([36], 0.11), seq([36], 0.23), seq([36, 8], 0.31), seq([4, 40, 36], 0.47), seq([4, 40, 36], 0.53)];
    const c = compile(args, false);
    const blocks = scratchOf(() => c.call(args));
    expect(blocks.length).toBeGreaterThanOrEqual(1);
    expect(blocks.some(shared)).toBe(true);
  });
});
