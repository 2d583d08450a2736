/**
 * K-blocked products on the thread pool (`ParallelJob.kBlocks`, `GemmEngine.blockKPool`): a product
 * of two 'rc' operands read in place (the weight gradients) is packed and multiplied K block by K
 * block by every thread, instead of both operands packed whole and C split into tiles over the
 * whole K. It changes speed only: the law compares it, bit for bit, with one thread's whole-operand
 * path over shapes at and around the edges (K blocks of 256, MC row blocks, the tile split), both
 * storage dtypes, flushing, a destination in the GEMM memory or a fresh output, 2 and 3 threads,
 * the 4 x 8 and 5 x 8 micro-kernels (M a multiple of MR or not: A's partial last row panel), and checks by the engine's counter that exactly the products its conditions name took it. Then
 * the calling thread alone (the worker held before it joins) and a worker let go ~2 ms into the
 * product, which then computes some of its tiles.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { aval } from '../../aval';
import { bf16, systolic } from '../../index';
import { poolTestHooks } from './threads';
import type { GemmEngine } from './gemmEngine';
import { mxuDotGeneral } from './mxuDot';
import { backend5x8, data, engineMemory, holdAll, lateJoins } from '../../../test/systolicEngines';
import { K_BLOCK_KC, PARALLEL_MIN_WORK } from './gemmEngine';


interface Case {
  M: number;
  K: number;
  N: number;
  /** lhs stored [K, M] ('rc') rather than [M, K]; rhs likewise [K, N]. */
  lhsT: boolean;
  rhsT: boolean;
  dtype: 'float32' | 'bfloat16';
  flush: boolean;
  direct: boolean;
  threads: number;
  /** The 5 x 8 micro-kernel's engine (MR 5, MC 130) instead of the default 4 x 8. */
  k5x8?: boolean;
  seed: number;
}

// A backend whose engine runs the 5 x 8 micro-kernel (MR 5, MC 130).
const backend5 = backend5x8('systolic-kblocks-pool-test-5x8');

/** The backend's engine with `threads` threads installed. */
function engineWith(threads: number, k5x8 = false): GemmEngine {
  systolic.setNumThreads(threads);
  return (k5x8 ? backend5 : systolic.backend).engine;
}

/**
 * Runs case `c` on one thread with K blocks off (the reference), then on `c.threads` threads with
 * the pool's K blocks on (`during` runs right before that product), operands in the engine's
 * memory; expects the same bits and returns how many products the pool ran by K blocks.
 */
function check(c: Case, during?: () => void): number {
  const { M, K, N, lhsT, rhsT, dtype, flush, direct, threads, k5x8, seed } = c;
  const e = engineWith(1, k5x8);
  const store = (x: Float32Array): Float32Array | Uint16Array => (dtype === 'bfloat16' ? bf16.encode(x) : x);
  const { inMemory, releaseAll } = engineMemory(e);
  const saved = [e.blockK, e.blockKPool];
  try {
    const lhs = { data: inMemory(store(data(M * K, seed))), shape: lhsT ? [K, M] : [M, K], dtype };
    const rhs = { data: inMemory(store(data(K * N, seed + 1))), shape: rhsT ? [K, N] : [N, K], dtype };
    const params = { dimensionNumbers: [[[lhsT ? 0 : 1], [rhsT ? 0 : 1]], [[], []]] as [[number[], number[]], [number[], number[]]], precision: null, preferredElementType: null };
    const out = aval([M, N], 'float32');
    const into = direct ? (inMemory(new Float32Array(M * N)) as Float32Array) : null;
    const run = (t: number, on: boolean): Uint32Array => {
      const eng = engineWith(t, k5x8);
      eng.blockK = on;
      eng.blockKPool = on;
      eng.f32.fill(Number.NaN, eng.floor / 4); // poisoned scratch: nothing packed before may reach a result
      if (into) into.fill(Number.NaN);
      if (on) during?.();
      const r = mxuDotGeneral(eng, lhs, rhs, params, out, { flushSubnormals: flush }, into ?? undefined) as Float32Array;
      return new Uint32Array((into ?? r).slice().buffer);
    };
    const want = run(1, false);
    const before = e.traffic.kBlockedPoolJobs;
    const got = run(threads, true);
    if (M % e.shape.mr !== 0 && e.traffic.kBlockedPoolJobs > before) expectZeroPadding(e, M, K);
    // (the first differing element, not a diff of up to 250k numbers)
    expect(got.findIndex((x, i) => x !== want[i])).toBe(-1);
    expect(got.length).toBe(want.length);
    return e.traffic.kBlockedPoolJobs - before;
  } finally {
    [e.blockK, e.blockKPool] = saved;
    releaseAll();
  }
}

