// Zero-copy dots (wasm/program.ts): with the systolic backend the executable's arena is a region
// of the GEMM engine's memory, fusion results that dots read are handed on as views and packed
// in place. Results must be bit-identical to the arena in a memory of its own (the copies).
import { type Array, nn, np, systolic, toStorage, valueAndGrad, withBackend } from '@tpukit/core';
import { afterEach, describe, expect, it } from 'vitest';
import { arenaTraffic, jit, setKernelThreads, setZeroCopyDots, zeroCopyDotsEnabled } from '../src/index';

const [V, D, H, F, T, B] = [64, 32, 2, 64, 16, 4];
const fill = (shape: number[], s: number, k: number) => np.array(Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => s * Math.sin(i * 0.37 + k)), 'float32').reshape(shape);
const layerNorm = (x: Array, g: Array) => np.multiply(np.multiply(np.subtract(x, np.mean(x, { axis: -1, keepdims: true })), np.reciprocal(np.sqrt(np.add(np.var(x, { axis: -1, keepdims: true }), 1e-5)))), g);

function loss(p: Record<string, Array>, tokens: Array, targets: Array): Array {
  const dh = D / H;
  let x = np.take(p.wte, tokens, { axis: 0 });
  const h = layerNorm(x, p.g1);
  const heads = (w: Array) => np.transpose(np.matmul(h, w).reshape([B, T, H, dh]), [0, 2, 1, 3]);
  const scores = np.multiply(np.matmul(heads(p.wq), np.swapaxes(heads(p.wk), -1, -2)), 1 / Math.sqrt(dh));
  const att = np.matmul(nn.softmax(np.where(np.tri(T, T, 0, 'bool'), scores, -1e9), { axis: -1 }), heads(p.wv));
  x = np.add(x, np.matmul(np.transpose(att, [0, 2, 1, 3]).reshape([B, T, D]), p.wo));
  x = np.add(x, np.matmul(nn.gelu(np.matmul(layerNorm(x, p.g2), p.w1)), p.w2));
  const logp = nn.logSoftmax(np.matmul(x, np.transpose(p.wte)), { axis: -1 });
  return np.negative(np.mean(np.sum(np.multiply(logp, nn.oneHot(targets, V)), { axis: -1 })));
}

const params = () => ({ wte: fill([V, D], 0.05, 1), g1: np.ones([D]), g2: np.ones([D]), wq: fill([D, D], 0.2, 2), wk: fill([D, D], 0.2, 3), wv: fill([D, D], 0.2, 4), wo: fill([D, D], 0.2, 5), w1: fill([D, F], 0.2, 6), w2: fill([F, D], 0.1, 7) });
const tok = (s: number) => np.array(Int32Array.from({ length: B * T }, (_, i) => (i * 7 + s * 3) % V)).reshape([B, T]);
const bits = (a: Array) => globalThis.Array.from(new Uint32Array((toStorage(a) as Float32Array).slice().buffer));

/** The step compiled under the systolic backend with zero-copy dots on or off, and a call of it on batch `s`. */
function compileStep(zeroCopy: boolean) {
  setZeroCopyDots(zeroCopy);
  try {
    const p = params();
    const lowered = withBackend('systolic', () => jit(valueAndGrad(loss)).lower(p, tok(0), tok(1)));
    const c = withBackend('systolic', () => lowered.compile());
    const flat = (s: number) => [...lowered.jaxpr.consts, ...[p.g1, p.g2, p.w1, p.w2, p.wk, p.wo, p.wq, p.wte, p.wv], tok(s), tok(s + 1)];
    return { c, call: (s: number) => withBackend('systolic', () => c.call(flat(s))) };
  } finally {
    setZeroCopyDots(true);
  }
}

afterEach(() => {
  setZeroCopyDots(true);
  setKernelThreads(null);
});

describe('zero-copy dots', () => {
  it('places the arena in the GEMM memory and reads fusion results in place, bit-identical to the copying path', () => {
    const on = compileStep(true);
    const off = compileStep(false);
    expect(zeroCopyDotsEnabled()).toBe(true);
    expect(on.c.stats.arenaInBackend).toBe(true);
    expect(off.c.stats.arenaInBackend).toBe(false);
    const engine = systolic.backend.engine;
    for (const s of [0, 1]) {
      const t0 = arenaTraffic();
      const e0 = { ...engine.traffic };
      const a = on.call(s);
      const t1 = arenaTraffic();
      const e1 = { ...engine.traffic };
      const b = off.call(s);
      const t2 = arenaTraffic();
      const e2 = { ...engine.traffic };
      expect(a.map(bits)).toEqual(b.map(bits));
      // In place: views instead of copies out of the arena, fewer bytes staged into the GEMM.
      expect(t1.viewBytes - t0.viewBytes).toBeGreaterThan(0);
      expect(t2.viewBytes - t1.viewBytes).toBe(0);
      expect(t1.copiedOutBytes - t0.copiedOutBytes).toBeLessThan(t2.copiedOutBytes - t1.copiedOutBytes);
      expect(e1.inPlaceBytes - e0.inPlaceBytes).toBeGreaterThan(0);
      expect(e2.inPlaceBytes - e1.inPlaceBytes).toBe(0);
      expect(e1.stagedBytes - e0.stagedBytes).toBeLessThan(e2.stagedBytes - e1.stagedBytes);
    }
  });
});
