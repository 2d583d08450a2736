/**
 * The GEMM engine's packing paths for operands read in place: A packed MC rows at a time right
 * before the kernel multiplies them (`rowBlocks`; on one thread, and with `blockRowsPool` on the
 * pool, each thread packing its own blocks), and the sweep of in-place sources before packing
 * (`touchInPlace`), give the bits of the whole-operand path that host operands (staged, not
 * blocked) take, into a fresh output and into a destination in the GEMM memory; the engine's
 * counters (`traffic.rowBlockedProducts`, `poolRowBlockJobs`, `sweptChunks`) show that each
 * product took the path it should (so switching a feature off fails the test), with the 4 x 8
 * and the 5 x 8 micro-kernels.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { type Array as TArray, fromStorage, lax, registerBackend, setNumThreads, toStorage, withBackend } from '../../index';
import { evalPrimitiveInto } from '../../internal';
import { dotGeneralP } from '../../lax/dot';
import { SystolicBackend } from './backend';
import type { GemmEngine } from './gemmEngine';
import { poolRowBlockRows, poolTestHooks, threadsAvailable } from './threads';
import { gemmPhases, resetGemmPhases } from './phases';
import { backend5x8, holdAll } from '../../../test/systolicEngines';

const backend = new SystolicBackend('systolic-engine-test');
registerBackend(backend);
// A backend whose engine runs the 5 x 8 micro-kernel (MR 5, MC 130).
const backend5 = backend5x8('systolic-engine-test-5x8');
const engine5 = backend5.engine;
afterAll(() => setNumThreads(null));

function data(n: number, seed: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.613 + seed) * (1 + (i % 5)));
}
const bits = (a: TArray): number[] => Array.from(new Uint32Array((toStorage(a) as Float32Array).slice().buffer));

/** The engine's counters that say which packing path a product took. */
const counters = (e: GemmEngine): [number, number, number] => [e.traffic.rowBlockedProducts, e.traffic.poolRowBlockJobs, e.traffic.sweptChunks];
const poolProducts = (): number => gemmPhases.pool.products;

/**
 * One case: the in-place product (into a fresh output, then into a destination in the GEMM
 * memory) gives the host path's bits, and the counters show the path it took: A packed by row
 * blocks on one thread or as the pool's row-block job exactly when `rowBlocks` applies ('kc' A,
 * M past one MC block, and for the pool either a multiple of MR or a partial last panel the SIMD
 * kernel may pack whole, reading past A into the destination reserved after it; K is always a
 * multiple of 4 here), and sources
 * swept exactly when `touch` is on. Returns the pool row-block jobs it ran.
 */