/**
 * After a K-blocked pool product of M rows (not a multiple of MR) and K (unpadded) whose operands
 * lie in the engine's memory (so A's packed K blocks start at the scratch floor, the even blocks
 * there and the odd ones one block further): the partial last row panel of the last K block holds
 * zeros in its missing rows. The SIMD kernel packed it whole, reading past A's last row (B's
 * values, in `check`), so only the zeroing puts zeros there; C's bits cannot tell, since
 * `micro_edge` stores only A's rows (the zeros keep garbage, NaNs and subnormals out of its FMAs).
 */
function expectZeroPadding(e: GemmEngine, M: number, K: number): void {
  const mr = e.shape.mr;
  const KC = K_BLOCK_KC;
  const nb = Math.ceil(K / KC);
  const kc = K - (nb - 1) * KC;
  const panels = Math.ceil(M / mr);
  const rows = M % mr;
  const block = e.floor / 4 + ((nb - 1) & 1) * panels * mr * KC;
  const panel = block + Math.floor(M / mr) * mr * kc;
  const u32 = new Uint32Array(e.buffer());
  let bad = -1;
  for (let k = 0; k < kc && bad < 0; k++) for (let r = rows; r < mr; r++) if (u32[panel + k * mr + r] !== 0) bad = k * mr + r;
  expect(bad, `M ${M} K ${K}: the last K block's partial panel, float ${bad} (0x${bad < 0 ? '' : u32[panel + bad].toString(16)}) is not a zero row's`).toBe(-1);
}

/** Whether case `c` must run by K blocks on the pool. */
function qualifies(c: Case): boolean {
  const e = engineWith(1, c.k5x8);
  const mp = Math.ceil(c.M / e.shape.mr) * e.shape.mr;
  // (K blocks of 256; whole column panels; B's block at most 512 columns; big enough for the
  // pool. M need not be a multiple of MR: A's partial last panel is packed whole, reading past
  // A's last row into B, which `check` reserves right after it)
  return c.lhsT && c.rhsT && c.K > 256 && c.N % e.nr === 0 && c.N <= 512 && mp * c.N * c.K >= PARALLEL_MIN_WORK;
}

/**
 * The 5 x 8 kernel's partial last row panel (M = 5q + r) on the pool's K-blocked job: the GPT's
 * weight gradients (M = 128, 512), M = 2048 and 132, and M < MR (a single partial panel).
 */
const PARTIAL_5X8: Case[] = [
  { M: 128, K: 2048, N: 512, lhsT: true, rhsT: true, dtype: 'float32', flush: false, direct: true, threads: 2, k5x8: true, seed: 21 },
  { M: 512, K: 2048, N: 128, lhsT: true, rhsT: true, dtype: 'float32', flush: false, direct: true, threads: 2, k5x8: true, seed: 22 },
  { M: 2048, K: 512, N: 128, lhsT: true, rhsT: true, dtype: 'bfloat16', flush: true, direct: false, threads: 2, k5x8: true, seed: 23 },
  { M: 132, K: 600, N: 136, lhsT: true, rhsT: true, dtype: 'bfloat16', flush: false, direct: true, threads: 3, k5x8: true, seed: 24 },
  { M: 4, K: 2048, N: 512, lhsT: true, rhsT: true, dtype: 'float32', flush: true, direct: true, threads: 2, k5x8: true, seed: 25 },
];


const shared = systolic.backend.engine.shared;

