/** The worker pool: products split over threads equal the single-thread products bit for bit. */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { type Array as TArray, lax, np, systolic, withBackend } from '../../index';
import { evalPrimitiveInto } from '../../internal';
import { dotGeneralP } from '../../lax/dot';
import { WorkerPool } from '../../wasm/workerPool';
import { holdAll } from '../../../test/systolicEngines';
import { batchedStats } from './batched';
import { planTiles, TILE_SPLIT } from './threads';

function data(n: number, seed: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + seed) * 3);
}

/** Index of the first element whose bits differ (-1 if none): bit-exact and cheap to report. */
function firstDifference(x: Float32Array, y: Float32Array): number {
  if (x.length !== y.length) return Math.min(x.length, y.length);
  const a = new Uint32Array(x.buffer, x.byteOffset, x.length);
  const b = new Uint32Array(y.buffer, y.byteOffset, y.length);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

describe('systolic threads', () => {
  const before = systolic.getNumThreads();
  afterAll(() => systolic.setNumThreads(before));

  it('threads on and off give identical results (row split, column split, transposed, bf16)', () => {
    const cases: Array<[number, number, number, boolean, 'float32' | 'bfloat16']> = [
      [300, 200, 40, false, 'float32'], // more row panels: split by rows
      [40, 200, 300, true, 'float32'], // more column panels: split by columns
      [257, 129, 263, true, 'bfloat16'],
    ];
    for (const [m, k, n, transposed, dtype] of cases) {
      const a = np.array(data(m * k, m), dtype).reshape(transposed ? [k, m] : [m, k]);
      const b = np.array(data(k * n, n), dtype).reshape([k, n]);
      const run = (): Float32Array => {
        systolic.backend.engine.f32.fill(NaN); // poison scratch memory: nothing may be inherited from an earlier run
        return withBackend('systolic', () => lax.dotGeneral(a, b, [[[transposed ? 0 : 1], [0]], [[], []]]).dataSync() as Float32Array);
      };
      systolic.setNumThreads(1);
      const one = run();
      expect(systolic.backend.engine.parallel).toBeNull();
      systolic.setNumThreads(3);
      const three = run();
      expect(systolic.backend.engine.parallel).not.toBeNull();
      expect(firstDifference(three, one), `${m}x${k}x${n} ${dtype}`).toBe(-1);
    }
  });

  it('packs in parallel chunks for every kernel layout and pass count, and batches', () => {
    // [m, k, n, lhs k-contiguous?, rhs k-contiguous?, precision, batch]: 'rc' and 'kc' packing of
    // both operands, ragged panels and k tails (TypeScript edges after the parallel kernels),
    // multi-pass products packed in TypeScript, and a batch of products through one pool.
    const cases: Array<[number, number, number, boolean, boolean, 'default' | 'highest', number, 'float32' | 'bfloat16']> = [
      [261, 131, 203, true, true, 'default', 1, 'float32'],
      [203, 130, 261, false, false, 'default', 1, 'float32'],
      [130, 96, 140, true, false, 'highest', 1, 'float32'],
      [128, 128, 136, false, true, 'default', 3, 'float32'],
      [517, 131, 389, true, true, 'default', 1, 'bfloat16'],
      [389, 130, 517, false, false, 'default', 1, 'bfloat16'],
    ];
    for (const [m, k, n, lhsKc, rhsKc, precision, batch, dtype] of cases) {
      const a = np.array(data(batch * m * k, m + k), dtype).reshape(lhsKc ? [batch, m, k] : [batch, k, m]);
      const b = np.array(data(batch * k * n, n - k), dtype).reshape(rhsKc ? [batch, n, k] : [batch, k, n]);
      const dims: [[number[], number[]], [number[], number[]]] = [[[lhsKc ? 2 : 1], [rhsKc ? 2 : 1]], [[0], [0]]];
      const run = (): Float32Array => {
        systolic.backend.engine.f32.fill(NaN);
        return withBackend('systolic', () => lax.dotGeneral(a, b, dims, { precision }).dataSync() as Float32Array);
      };
      systolic.setNumThreads(1);
      const one = run();
      for (const threads of [2, 4, 3, 2]) {
        systolic.setNumThreads(threads);
        expect(firstDifference(run(), one), `${m}x${k}x${n} ${dtype} with ${threads} threads`).toBe(-1);
      }
    }
  });

  it('packs while the calling thread stages operands of many staging chunks (both chunk axes)', () => {
    // 1-2 MiB operands: staged in 128 KiB pieces while the workers pack the chunks already in
    // place ('kc' lhs in runs of panels, 'rc' rhs in runs of k). The scratch memory is poisoned
    // with NaN, so a chunk packed before its source was staged would show up in the result.
    const cases: Array<[number, number, number, boolean, 'float32' | 'bfloat16']> = [
      [520, 600, 515, false, 'float32'],
      [515, 600, 520, true, 'float32'],
      [700, 1030, 690, false, 'bfloat16'],
    ];
    for (const [m, k, n, transposed, dtype] of cases) {
      const a = np.array(data(m * k, k), dtype).reshape(transposed ? [k, m] : [m, k]);
      const b = np.array(data(k * n, m), dtype).reshape([k, n]);
      const run = (): Float32Array => {
        systolic.backend.engine.f32.fill(NaN);
        return withBackend('systolic', () => lax.dotGeneral(a, b, [[[transposed ? 0 : 1], [0]], [[], []]]).dataSync() as Float32Array);
      };
      systolic.setNumThreads(1);
      const one = run();
      expect(one.some(Number.isNaN)).toBe(false);
      for (const threads of [2, 3, 2]) {
        systolic.setNumThreads(threads);
        expect(firstDifference(run(), one), `${m}x${k}x${n} ${dtype} with ${threads} threads`).toBe(-1);
      }
    }
  });

  it("the reference GPT's products (weight gradients with K = 2048 over two contracting dims, one row block) equal on 1, 2 and 3 threads, into a destination too", () => {
    // [lhs shape, rhs shape, dimension numbers]: the weight gradients of bench:gpt's MLP (output
    // [128,512] and [512,128]: several K blocks, a single MC row block so the pool splits by
    // columns), a forward MLP product, and odd edges (ragged panels, K tail past a K block).
    const cases: Array<[number[], number[], [[number[], number[]], [number[], number[]]]]> = [
      [[16, 128, 128], [16, 128, 512], [[[0, 1], [0, 1]], [[], []]]],
      [[16, 128, 512], [16, 128, 128], [[[0, 1], [0, 1]], [[], []]]],
      [[16, 128, 128], [128, 512], [[[2], [0]], [[], []]]],
      [[3, 347, 131], [3, 347, 77], [[[0, 1], [0, 1]], [[], []]]],
    ];
    const params = (dn: (typeof cases)[number][2]) => ({ dimensionNumbers: dn, precision: null, preferredElementType: null });
    for (const [ls, rs, dn] of cases) {
      const size = (s: number[]): number => s.reduce((x, y) => x * y, 1);
      const a = np.array(data(size(ls), ls[1])).reshape(ls);
      const b = np.array(data(size(rs), rs[1] + 1)).reshape(rs);
      const run = (): Float32Array => {
        systolic.backend.engine.f32.fill(NaN);
        return withBackend('systolic', () => lax.dotGeneral(a, b, dn).dataSync() as Float32Array);
      };
      const runInto = (n: number): Float32Array => {
        systolic.backend.engine.f32.fill(NaN);
        const dest = new Float32Array(n).fill(NaN);
        withBackend('systolic', () => evalPrimitiveInto(dotGeneralP, [a, b], params(dn), dest));
        return dest;
      };
      systolic.setNumThreads(1);
      const one = run();
      expect(one.findIndex(Number.isNaN), `${ls} x ${rs}: NaN on one thread`).toBe(-1);
      for (const threads of [2, 3, 2]) {
        systolic.setNumThreads(threads);
        expect(firstDifference(run(), one), `${ls} x ${rs} with ${threads} threads`).toBe(-1);
        expect(firstDifference(runInto(one.length), one), `${ls} x ${rs} into a destination with ${threads} threads`).toBe(-1);
      }
    }
  });

  it('plans tiles of whole panels that cover the product, several per thread, none too long', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 700 }), fc.integer({ min: 1, max: 90 }), fc.integer({ min: 1, max: 5000 }), fc.integer({ min: 2, max: 8 }), (rowPanels, colPanels, kp, threads) => {
        const [mr, nr, mc] = [4, 8, 128];
        const mp = rowPanels * mr;
        const np = colPanels * nr;
        const t = planTiles(mp, np, kp, mr, nr, mc, threads);
        expect(t.tileRows % mr).toBe(0);
        expect(t.tileCols % nr).toBe(0);
        expect(t.tileRows).toBeLessThanOrEqual(Math.min(mp, mc));
        expect(t.tileCols).toBeLessThanOrEqual(Math.min(np, 128));
        // The tiles cover every row and column once, and the last tile of each is not empty.
        for (const [n, side, count] of [[mp, t.tileRows, t.rowTiles], [np, t.tileCols, t.colTiles]]) {
          expect(count * side).toBeGreaterThanOrEqual(n);
          expect((count - 1) * side).toBeLessThan(n);
        }
        const tiles = t.rowTiles * t.colTiles;
        // Narrowed no further than 16 rows and 16 columns (or one panel where a side is smaller).
        const atMinimum = t.tileRows <= Math.max(16, mr) && t.tileCols <= Math.max(16, nr);
        const rowsAtMin = t.tileRows <= 16 || t.tileRows === mp;
        const colsAtMin = t.tileCols <= 16 || t.tileCols === np;
        if (!(rowsAtMin && colsAtMin) && !atMinimum) {
          expect(tiles).toBeGreaterThanOrEqual(4 * threads);
          if (tiles < TILE_SPLIT.manyTilesPerThread * threads) expect(t.tileRows * t.tileCols * kp).toBeLessThanOrEqual(TILE_SPLIT.maxTileWork);
        }
      }),
    );
    // The reference GPT's weight gradient ([128,512], K = 2048) on 2 threads: 32 tiles of 2^22
    // multiply-adds (16 of 2^23 with TPUKIT_GEMM_FINE_TILES=0), not 8 long ones; its [2048,512] x
    // [512,128] products 32 tiles (16 of 128 x 128 at 2^23).
    const fine = TILE_SPLIT.maxTileWork === 1 << 21;
    expect(planTiles(128, 512, 2048, 4, 8, 128, 2)).toEqual(fine ? { tileRows: 64, tileCols: 32, rowTiles: 2, colTiles: 16 } : { tileRows: 64, tileCols: 64, rowTiles: 2, colTiles: 8 });
    expect(planTiles(2048, 128, 512, 4, 8, 128, 2)).toEqual(fine ? { tileRows: 128, tileCols: 64, rowTiles: 16, colTiles: 2 } : { tileRows: 128, tileCols: 128, rowTiles: 16, colTiles: 1 });
    // A large square product keeps MC x 128 tiles.
    expect(planTiles(1024, 1024, 1024, 4, 8, 128, 2)).toEqual({ tileRows: 128, tileCols: 128, rowTiles: 8, colTiles: 8 });
  });

  it.runIf(WorkerPool.available())('returns without waiting for a worker that has not joined the job (one held before it looks at it), bit-identical', () => {
    // A worker woken while its core is taken (V8's garbage collection threads, other processes)
    // joins late; the calling thread computes every tile or item no worker took and must not
    // wait for it. Held workers stand in for that here: a product split by tiles, the same into
    // a host destination handed over by row bands, and a batch of per-head products.
    type Dims = [[number[], number[]], [number[], number[]]];
    const params = (dn: Dims) => ({ dimensionNumbers: dn, precision: null, preferredElementType: null });
    const x = np.array(data(16 * 128 * 128, 1)).reshape([16, 128, 128]);
    const w = np.array(data(128 * 512, 2)).reshape([128, 512]);
    const [Bn, T, H, Dh] = [3, 128, 4, 32];
    const q = np.array(data(Bn * T * H * Dh, 3)).reshape([Bn, T, H, Dh]);
    const k = np.array(data(Bn * T * H * Dh, 4)).reshape([Bn, T, H, Dh]);
    const cases: [string, TArray, TArray, Dims, boolean][] = [
      ['tiles', x, w, [[[2], [0]], [[], []]], false],
      ['tiles into a host destination by row bands', x, w, [[[2], [0]], [[], []]], true],
      ['batch of products', q, k, [[[3], [3]], [[0, 2], [0, 2]]], false],
    ];
    const run = ([, a, b, dn, into]: (typeof cases)[number]): Float32Array =>
      withBackend('systolic', () => {
        systolic.backend.engine.f32.fill(NaN);
        if (!into) return lax.dotGeneral(a, b, dn).dataSync() as Float32Array;
        const dest = new Float32Array(16 * 128 * 512).fill(NaN);
        evalPrimitiveInto(dotGeneralP, [a, b], params(dn), dest);
        return dest;
      });
    systolic.setNumThreads(1);
    const one = cases.map(run);
    systolic.setNumThreads(2);
    cases.forEach(run); // the workers are started and have run a job
    const { hold, release } = holdAll();
    try {
      const pooled = batchedStats.pooled;
      cases.forEach((c, i) => {
        const two = run(c);
        expect(Atomics.load(hold, 0), `${c[0]}: the calling thread waited for the held worker`).toBe(1);
        expect(firstDifference(two, one[i]), c[0]).toBe(-1);
      });
      expect(batchedStats.pooled, 'the batch ran as a pool job').toBe(pooled + 1);
    } finally {
      release();
    }
    // Released, the held workers find the jobs closed and leave them; the next jobs run as before.
    cases.forEach((c, i) => expect(firstDifference(run(c), one[i]), `${c[0]} after the release`).toBe(-1));
  });

  it('rejects a bad thread count, naming the argument', () => {
    expect(() => systolic.setNumThreads(0)).toThrow(/setNumThreads: n must be an integer in 1..256; got 0/);
  });
});
