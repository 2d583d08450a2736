import { afterEach, describe, expect, it } from 'vitest';
import { lax, np, systolic, withBackend } from '../../index';
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

  it('is off by default and records nothing then', () => {
    expect(gemmPhases.enabled).toBe(false);
    resetGemmPhases();
    dot(64, 64, 64);
    expect(gemmPhases.products).toBe(0);
    expect(gemmPhases.gemm).toBe(0);
  });

  it('sums staging, packing, kernel and sink time per product on one thread; reset zeroes it', () => {
    systolic.setNumThreads(1);
    gemmPhases.enabled = true;
    resetGemmPhases();
    dot(96, 200, 64);
    dot(96, 200, 64);
    expect(gemmPhases.products).toBe(2);
    expect(gemmPhases.gemm).toBeGreaterThan(0);
    expect(gemmPhases.pack).toBeGreaterThanOrEqual(gemmPhases.stage);
    expect(gemmPhases.stage).toBeGreaterThanOrEqual(0);
    expect(gemmPhases.sink).toBeGreaterThanOrEqual(0);
    resetGemmPhases();
    expect([gemmPhases.products, gemmPhases.pack, gemmPhases.stage, gemmPhases.gemm, gemmPhases.sink]).toEqual([0, 0, 0, 0, 0]);
  });

  it('counts each item of an item-by-item batch', () => {
    systolic.setNumThreads(1);
    gemmPhases.enabled = true;
    resetGemmPhases();
    const a = np.ones([6, 32, 16]);
    const b = np.ones([6, 16, 32]);
    withBackend('systolic', () => lax.dotGeneral(a, b, [[[2], [1]], [[0], [0]]]).dispose());
    expect(gemmPhases.products).toBe(6);
  });
});
