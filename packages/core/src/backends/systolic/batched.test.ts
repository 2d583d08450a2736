/**
 * Batched products run item by item (batched.ts): equal, bit for bit, to the same products run
 * one at a time through the product-by-product path, on one thread and on the pool.
 */
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

  it('splits a batch whose accumulators exceed the budget into several jobs', () => {
    // 9 products of 1024 x 1024 (4 MiB of accumulator each): more than one 32 MiB job.
    const a = np.array(data(9 * 1024 * 8, 4)).reshape([9, 1024, 8]);
    const b = np.array(data(9 * 8 * 1024, 5)).reshape([9, 8, 1024]);
    const dims: Dims = [[[2], [1]], [[0], [0]]];
    systolic.setNumThreads(1);
    const jobs = batchedStats.jobs;
    const one = withBackend('systolic', () => bits(lax.dotGeneral(a, b, dims)));
    expect(batchedStats.jobs - jobs).toBe(2);
    systolic.setNumThreads(2);
    const two = withBackend('systolic', () => bits(lax.dotGeneral(a, b, dims)));
    expect(firstDifference(two, one)).toBe(-1);
    const [x, y] = both(a.reshape([9, 1, 1024, 8]), b.reshape([9, 1, 8, 1024]), [[[3], [2]], [[0, 1], [0, 1]]]);
    expect(firstDifference(x, y)).toBe(-1);
  });

  it('leaves products with packing edges to the product-by-product path', () => {
    // 30 rows: not a whole number of 4-row panels.
    const a = np.array(data(4 * 30 * 16, 6)).reshape([4, 30, 16]);
    const b = np.array(data(4 * 16 * 24, 7)).reshape([4, 16, 24]);
    const jobs = batchedStats.jobs;
    systolic.setNumThreads(1);
    withBackend('systolic', () => lax.dotGeneral(a, b, [[[2], [1]], [[0], [0]]]).dataSync());
    expect(batchedStats.jobs).toBe(jobs);
  });
});
