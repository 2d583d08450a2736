/**
 * K-blocked packing (`GemmEngine.blockK`): a one-thread product of two 'rc' operands read in
 * place, with several K blocks, packs each K block of B, then of each MC row block of A, right
 * before the micro-kernel multiplies it, instead of packing both operands whole first. It changes
 * speed only: the law below compares it, bit for bit, with the whole-operand path over shapes at
 * and around the blocks' edges (K blocks of 256, row blocks of MC, B blocks of at most 512
 * columns), both storage dtypes, subnormal flushing, a destination in the GEMM memory or a fresh
 * output, both micro-kernels (5 x 8 also with M not a multiple of its 5 rows: a zero-padded
 * last panel per K block), and checks by the engine's counter (`traffic.kBlockedProducts`)
 * that exactly the products the conditions name took it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { aval } from '../../aval';
import { bf16 } from '../../index';
import { wasmFeatures } from '../../wasm/features';
import { GemmEngine } from './gemmEngine';
import { GEMM_SHAPE_4X8, GEMM_SHAPE_5X8 } from './gemmModule';
import { mxuDotGeneral } from './mxuDot';
import { data, engineMemory } from '../../../test/systolicEngines';


type Dtype = 'float32' | 'bfloat16';

interface Case {
  batch: number;
  M: number;
  K: number;
  N: number;
  /** lhs stored [K, M] ('rc': rows contiguous) rather than [M, K]. */
  lhsT: boolean;
  /** rhs stored [K, N] ('rc') rather than [N, K]. */
  rhsT: boolean;
  dtype: Dtype;
  flush: boolean;
  direct: boolean;
  seed: number;
}

const relaxed = wasmFeatures().relaxedSimd;
const engines = [new GemmEngine({ relaxed, shape: GEMM_SHAPE_4X8 }), new GemmEngine({ relaxed, shape: GEMM_SHAPE_5X8 })];

/**
 * Runs case `c` on engine `e` with K blocks off, then on, both operands in `e`'s memory; expects
 * the same bits and returns how many products took the K-blocked path.
 */
function check(e: GemmEngine, c: Case): number {
  const { batch: B, M, K, N, lhsT, rhsT, dtype, flush, direct, seed } = c;
  const store = (x: Float32Array): Float32Array | Uint16Array => (dtype === 'bfloat16' ? bf16.encode(x) : x);
  const { inMemory, releaseAll } = engineMemory(e);
  const saved = e.blockK;
  try {
    const lhs = { data: inMemory(store(data(B * M * K, seed))), shape: lhsT ? [B, K, M] : [B, M, K], dtype };
    const rhs = { data: inMemory(store(data(B * K * N, seed + 1))), shape: rhsT ? [B, K, N] : [B, N, K], dtype };
    const params = { dimensionNumbers: [[[lhsT ? 1 : 2], [rhsT ? 1 : 2]], [[0], [0]]] as [[number[], number[]], [number[], number[]]], precision: null, preferredElementType: null };
    const out = aval([B, M, N], 'float32');
    const run = (on: boolean): Uint32Array => {
      e.blockK = on;
      e.f32.fill(Number.NaN, e.floor / 4); // poisoned scratch: nothing packed before may reach a result
      if (!direct) {
        const r = mxuDotGeneral(e, lhs, rhs, params, out, { flushSubnormals: flush }) as Float32Array;
        return new Uint32Array(r.slice().buffer);
      }
      const into = inMemory(new Float32Array(B * M * N).fill(Number.NaN)) as Float32Array;
      mxuDotGeneral(e, lhs, rhs, params, out, { flushSubnormals: flush }, into);
      return new Uint32Array(into.slice().buffer);
    };
    const want = run(false);
    const before = e.traffic.kBlockedProducts;
    const swept = e.traffic.sweptChunks;
    const got = run(true);
    const n = e.traffic.kBlockedProducts - before;
    // Each K block's source rows are swept before they are packed: at least B's block (one chunk
    // or more) and each MC row block of A, per K block of each product that took the path.
    if (n > 0 && e.touchInPlace) expect(e.traffic.sweptChunks - swept).toBeGreaterThanOrEqual(n * Math.ceil(K / 256) * (1 + Math.ceil(M / e.shape.mc)));
    // (the first differing element, not a diff of up to 200k numbers)
    expect(got.findIndex((x, i) => x !== want[i])).toBe(-1);
    expect(got.length).toBe(want.length);
    return n;
  } finally {
    e.blockK = saved;
    releaseAll();
  }
}

/** Whether case `c` must take the K-blocked path on engine `e` (one product per batch element). */
function qualifies(e: GemmEngine, c: Case): boolean {
  // (K blocks of 256; B's packed block of N x 256 f32 at most 512 KiB)
  // (on one thread M need not be a multiple of MR: the partial panel goes through micro_edge)
  return c.lhsT && c.rhsT && c.K > 256 && c.N % e.nr === 0 && c.N <= 512;
}