function checkCase(name: string, engine: GemmEngine, M: number, K: number, N: number, transA: boolean, touch: boolean, blockRows: boolean, threads: number, padding?: 'caller' | 'worker'): number {
  const { mr, mc } = engine.shape;
  const defaults = [engine.touchInPlace, engine.blockRows, engine.blockRowsPool] as const;
  setNumThreads(1);
  const ha = data(M * K, M + K);
  const hb = data(K * N, N);
  const aShape = transA ? [K, M] : [M, K];
  const dn: [[number[], number[]], [number[], number[]]] = [[[transA ? 0 : 1], [0]], [[], []]];
  const host = withBackend(name, () => lax.dotGeneral(fromStorage(ha, aShape, 'float32'), fromStorage(hb, [K, N], 'float32'), dn));
  const addr = engine.reserve(ha.byteLength);
  const dest = engine.reserve(M * N * 4);
  // (M need not be a multiple of MR: on one thread the last block's partial panel is packed apart
  // in TypeScript; the pool's row blocks pack it whole by the SIMD kernel, which needs reading the
  // rows past A's last to stay below the scratch (here: in `dest`))
  const blocks = blockRows && !transA && M > mc;
  const aWhole = M % mr === 0 || addr + Math.ceil(M / mr) * mr * K * 4 <= engine.floor;
  let poolBlockJobs = 0;
  // Runs one in-place product; checks the counters against the path it must take (`direct`: into a destination, no early row hand-over).
  const counted = (direct: boolean, product: () => void): void => {
    const [rb0, pj0, sw0] = counters(engine);
    const pool0 = poolProducts();
    product();
    const [rb1, pj1, sw1] = counters(engine);
    const onPool = poolProducts() > pool0;
    const poolBlocked = blocks && aWhole && onPool && direct;
    expect(rb1 - rb0).toBe(blocks && !onPool ? 1 : 0);
    expect(pj1 - pj0).toBe(poolBlocked ? 1 : 0);
    if (!touch) expect(sw1 - sw0).toBe(0);
    else if (blocks && !onPool) expect(sw1 - sw0).toBe(Math.ceil(M / mc));
    else if (poolBlocked) expect(sw1 - sw0).toBe(Math.ceil(M / poolRowBlockRows(engine.shape, Math.ceil(N / engine.nr) * engine.nr, K)));
    else expect(sw1 - sw0).toBeGreaterThan(0);
    poolBlockJobs += pj1 - pj0;
  };
  try {
    const view = new Float32Array(engine.buffer(), addr, ha.length);
    view.set(ha);
    engine.touchInPlace = touch;
    engine.blockRows = blockRows;
    engine.blockRowsPool = blockRows;
    // No packed panels left over from the host product: the scratch is poisoned.
    engine.f32.fill(Number.NaN, engine.floor / 4);
    setNumThreads(threads);
    resetGemmPhases();
    gemmPhases.enabled = true;
    let inPlace: TArray | null = null;
    counted(false, () => {
      inPlace = withBackend(name, () => lax.dotGeneral(fromStorage(view, aShape, 'float32'), fromStorage(hb, [K, N], 'float32'), dn));
    });
    expect(bits(inPlace!)).toEqual(bits(host));
    // (the in-place product went through the engine: on this thread, or split on the pool)
    if (threads === 1 || M * K * Math.ceil(N / 8) * 8 < 1 << 21) expect([...gemmPhases.byShape.values()].reduce((n, p) => n + p.products, 0)).toBe(1);
    else if (engine.parallel) expect(gemmPhases.pool.products).toBe(1);
    // Into a destination in the GEMM memory too (as a compiled step's arena: the kernel writes
    // there when N is a multiple of the panel width, with no early row hand-over).
    const into = new Float32Array(engine.buffer(), dest, M * N).fill(Number.NaN);
    const intoProduct = (): void => {
      withBackend(name, () => evalPrimitiveInto(dotGeneralP, [fromStorage(view, aShape, 'float32'), fromStorage(hb, [K, N], 'float32')], { dimensionNumbers: dn, precision: null, preferredElementType: null }, into));
    };
    const pj = engine.traffic.poolRowBlockJobs;
    counted(N % engine.nr === 0, padding === undefined ? intoProduct : () => alone(padding, intoProduct));
    expect(Array.from(new Uint32Array(into.slice().buffer))).toEqual(bits(host));
    if (padding !== undefined) {
      expect(engine.traffic.poolRowBlockJobs - pj, 'the product ran as the pool\'s row-block job').toBe(1);
      expectZeroPadding(engine, M, K, N, padding === 'caller' ? 0 : 1);
    }
  } finally {
    [engine.touchInPlace, engine.blockRows, engine.blockRowsPool] = defaults;
    gemmPhases.enabled = false;
    setNumThreads(1);
    engine.release(addr);
    engine.release(dest);
  }
  return poolBlockJobs;
}

/** Runs `product` with the pool's workers held (the calling thread computes every row block) or with the calling thread computing none. */
function alone(who: 'caller' | 'worker', product: () => void): void {
  if (who === 'caller') {
    const held = holdAll();
    try {
      product();
    } finally {
      held.release();
    }
    return;
  }
  poolTestHooks.callerComputes = false;
  try {
    product();
  } finally {
    poolTestHooks.callerComputes = true;
  }
}

/**
 * After a pool row-block product ('kc' A of M rows, M not a multiple of MR, in the engine's memory;
 * B [K, N] from the host, staged at the scratch floor, so A's packed area starts past it) whose
 * row blocks thread `tid` computed alone: the partial last panel of the last block, packed whole
 * by the SIMD kernel into that thread's part of the area (reading past A's last row: the
 * destination's NaNs in `checkCase`), holds zeros in its missing rows. C's bits cannot tell: the
 * gemm export stores only A's rows; the zeros keep NaNs and subnormals out of its FMAs.
 */
function expectZeroPadding(engine: GemmEngine, M: number, K: number, N: number, tid: number): void {
  const { mr } = engine.shape;
  const np = Math.ceil(N / engine.nr) * engine.nr;
  const rb = poolRowBlockRows(engine.shape, np, K);
  const ap = Math.ceil((engine.floor + K * N * 4) / 64) * 64;
  const i0 = (Math.ceil(M / rb) - 1) * rb;
  const full = Math.floor((M - i0) / mr);
  const panel = (ap + tid * rb * K * 4) / 4 + full * mr * K;
  const u32 = new Uint32Array(engine.buffer());
  let bad = -1;
  for (let k = 0; k < K && bad < 0; k++) for (let r = M % mr; r < mr; r++) if (u32[panel + k * mr + r] !== 0) bad = k * mr + r;
  expect(bad, `M ${M} K ${K} N ${N}, thread ${tid}: float ${bad} of the last row block's partial panel is not a zero row's`).toBe(-1);
}

