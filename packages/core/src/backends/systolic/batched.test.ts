/**
 * Batched products run item by item (batched.ts): equal, bit for bit, to the same products run
 * one at a time through the product-by-product path, on one thread and on the pool.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { type Array, lax, np, systolic, withBackend } from '../../index';
import { batchedStats } from './batched';

function data(n: number, seed: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.61 + seed) * 2.5 + (i % 7 === 0 ? 1e-39 : 0));
}

function bits(x: Array): Uint32Array | Uint16Array {
  const d = x.dataSync() as Float32Array | Uint16Array;
  return d instanceof Uint16Array ? d : new Uint32Array(d.buffer, d.byteOffset, d.length);
}

/** Index of the first element whose bits differ (-1 if none). */
function firstDifference(x: Uint32Array | Uint16Array, y: Uint32Array | Uint16Array): number {
  if (x.length !== y.length) return Math.min(x.length, y.length);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return i;
  return -1;
}

type Dims = [[number[], number[]], [number[], number[]]];

describe('systolic batched products, item by item', () => {
  const before = systolic.getNumThreads();
  afterAll(() => systolic.setNumThreads(before));

  // Attention's shapes: q, k, v as [B, T, H, Dh] (strided heads), scores [B, H, T, T].
  const [Bn, T, H, Dh] = [3, 128, 4, 32]; // 12 products, 2^22.6 multiply-adds: worth the pool
  const q = np.array(data(Bn * T * H * Dh, 1)).reshape([Bn, T, H, Dh]);
  const k = np.array(data(Bn * T * H * Dh, 2)).reshape([Bn, T, H, Dh]);
  const s = np.array(data(Bn * H * T * T, 3)).reshape([Bn, H, T, T]);
  const cases: [string, Array, Array, Dims][] = [
    ['scores q.k^T', q, k, [[[3], [3]], [[0, 2], [0, 2]]]],
    ['weighted sum s.v', s, k, [[[3], [1]], [[0, 1], [0, 2]]]],
    ['gradient s^T.q', s, q, [[[2], [1]], [[0, 1], [0, 2]]]],
    ['bf16 operands', q.astype('bfloat16'), k.astype('bfloat16'), [[[3], [3]], [[0, 2], [0, 2]]]],
  ];

  /** The batched dot, and the same products one by one (batch dims sliced off: the product-by-product path). */
  function both(a: Array, b: Array, dims: Dims): [Uint32Array | Uint16Array, Uint32Array | Uint16Array] {
    return withBackend('systolic', () => {
      systolic.backend.engine.f32.fill(NaN); // poisoned scratch: nothing may be inherited
      const batched = lax.dotGeneral(a, b, dims);
      const [[lc, rc], [lb, rb]] = dims;
      const parts: Array[] = [];
      for (let i = 0; i < a.shape[lb[0]]; i++)
        for (let j = 0; j < a.shape[lb[1]]; j++) {
          const pick = (x: Array, bd: number[]): Array => lax.indexInDim(lax.indexInDim(x, j, bd[1], false), i, bd[0], false);
          const drop = (c: number, bd: number[]): number => c - bd.filter((d) => d < c).length;
          parts.push(lax.dotGeneral(pick(a, lb), pick(b, rb), [[[drop(lc[0], lb)], [drop(rc[0], rb)]], [[], []]]));
        }
      return [bits(batched), bits(np.stack(parts).reshape(batched.shape))];
    });
  }

  it('equals the products one by one, on one thread and on the pool', () => {
    for (const threads of [1, 2, 3]) {
      systolic.setNumThreads(threads);
      for (const [name, a, b, dims] of cases) {
        const jobs = batchedStats.jobs;
        const pooled = batchedStats.pooled;
        const [batched, one] = both(a, b, dims);
        expect(batchedStats.jobs, `${name}: took the item-by-item path`).toBe(jobs + 1);
        if (threads > 1 && systolic.backend.engine.parallelBatch) expect(batchedStats.pooled, `${name}: ran on the pool`).toBe(pooled + 1);
        expect(firstDifference(batched, one), `${name} with ${threads} threads`).toBe(-1);
      }
    }
  });

  it('batched equals one by one (a vmap-vs-loop law) over shapes, layouts, dtypes and thread counts', () => {
    fc.assert(
      fc.property(
        fc.record({
          batch: fc.integer({ min: 2, max: 8 }),
          m: fc.integer({ min: 1, max: 128 }), // any rows: A's last panel may be partial
          n: fc.integer({ min: 1, max: 16 }).map((x) => 8 * x),
          k: fc.integer({ min: 1, max: 24 }).map((x) => 4 * x),
          lhsKc: fc.boolean(),
          rhsKc: fc.boolean(),
          bf16: fc.boolean(),
          threads: fc.constantFrom(1, 2, 3),
          seed: fc.integer({ min: 0, max: 1000 }),
        }),
        ({ batch, m, n, k, lhsKc, rhsKc, bf16, threads, seed }) => {
          const dtype = bf16 ? 'bfloat16' : 'float32';
          // [batch, m, k] (k-contiguous) or [batch, k, m]; [batch, n, k] or [batch, k, n].
          const a = np.array(data(batch * m * k, seed), dtype).reshape(lhsKc ? [batch, m, k] : [batch, k, m]);
          const b = np.array(data(batch * k * n, seed + 1), dtype).reshape(rhsKc ? [batch, n, k] : [batch, k, n]);
          const dims: Dims = [[[lhsKc ? 2 : 1], [rhsKc ? 2 : 1]], [[0], [0]]];
          systolic.setNumThreads(threads);
          const jobs = batchedStats.jobs;
          const [x, y] = both(a.reshape([batch, 1, ...a.shape.slice(1)]), b.reshape([batch, 1, ...b.shape.slice(1)]), [[[dims[0][0][0] + 1], [dims[0][1][0] + 1]], [[0, 1], [0, 1]]]);
          expect(batchedStats.jobs).toBeGreaterThan(jobs);
          expect(firstDifference(x, y), `${batch}x${m}x${k}x${n} ${dtype} ${threads} threads`).toBe(-1);
        },
      ),
      { numRuns: 25 },
    );
  });

  it('splits a batch whose accumulators exceed the budget into several jobs', () => {
    // 20 products of 512 x 512 x 4 (1 MiB of accumulator each): more than one 16 MiB job.
    const a = np.array(data(20 * 512 * 4, 4)).reshape([20, 512, 4]);
    const b = np.array(data(20 * 4 * 512, 5)).reshape([20, 4, 512]);
    const dims: Dims = [[[2], [1]], [[0], [0]]];
    systolic.setNumThreads(1);
    const jobs = batchedStats.jobs;
    const one = withBackend('systolic', () => bits(lax.dotGeneral(a, b, dims)));
    expect(batchedStats.jobs - jobs).toBe(2);
    systolic.setNumThreads(2);
    const two = withBackend('systolic', () => bits(lax.dotGeneral(a, b, dims)));
    expect(firstDifference(two, one)).toBe(-1);
    const [x, y] = both(a.reshape([20, 1, 512, 4]), b.reshape([20, 1, 4, 512]), [[[3], [2]], [[0, 1], [0, 1]]]);
    expect(firstDifference(x, y)).toBe(-1);
  });

  it('leaves large products to the tile split, and products with packing edges to the product-by-product path', () => {
    // 3 products of 256 x 256 x 64 (2^22 multiply-adds each): each one split over the pool by tiles.
    const big = np.array(data(3 * 256 * 64, 8)).reshape([3, 256, 64]);
    const before = batchedStats.jobs;
    systolic.setNumThreads(2);
    const two = withBackend('systolic', () => bits(lax.dotGeneral(big, big, [[[2], [2]], [[0], [0]]])));
    expect(batchedStats.jobs).toBe(before);
    systolic.setNumThreads(1);
    expect(firstDifference(two, withBackend('systolic', () => bits(lax.dotGeneral(big, big, [[[2], [2]], [[0], [0]]]))))).toBe(-1);
    // 20 columns: not a whole number of 8-column panels (C is written in whole column panels).
    const a = np.array(data(4 * 30 * 16, 6)).reshape([4, 30, 16]);
    const b = np.array(data(4 * 16 * 20, 7)).reshape([4, 16, 20]);
    const jobs = batchedStats.jobs;
    systolic.setNumThreads(1);
    withBackend('systolic', () => lax.dotGeneral(a, b, [[[2], [1]], [[0], [0]]]).dataSync());
    expect(batchedStats.jobs).toBe(jobs);
  });
});