describe('systolic GEMM: K-blocked packing of in-place weight-gradient operands', () => {
  it.runIf(engines[0].shared)('gives the whole-operand path\'s bits, and is taken exactly where its conditions hold (4 x 8 and 5 x 8 kernels)', () => {
    let taken = 0;
    fc.assert(
      fc.property(
        fc.record({
          batch: fc.constant(1),
          M: fc.constantFrom(4, 5, 64, 128, 130, 132, 135, 256, 260, 390),
          K: fc.constantFrom(8, 256, 257, 512, 600, 1030),
          N: fc.constantFrom(5, 8, 16, 24, 40, 64, 512, 520),
          lhsT: fc.boolean(),
          rhsT: fc.boolean(),
          dtype: fc.constantFrom('float32' as const, 'bfloat16' as const),
          flush: fc.boolean(),
          direct: fc.boolean(),
          seed: fc.integer({ min: 0, max: 1000 }),
        }),
        fc.integer({ min: 0, max: 1 }),
        (c, which) => {
          const e = engines[which];
          const n = check(e, c);
          expect(n).toBe(qualifies(e, c) ? 1 : 0);
          taken += n;
        },
      ),
      {
        numRuns: 40,
        endOnFailure: true, // (shrinking would rerun products of up to 100 MFLOP many times)
        // The GPT's weight gradients, and edges of the conditions.
        examples: [
          [{ batch: 1, M: 512, K: 2048, N: 128, lhsT: true, rhsT: true, dtype: 'float32', flush: false, direct: true, seed: 1 }, 0],
          [{ batch: 1, M: 256, K: 1030, N: 512, lhsT: true, rhsT: true, dtype: 'bfloat16', flush: true, direct: false, seed: 2 }, 0],
          [{ batch: 1, M: 260, K: 600, N: 24, lhsT: true, rhsT: true, dtype: 'float32', flush: true, direct: true, seed: 3 }, 1],
          [{ batch: 1, M: 132, K: 513, N: 520, lhsT: true, rhsT: true, dtype: 'float32', flush: false, direct: false, seed: 4 }, 0],
          [{ batch: 1, M: 128, K: 2048, N: 512, lhsT: true, rhsT: true, dtype: 'float32', flush: false, direct: true, seed: 6 }, 0],
          [{ batch: 1, M: 130, K: 257, N: 64, lhsT: true, rhsT: true, dtype: 'bfloat16', flush: false, direct: true, seed: 7 }, 1],
          [{ batch: 1, M: 64, K: 256, N: 64, lhsT: true, rhsT: true, dtype: 'float32', flush: false, direct: true, seed: 8 }, 0],
          // 5 x 8 with a partial last row panel (M % 5 = 3, 2, 4), in one row block and in a later one, and M < MR
          [{ batch: 1, M: 128, K: 2048, N: 512, lhsT: true, rhsT: true, dtype: 'float32', flush: false, direct: true, seed: 9 }, 1],
          [{ batch: 1, M: 512, K: 600, N: 128, lhsT: true, rhsT: true, dtype: 'bfloat16', flush: true, direct: false, seed: 10 }, 1],
          [{ batch: 1, M: 132, K: 1030, N: 40, lhsT: true, rhsT: true, dtype: 'float32', flush: true, direct: true, seed: 11 }, 1],
          [{ batch: 1, M: 4, K: 257, N: 16, lhsT: true, rhsT: true, dtype: 'bfloat16', flush: false, direct: false, seed: 12 }, 1],
        ],
      },
    );
    expect(taken).toBeGreaterThan(0);
  });

  it.runIf(engines[0].shared)('a batch of large products takes it product by product', () => {
    const c: Case = { batch: 2, M: 260, K: 600, N: 512, lhsT: true, rhsT: true, dtype: 'float32', flush: false, direct: true, seed: 5 };
    expect(check(engines[0], c)).toBe(2);
  });

  it.runIf(engines[0].shared)('is not taken by a micro-kernel whose K unroll does not divide the K block (the K loop would run past it)', () => {
    const e = new GemmEngine({ relaxed, shape: { ...GEMM_SHAPE_4X8, unroll: 3, kc: 510 } });
    const c: Case = { batch: 1, M: 8, K: 600, N: 8, lhsT: true, rhsT: true, dtype: 'float32', flush: false, direct: false, seed: 9 };
    expect(check(e, c)).toBe(0);
  });

  it('is on by default, and TPUKIT_GEMM_K_BLOCKS=0 turns it off for engines made after (TPUKIT_GEMM_K_BLOCKS_POOL=0 the thread pool\'s K blocks alike)', () => {
    for (const [name, flag] of [['TPUKIT_GEMM_K_BLOCKS', 'blockK'], ['TPUKIT_GEMM_K_BLOCKS_POOL', 'blockKPool']] as const) {
      const before = process.env[name];
      try {
        delete process.env[name];
        expect(new GemmEngine({ relaxed: false })[flag]).toBe(true);
        process.env[name] = '0';
        expect(new GemmEngine({ relaxed: false })[flag]).toBe(false);
        process.env[name] = 'off';
        expect(() => new GemmEngine({ relaxed: false })).toThrow(new RegExp(`${name} must be 0 or 1; got "off"`));
      } finally {
        if (before === undefined) delete process.env[name];
        else process.env[name] = before;
      }
    }
  });
});
