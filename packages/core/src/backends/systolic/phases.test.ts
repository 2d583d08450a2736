import { afterEach, describe, expect, it } from 'vitest';
import { fromStorage, lax, np, systolic, withBackend } from '../../index';
import { gemmPhases, resetGemmPhases } from './phases';

describe('systolic GEMM phase timer', () => {
  const threads = systolic.getNumThreads();
  afterEach(() => {
    gemmPhases.enabled = false;
    resetGemmPhases();
    systolic.setNumThreads(threads);
  });
  const dot = (m: number, k: number, n: number): void => {
    const a = np.ones([m, k]);
    const b = np.ones([k, n]);
    withBackend('systolic', () => lax.dotGeneral(a, b, [[[1], [0]], [[], []]]).dispose());
  };
  /** Runs `f` with the timer on and zeroed; returns its wall time (ms), which the phases are disjoint parts of. */
  const timed = (f: () => void): number => {
    systolic.setNumThreads(1);
    gemmPhases.enabled = true;
    resetGemmPhases();
    const t0 = performance.now();
    f();
    return performance.now() - t0;
  };
  const sum = (): number => gemmPhases.pack + gemmPhases.gemm + gemmPhases.sink;

  it('is off by default and records nothing then', () => {
    expect(gemmPhases.enabled).toBe(false);
    resetGemmPhases();
    dot(64, 64, 64);
    expect(gemmPhases.products).toBe(0);
    expect([gemmPhases.pack, gemmPhases.stage, gemmPhases.gemm, gemmPhases.sink]).toEqual([0, 0, 0, 0]);
  });

  it('sums staging, packing, kernel and sink time per product on one thread, within the calls\' time; reset zeroes it', () => {
    const wall = timed(() => {
      dot(96, 200, 64);
      dot(96, 200, 64);
    });
    expect(gemmPhases.products).toBe(2);
    // Host operands are staged (copied into wasm memory) and the result copied out by the sink.
    expect(gemmPhases.stage).toBeGreaterThan(0);
    expect(gemmPhases.pack).toBeGreaterThan(gemmPhases.stage);
    expect(gemmPhases.gemm).toBeGreaterThan(0);
    expect(gemmPhases.sink).toBeGreaterThan(0);
    expect(sum()).toBeLessThanOrEqual(wall);
    resetGemmPhases();
    expect([gemmPhases.products, gemmPhases.pack, gemmPhases.stage, gemmPhases.gemm, gemmPhases.sink]).toEqual([0, 0, 0, 0, 0]);
  });

  // (Operands in the GEMM memory need a shared memory: without one, they are staged.)
  it.runIf(systolic.backend.engine.shared)('times no staging for operands already in the GEMM memory', () => {
    const engine = systolic.backend.engine;
    const view = (n: number, seed: number): { data: Float32Array; addr: number } => {
      const addr = engine.reserve(n * 4);
      const data = new Float32Array(engine.buffer(), addr, n);
      for (let i = 0; i < n; i++) data[i] = Math.sin(i + seed);
      return { data, addr };
    };
    const a = view(96 * 200, 1);
    const b = view(200 * 64, 2);
    try {
      timed(() => withBackend('systolic', () => lax.dotGeneral(fromStorage(a.data, [96, 200], 'float32'), fromStorage(b.data, [200, 64], 'float32'), [[[1], [0]], [[], []]]).dispose()));
      expect(gemmPhases.products).toBe(1);
      expect(gemmPhases.stage).toBe(0);
      expect(gemmPhases.pack).toBeGreaterThan(0);
    } finally {
      engine.release(a.addr);
      engine.release(b.addr);
    }
  });

  it('sums one-thread products by shape and operand layout: parts within the whole call', () => {
    const wall = timed(() => {
      dot(96, 200, 64);
      dot(96, 200, 64);
      dot(40, 8, 16);
    });
    // [m,k] x [k,n]: A's k and B's columns are contiguous.
    expect([...gemmPhases.byShape.keys()].sort()).toEqual(['40x8x16 A:kc B:rc', '96x200x64 A:kc B:rc']);
    const big = gemmPhases.byShape.get('96x200x64 A:kc B:rc')!;
    expect([big.products, big.calls]).toEqual([2, 2]);
    expect(gemmPhases.byShape.get('40x8x16 A:kc B:rc')).toMatchObject({ products: 1, calls: 1 });
    for (const p of gemmPhases.byShape.values()) {
      const parts = p.packA + p.packB + p.edges + p.gemm + p.sink;
      expect(p.gemm).toBeGreaterThan(0);
      expect(Math.min(p.packA, p.packB, p.edges, p.sink)).toBeGreaterThanOrEqual(0);
      expect(parts).toBeLessThanOrEqual(p.call);
    }
    expect(big.call + gemmPhases.byShape.get('40x8x16 A:kc B:rc')!.call).toBeLessThanOrEqual(wall);
    resetGemmPhases();
    expect(gemmPhases.byShape.size).toBe(0);
  });

  it('counts each item of an item-by-item batch, with its staging, kernels and sink', () => {
    const a = np.ones([6, 32, 16]);
    const b = np.ones([6, 16, 32]);
    timed(() => withBackend('systolic', () => lax.dotGeneral(a, b, [[[2], [1]], [[0], [0]]]).dispose()));
    expect(gemmPhases.products).toBe(6);
    expect(gemmPhases.stage).toBeGreaterThan(0);
    expect(gemmPhases.gemm).toBeGreaterThan(0);
    expect(gemmPhases.sink).toBeGreaterThan(0);
    // (An item's kernel time is its total less staging and sink, so the three cannot exceed the
    // call's wall time by construction: nothing to assert there.)
  });
});