describe('GemmEngine packing of in-place operands', () => {
  // Each property also runs fixed cases that must take the pool's row-block job (where worker
  // threads run), and one whose last row block ends in a partial panel on one thread.
  type Case = [number, number, number, boolean, boolean, boolean, number];
  const property = (name: string, engine: GemmEngine, ms: number[], poolCase: Case, partialCase: Case, more: Case[] = []): void => {
    let poolBlockJobs = 0;
    fc.assert(
      fc.property(
        fc.constantFrom(...ms),
        fc.constantFrom(8, 100, 600), // K (600: two K blocks of the kernel, and pool row blocks of half MC)
        fc.oneof(fc.integer({ min: 1, max: 40 }), fc.constantFrom(8, 16, 64)), // N (a multiple of 8: written straight into the destination)
        fc.boolean(), // A stored [K, M] (rows contiguous, 'rc') instead of [M, K] ('kc')
        fc.boolean(), // sweep in-place sources
        fc.boolean(), // pack A by row blocks (on one thread and on the pool)
        fc.constantFrom(1, 2, 3), // threads (the pool: each thread packs the row blocks it multiplies)
        (M, K, N, transA, touch, blockRows, threads) => {
          poolBlockJobs += checkCase(name, engine, M, K, N, transA, touch, blockRows, threads);
        },
      ),
      { numRuns: 40, examples: [poolCase, partialCase, ...more] },
    );
    if (threadsAvailable(engine)) expect(poolBlockJobs).toBeGreaterThan(0);
  };

  it.runIf(backend.engine.shared)('row-blocked packing of A and the source sweep give the host path\'s bits (4 x 8 kernel; both A layouts, K past a K block; 1, 2 and 3 threads)', () => {
    // M: several MC = 128 row blocks, a short last one; 130 is no multiple of MR = 4 (a partial last panel: blocked on one thread only)
    property('systolic-engine-test', backend.engine, [130, 132, 256, 260, 388], [388, 600, 64, false, true, true, 2], [130, 100, 16, false, false, true, 1]);
  });

  it.runIf(engine5.shared)('the same with the 5 x 8 kernel (MR 5, MC 130: blocked past 130; a partial last panel on the pool too)', () => {
    expect(engine5.shape.mr).toBe(5);
    // 132, 388, 512 and 2048 are no multiples of 5 (a partial last panel); 135 has a short last block
    const gpt: Case[] = [[2048, 128, 128, false, true, true, 2], [2048, 512, 128, false, true, true, 2], [512, 128, 512, false, false, true, 2], [132, 600, 64, false, true, true, 3]];
    property('systolic-engine-test-5x8', engine5, [132, 135, 260, 390, 388, 512, 2048], [390, 600, 64, false, true, true, 3], [2048, 100, 64, false, true, true, 1], gpt);
  });

  it.runIf(threadsAvailable(engine5))("the pool's row-block job takes a partial last panel (5 x 8: M = 2048, 512, 132) with the host path's bits", () => {
    for (const [M, K, N] of [[2048, 128, 128], [2048, 512, 128], [512, 128, 512], [132, 600, 64]]) expect(checkCase('systolic-engine-test-5x8', engine5, M, K, N, false, true, true, 2), `M = ${M}`).toBe(1);
  });

  it.runIf(threadsAvailable(engine5))("the pool's row-block job zeroes the missing rows of the partial last panel it packed whole (5 x 8: the calling thread's copy and the workers')", () => {
    for (const who of ['caller', 'worker'] as const) {
      for (const [M, K, N] of [[2048, 128, 128], [132, 600, 64], [512, 128, 512]]) expect(checkCase('systolic-engine-test-5x8', engine5, M, K, N, false, true, true, 2, who), `M = ${M}, ${who}`).toBe(1);
    }
  });

  it.runIf(threadsAvailable(backend.engine) && threadsAvailable(engine5))('the workers\' own path: every tile and row block computed by a worker (the calling thread computes none)', () => {
    poolTestHooks.callerComputes = false;
    try {
      // (blocks of half MC with K = 600, of MC with K = 100; a short last block)
      for (const [M, K] of [[388, 600], [388, 100]]) expect(checkCase('systolic-engine-test', backend.engine, M, K, 64, false, true, true, 2)).toBe(1);
      expect(checkCase('systolic-engine-test-5x8', engine5, 390, 600, 64, false, true, true, 3)).toBe(1);
      // (a partial last panel: the workers' packing of it, its zeroed rows, the gemm export's edge)
      for (const [M, K] of [[2048, 128], [132, 600]]) expect(checkCase('systolic-engine-test-5x8', engine5, M, K, 64, false, true, true, 2)).toBe(1);
    } finally {
      poolTestHooks.callerComputes = true;
    }
  });
});