describe('systolic threads: K-blocked weight-gradient products', () => {
  const before = systolic.getNumThreads();
  afterAll(() => systolic.setNumThreads(before));

  it.runIf(shared)("give one thread's bits on 2 and 3 threads, and are taken exactly where their conditions hold", () => {
    let taken = 0;
    fc.assert(
      fc.property(
        fc.record({
          M: fc.constantFrom(4, 64, 128, 130, 132, 256, 260, 390, 512),
          K: fc.constantFrom(256, 300, 512, 600, 1030, 2048),
          N: fc.constantFrom(8, 16, 64, 128, 136, 512, 520),
          lhsT: fc.boolean(),
          rhsT: fc.boolean(),
          dtype: fc.constantFrom('float32' as const, 'bfloat16' as const),
          flush: fc.boolean(),
          direct: fc.boolean(),
          threads: fc.constantFrom(2, 3),
          k5x8: fc.boolean(),
          seed: fc.integer({ min: 0, max: 1000 }),
        }),
        (c) => {
          const n = check(c);
          expect(n).toBe(qualifies(c) ? 1 : 0);
          taken += n;
        },
      ),
      {
        numRuns: 30,
        endOnFailure: true, // (shrinking would rerun products of up to 270 MFLOP many times)
        // The GPT's weight gradients, and edges of the conditions.
        examples: [
          [{ M: 128, K: 2048, N: 512, lhsT: true, rhsT: true, dtype: 'float32', flush: false, direct: true, threads: 2, seed: 1 }],
          [{ M: 512, K: 2048, N: 128, lhsT: true, rhsT: true, dtype: 'float32', flush: false, direct: false, threads: 2, seed: 2 }],
          [{ M: 128, K: 2048, N: 128, lhsT: true, rhsT: true, dtype: 'bfloat16', flush: true, direct: true, threads: 3, seed: 3 }],
          [{ M: 260, K: 1030, N: 136, lhsT: true, rhsT: true, dtype: 'float32', flush: true, direct: false, threads: 3, seed: 4 }],
          [{ M: 132, K: 300, N: 520, lhsT: true, rhsT: true, dtype: 'float32', flush: false, direct: true, threads: 2, seed: 5 }],
          [{ M: 260, K: 1030, N: 136, lhsT: true, rhsT: true, dtype: 'bfloat16', flush: false, direct: true, threads: 2, k5x8: true, seed: 9 }],
          [{ M: 512, K: 512, N: 512, lhsT: true, rhsT: false, dtype: 'float32', flush: false, direct: true, threads: 2, seed: 6 }],
        ],
      },
    );
    expect(taken).toBeGreaterThan(0);
  });

  it.runIf(shared)("take A's partial last row panel (the 5 x 8 kernel, M = 2048, 512, 128, 132, 4) with one thread's bits, on the calling thread and on workers", () => {
    for (const c of PARTIAL_5X8) expect(check(c), `M = ${c.M}`).toBe(1);
    // (the workers compute every unit: their copy of the partial panel's packing and micro_edge)
    poolTestHooks.callerComputes = false;
    try {
      for (const c of PARTIAL_5X8) expect(check({ ...c, seed: c.seed + 10 }), `M = ${c.M}, workers`).toBe(1);
    } finally {
      poolTestHooks.callerComputes = true;
    }
  });

  it.runIf(shared)('the calling thread finishes alone when the worker has not joined, and a worker joining mid-product changes no bit', () => {
    const c: Case = { M: 512, K: 2048, N: 512, lhsT: true, rhsT: true, dtype: 'float32', flush: false, direct: true, threads: 2, seed: 7 };
    check(c); // (the worker is started and has run a job)
    const held = holdAll();
    try {
      expect(check(c)).toBe(1);
      expect(Atomics.load(held.hold, 0), 'the calling thread waited for the held worker').toBe(1);
    } finally {
      held.release();
    }
    // Held again, and let go from another thread (started and waiting beforehand) ~2 ms into
    // the product: the worker joins while K blocks are left. Tried a few times, since a loaded
    // machine may deschedule either thread (a runnable thread gets a core within the scheduler's latency, a few ms, against a ~20-40 ms product): some attempt must have the worker compute tiles.
    const joined = lateJoins((start) => expect(check(c, start)).toBe(1));
    expect(joined, 'the released worker computed some K-block tiles in one of 20 attempts').toBeGreaterThan(0);
  });

  it.runIf(shared)("the workers' own path: every K block packed and multiplied by workers (the calling thread computes none)", () => {
    poolTestHooks.callerComputes = false;
    try {
      for (const threads of [2, 3]) expect(check({ M: 260, K: 1030, N: 136, lhsT: true, rhsT: true, dtype: 'bfloat16', flush: true, direct: threads === 2, threads, seed: 8 })).toBe(1);
      expect(check({ M: 390, K: 600, N: 64, lhsT: true, rhsT: true, dtype: 'float32', flush: false, direct: true, threads: 2, k5x8: true, seed: 10 })).toBe(1);
    } finally {
      poolTestHooks.callerComputes = true;
    }
  });

  it.runIf(shared)('a worker that fails makes the product throw, naming the operation; the next product runs as before', () => {
    const c: Case = { M: 128, K: 600, N: 64, lhsT: true, rhsT: true, dtype: 'float32', flush: false, direct: true, threads: 2, seed: 11 };
    poolTestHooks.callerComputes = false;
    poolTestHooks.breakWorkers = true;
    try {
      expect(() => check(c)).toThrow(/dot_general: a systolic worker thread failed/);
    } finally {
      poolTestHooks.callerComputes = true;
      poolTestHooks.breakWorkers = false;
    }
    expect(check(c)).toBe(1);
  });
});
