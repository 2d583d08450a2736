// Zero-copy dots (wasm/program.ts): with the systolic backend the executable's arena is a region
// of the GEMM engine's memory, fusion results that dots read are handed on as views and packed
// in place. Results must be bit-identical to the arena in a memory of its own (the copies).
import { type Array, np, registerBackend, setNumThreads, systolic, toStorage, valueAndGrad, withBackend } from '@tpukit/core';
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { arenaTraffic, jit, setKernelThreads, setZeroCopyDots, zeroCopyDotsEnabled } from '../src/index';
import { kernelThreadsAvailable, poolStats } from '../src/internal';
import { type TinyDims, fill, layerNorm, tinyTokens, tinyTransformerLoss, tinyTransformerParams } from './tinyTransformer';

const dims: TinyDims = { V: 64, D: 32, H: 2, F: 64, T: 16, B: 4 };
const loss = tinyTransformerLoss(dims, layerNorm);
const params = () => tinyTransformerParams(dims);
const tok = (s: number) => tinyTokens(dims, s);
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
  setNumThreads(null);
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

  it('runs on the thread pools (kernels and GEMM on 2 threads) bit-identical to the copying path on 1 thread', () => {
    const off = compileStep(false);
    const want = off.call(2).map(bits);
    // Large enough for both pools: the GEMM splits its products, the kernels their items.
    const f = (x: Array, w: Array, v: Array) => np.matmul(np.tanh(np.matmul(np.multiply(x, 2), w)), v);
    const xs = [fill([256, 512], 0.1, 1), fill([512, 1024], 0.05, 2), fill([1024, 64], 0.05, 3)];
    const big = (zeroCopy: boolean) => {
      setZeroCopyDots(zeroCopy);
      const c = withBackend('systolic', () => jit(f).lower(xs[0], xs[1], xs[2]).compile());
      setZeroCopyDots(true);
      return withBackend('systolic', () => c.call(xs)).map(bits);
    };
    const wantBig = big(false);
    setNumThreads(2);
    setKernelThreads(2);
    const jobs = poolStats().parallelJobs;
    const on = compileStep(true);
    expect(on.c.stats.arenaInBackend).toBe(true);
    expect(on.call(2).map(bits)).toEqual(want);
    expect(big(true)).toEqual(wantBig);
    if (kernelThreadsAvailable()) expect(poolStats().parallelJobs).toBeGreaterThan(jobs);
  });

  it('two executables alive at once hold separate regions and keep their results', () => {
    const a = compileStep(true);
    const b = compileStep(true);
    const wantA = a.call(0).map(bits);
    const wantB = b.call(1).map(bits);
    // Interleaved calls: neither overwrites the other's arena.
    expect(b.call(1).map(bits)).toEqual(wantB);
    expect(a.call(0).map(bits)).toEqual(wantA);
    expect(b.call(0).map(bits)).toEqual(wantA);
  });

  it('a memory that grows during a call leaves the arena and its views valid', () => {
    // A backend of its own: its GEMM memory starts small, the arena is reserved in it, and the
    // large product in the middle of the call makes it grow.
    const fresh = new systolic.SystolicBackend('systolic-zero-copy-growth');
    registerBackend(fresh);
    const f = (x: Array, w: Array, v: Array) => np.matmul(np.tanh(np.matmul(np.multiply(x, 2), w)), v);
    const x = fill([256, 512], 0.1, 1);
    const w = fill([512, 1024], 0.05, 2);
    const v = fill([1024, 64], 0.05, 3);
    const run = (zeroCopy: boolean) => {
      setZeroCopyDots(zeroCopy);
      const c = withBackend(fresh.name, () => jit(f).lower(x, w, v).compile());
      setZeroCopyDots(true);
      const before = fresh.engine.memory.buffer.byteLength;
      const r = withBackend(fresh.name, () => c.call([x, w, v]));
      return { c, r, grew: fresh.engine.memory.buffer.byteLength > before };
    };
    const on = run(true);
    expect(on.c.stats.arenaInBackend).toBe(true);
    expect(on.grew).toBe(true);
    expect(on.r.map(bits)).toEqual(run(false).r.map(bits));
    expect(withBackend(fresh.name, () => on.c.call([x, w, v])).map(bits)).toEqual(on.r.map(bits));
  });

  it('other backends keep the arena in a memory of its own; a bad switch value is refused by name', () => {
    const c = withBackend('reference', () => jit((x: Array) => np.matmul(np.tanh(x), x)).lower(fill([8, 8], 0.3, 1)).compile());
    expect(c.stats.arenaInBackend).toBe(false);
    expect(() => setZeroCopyDots('no' as unknown as boolean)).toThrow(/setZeroCopyDots: on must be a boolean; got no/);
    expect(zeroCopyDotsEnabled()).toBe(true);
  });

  it('an arena host without room for the arena: the program keeps a memory of its own, same results', () => {
    // The systolic backend, but its arena host refuses every reservation (as at the 2 GiB limit).
    const full = Object.create(systolic.backend) as typeof systolic.backend;
    const host = systolic.backend.arenaHost()!;
    Object.defineProperty(full, 'name', { value: 'systolic-zero-copy-full' });
    full.arenaHost = () => ({ memory: host.memory, maxPages: host.maxPages, buffer: () => host.buffer(), release: () => undefined, reserve: () => -1 });
    registerBackend(full);
    const f = (x: Array, w: Array) => np.matmul(np.tanh(np.matmul(np.multiply(x, 2), w)), w);
    const x = fill([64, 64], 0.1, 1);
    const w = fill([64, 64], 0.1, 2);
    const c = withBackend(full.name, () => jit(f).lower(x, w).compile());
    expect(c.stats.arenaInBackend).toBe(false);
    const want = withBackend('systolic', () => jit(f).lower(x, w).compile().call([x, w]));
    expect(withBackend(full.name, () => c.call([x, w])).map(bits)).toEqual(want.map(bits));
  });

  it('releases its region when the executable is garbage-collected', async () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const fresh = new systolic.SystolicBackend('systolic-zero-copy-release');
    registerBackend(fresh);
    const floor = fresh.engine.floor;
    (() => {
      const x = fill([128, 128], 0.1, 1);
      const c = withBackend(fresh.name, () => jit((a: Array, w: Array) => np.matmul(np.tanh(np.multiply(a, 2)), w)).lower(x, x).compile());
      expect(c.stats.arenaInBackend).toBe(true);
      withBackend(fresh.name, () => c.call([x, x]));
      expect(fresh.engine.floor).toBeGreaterThan(floor);
    })();
    for (let i = 0; i < 20 && fresh.engine.floor > floor; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(fresh.engine.floor).toBe(floor);
  });
});
