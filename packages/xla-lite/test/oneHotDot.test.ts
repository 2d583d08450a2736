// One-hot dots as gathers / segment sums (passes/oneHotDot.ts, js/oneHotKernels.ts): the
// rewritten program equals the unrewritten one (the dot on the same backend), FLOPs stay the
// dot's, and the differences the README lists (inf/NaN in unselected rows) hold as documented.
import { type Array, bf16, grad, lax, nn, np, systolic, valueAndGrad, withBackend } from '@tpukit/core';
import { evalPrimitive, wasm } from '@tpukit/core/internal';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SEGMENT_SUM_MAX_BYTES, segmentSumBf16, segmentSumKernelAvailable } from '../src/wasm/oneHotKernel';
import { computationCost, type HloComputation, jit, nominalFlopsOf, oneHotGatherP, oneHotSegmentSumP } from '../src/internal';

const dots = (c: HloComputation): number => c.instructions.filter((i) => i.prim?.name === 'dot_general' || (i.opcode === 'fusion' && i.called[0].instructions.some((m) => m.prim?.name === 'dot_general'))).length;
const ofPrim = (c: HloComputation, name: string): number => c.instructions.filter((i) => i.prim?.name === name).length;

/** The embedding as bench:gpt writes it, with a loss that reads every output row. */
const embedLoss = (w: Array, x: Array, g: Array): Array => np.sum(np.multiply(np.matmul(nn.oneHot(x, w.shape[0]), w), g));

function compileBoth<T extends unknown[]>(f: (...a: any[]) => any, args: T) {
  const on = jit(f).lower(...args).compile();
  const off = jit(f).lower(...args).compile({ oneHot: false });
  return { on, off };
}

const bits = (a: Array): Uint32Array => new Uint32Array(Float32Array.from(a.dataSync() as Float32Array).buffer);

describe('one-hot dots (embedding and its weight gradient)', () => {
  it('rewrites the embedding dot and its weight gradient; values equal the dots, FLOPs unchanged', () => {
    const V = 12;
    const w = np.array(Float32Array.from({ length: V * 5 }, (_, i) => Math.sin(i * 1.3) * 2.7 + 0.001 * i)).reshape([V, 5]);
    const x = np.array(Int32Array.from([3, 0, 11, 12, -1, 7, 3, 3, 100, 5, -7, 0]), 'int32').reshape([3, 4]);
    const g = np.array(Float32Array.from({ length: 60 }, (_, i) => Math.cos(i * 0.7) * 1.9)).reshape([3, 4, 5]);
    const f = valueAndGrad(embedLoss);
    const { on, off } = compileBoth(f, [w, x, g]);
    expect(on.passStats.oneHot).toBe(2);
    expect(off.passStats.oneHot).toBe(0);
    expect(ofPrim(on.module.entry, 'onehot_gather')).toBe(1);
    expect(ofPrim(on.module.entry, 'onehot_segment_sum')).toBe(1);
    expect(dots(on.module.entry)).toBe(0);
    expect(dots(off.module.entry)).toBe(2);
    const [lOn, gOn] = on.call([w, x, g]) as Array[];
    const [lOff, gOff] = off.call([w, x, g]) as Array[];
    // The loss reads the gathered rows: equal bit for bit. The weight gradient sums the same
    // terms in token order: equal here too (each row sums at most 3 terms, see below for order).
    expect(bits(lOn)).toEqual(bits(lOff));
    expect(gOn.dataSync()).toEqual(gOff.dataSync());
    // FLOPs: the rewritten program reports the dots' (nominal) FLOPs.
    // (The one-hot's own elementwise kernel is gone, so only the dots' FLOPs are compared.)
    const preset = systolic.presets.v5e;
    const nominal = on.module.entry.instructions.map((i) => nominalFlopsOf(i) ?? 0).reduce((a, b) => a + b, 0);
    expect(nominal).toBe(2 * (2 * 12 * 5 * V));
    const offDots = off.module.entry.instructions.filter((i) => dots({ instructions: [i] } as HloComputation) === 1);
    expect(offDots.map((i) => computationCost({ instructions: i.opcode === 'fusion' ? i.called[0].instructions.filter((m) => m.prim?.name === 'dot_general') : [i] } as HloComputation, preset).flops).reduce((a, b) => a + b, 0)).toBe(nominal);
    const gathers = on.module.entry.instructions.filter((i) => nominalFlopsOf(i) !== null);
    expect(computationCost({ instructions: gathers } as HloComputation, preset).flops).toBe(nominal);
  });

  it('law: gather and segment sum equal the one-hot dots (shapes, indices in and out of range, precisions, backends)', () => {
    const precisions = [null, 'default', 'high', 'highest'] as const;
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 7 }),
        fc.integer({ min: 1, max: 3 }),
        fc.constantFrom(...precisions),
        fc.constantFrom('systolic', 'reference'),
        fc.integer({ min: 0, max: 1 << 30 }),
        (V, N, T, B, precision, backend, seed) => {
          let s = seed;
          const rnd = (): number => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32);
          // Indices: mostly in range, some negative or >= V.
          const idx = Int32Array.from({ length: B * T }, () => Math.floor(rnd() * (V + 4)) - 2);
          const wv = Float32Array.from({ length: V * N }, () => (rnd() - 0.5) * 2 ** Math.floor(rnd() * 20 - 10));
          const gv = Float32Array.from({ length: B * T * N }, () => (rnd() - 0.5) * 3);
          withBackend(backend, () => {
            const w = np.array(wv).reshape([V, N]);
            const x = np.array(idx, 'int32').reshape([B, T]);
            const g = np.array(gv).reshape([B, T, N]);
            const f = (w: Array, x: Array, g: Array) => np.sum(np.multiply(lax.dotGeneral(nn.oneHot(x, V), w, [[[2], [0]], [[], []]], { precision }), g));
            const fwd = (w: Array, x: Array) => lax.dotGeneral(nn.oneHot(x, V), w, [[[2], [0]], [[], []]], { precision });
            const a = compileBoth(fwd, [w, x]);
            // (With one class the iota folds to a constant: no one-hot left to recognise.)
            expect(a.on.passStats.oneHot).toBe(V > 1 ? 1 : 0);
            // Forward: bit for bit (finite tables; -0 and +0 alike as the dot).
            expect(bits(a.on.call([w, x])[0] as Array)).toEqual(bits(a.off.call([w, x])[0] as Array));
            const gr = compileBoth(grad(f), [w, x, g]);
            // (grad alone: the forward gather is dead, only the segment sum is left.)
            expect(ofPrim(gr.on.module.entry, 'onehot_segment_sum')).toBe(V > 1 ? 1 : 0);
            const want = (gr.off.call([w, x, g])[0] as Array).dataSync() as Float32Array;
            const got = (gr.on.call([w, x, g])[0] as Array).dataSync() as Float32Array;
            // Weight gradient: the same rounded terms summed in float32 (reference: float64) in
            // token order; the dot may associate them otherwise: equal to a few float32 ulps.
            for (let k = 0; k < want.length; k++) expect(Math.abs(got[k] - want[k])).toBeLessThanOrEqual(1e-6 * (1 + Math.abs(want[k])) * B * T);
          });
        },
      ),
      { numRuns: 40 },
    );
  });

  it('the one-hot on either side and under a transpose; bfloat16 operands; a bfloat16 result', () => {
    const V = 6;
    const w = np.array(Float32Array.from({ length: V * 3 }, (_, i) => 1 + i * 0.123456)).reshape([3, V]);
    const x = np.array(Int32Array.from([5, 0, 2, 9]), 'int32');
    // rhs one-hot: w [3,V] x one_hot^T -> [3, 4]
    const f1 = (w: Array, x: Array) => lax.dotGeneral(w, nn.oneHot(x, V), [[[1], [1]], [[], []]]);
    const r1 = compileBoth(f1, [w, x]);
    expect(r1.on.passStats.oneHot).toBe(1);
    expect(bits(r1.on.call([w, x])[0] as Array)).toEqual(bits(r1.off.call([w, x])[0] as Array));
    // Transposed one-hot [V, 4] contracted over its class dim 0.
    const f2 = (w: Array, x: Array) => lax.dotGeneral(np.transpose(nn.oneHot(x, V)), np.transpose(w), [[[0], [0]], [[], []]]);
    const r2 = compileBoth(f2, [w, x]);
    expect(r2.on.passStats.oneHot).toBe(1);
    expect(bits(r2.on.call([w, x])[0] as Array)).toEqual(bits(r2.off.call([w, x])[0] as Array));
    // bfloat16 table and one-hot, float32 result.
    const wb = w.astype('bfloat16');
    const f3 = (w: Array, x: Array) => lax.dotGeneral(nn.oneHot(x, V, { dtype: 'bfloat16' }), np.transpose(w), [[[1], [0]], [[], []]], { preferredElementType: 'float32' });
    const r3 = compileBoth(f3, [wb, x]);
    expect(r3.on.passStats.oneHot).toBe(1);
    expect(r3.on.call([wb, x])[0].dtype).toBe('float32');
    expect(r3.on.call([wb, x])[0].dataSync()).toEqual(r3.off.call([wb, x])[0].dataSync());
    // bfloat16 result.
    const f4 = (w: Array, x: Array) => np.matmul(nn.oneHot(x, V, { dtype: 'bfloat16' }), np.transpose(w));
    const r4 = compileBoth(f4, [wb, x]);
    expect(r4.on.passStats.oneHot).toBe(1);
    expect(r4.on.call([wb, x])[0].dtype).toBe('bfloat16');
    expect(r4.on.call([wb, x])[0].dataSync()).toEqual(r4.off.call([wb, x])[0].dataSync());
  });

  it('a one-hot behind reshapes that keep the class axis whole (flattened tokens, added unit dims), forward and weight gradient', () => {
    const V = 7;
    const w = np.array(Float32Array.from({ length: V * 3 }, (_, i) => Math.sin(i) * 1.37)).reshape([V, 3]);
    const x = np.array(Int32Array.from([6, 0, 2, 9, -3, 4]), 'int32').reshape([2, 3]);
    const g = np.array(Float32Array.from({ length: 18 }, (_, i) => Math.cos(i))).reshape([6, 3]);
    const flat = (w: Array, x: Array, g: Array) => np.sum(np.multiply(np.matmul(nn.oneHot(x, V).reshape([6, V]), w), g));
    const r = compileBoth(valueAndGrad(flat), [w, x, g]);
    expect(r.on.passStats.oneHot).toBe(2);
    const [lOn, gOn] = r.on.call([w, x, g]) as Array[];
    const [lOff, gOff] = r.off.call([w, x, g]) as Array[];
    expect(bits(lOn)).toEqual(bits(lOff));
    expect(gOn.dataSync()).toEqual(gOff.dataSync());
    const unit = (w: Array, x: Array) => np.matmul(nn.oneHot(x, V).reshape([2, 1, 3, V]), w);
    const u = compileBoth(unit, [w, x]);
    expect(u.on.passStats.oneHot).toBe(1);
    expect(bits(u.on.call([w, x])[0] as Array)).toEqual(bits(u.off.call([w, x])[0] as Array));
    // A reshape that splits the class axis is not a one-hot along any axis: left alone.
    const w4 = np.array(Float32Array.from({ length: 12 }, (_, i) => i - 5.5)).reshape([4, 3]);
    const split = (w: Array, x: Array) => np.matmul(nn.oneHot(x, 8).reshape([2, 3, 2, 4]), w);
    const sp = compileBoth(split, [w4, x]);
    expect(sp.on.passStats.oneHot).toBe(0);
    expect(sp.on.call([w4, x])[0].dataSync()).toEqual(sp.off.call([w4, x])[0].dataSync());
  });

  it('leaves dots alone that are not one-hot (a scaled one-hot, batch dims)', () => {
    const w = np.ones([4, 3]);
    const x = np.array(Int32Array.from([1, 2]), 'int32');
    const scaled = (w: Array, x: Array) => np.matmul(np.multiply(nn.oneHot(x, 4), 0.5), w);
    expect(jit(scaled).lower(w, x).compile().passStats.oneHot).toBe(0);
    const xb = np.array(Int32Array.from([1, 2, 3, 0]), 'int32').reshape([2, 2]);
    const wb = np.ones([2, 4, 3]);
    const batched = (w: Array, x: Array) => lax.dotGeneral(nn.oneHot(x, 4), w, [[[2], [1]], [[0], [0]]]);
    expect(jit(batched).lower(wb, xb).compile().passStats.oneHot).toBe(0);
  });

  it('a one-element iota stretched over the class dim is no one-hot (x == 0 in every column): left a dot', () => {
    const V = 4;
    const w = np.array(Float32Array.from({ length: V * 3 }, (_, i) => i + 1)).reshape([V, 3]);
    const x = np.array(Float32Array.from([0, 1, 0, 2, 0]));
    // eq(broadcast(x), broadcast_in_dim(iota(1), [n, V], [1])): column c is (x == 0), for every c.
    const f = (w: Array, x: Array) => np.matmul(np.equal(lax.broadcastInDim(x, [5, V], [0]), lax.broadcastInDim(lax.iota('float32', 1), [5, V], [1])).astype('float32'), w);
    const { on, off } = compileBoth(f, [w, x]);
    expect(on.passStats.oneHot).toBe(0);
    // Rows with x == 0 sum every table row: 1+4+7+10 = 22, 26, 30; others are zero.
    expect(globalThis.Array.from(on.call([w, x])[0].dataSync() as Float32Array)).toEqual([22, 26, 30, 0, 0, 0, 22, 26, 30, 0, 0, 0, 22, 26, 30]);
    expect(on.call([w, x])[0].dataSync()).toEqual(off.call([w, x])[0].dataSync());
  });

  it('TPUKIT_ONEHOT=0 turns the pass off for Lowered.compile() too; an explicit oneHot: true wins', () => {
    const w = np.ones([4, 3]);
    const x = np.array(Int32Array.from([1, 2]), 'int32');
    const f = (w: Array, x: Array) => np.matmul(nn.oneHot(x, 4), w);
    const env = process.env.TPUKIT_ONEHOT;
    process.env.TPUKIT_ONEHOT = '0';
    try {
      expect(jit(f).lower(w, x).compile().passStats.oneHot).toBe(0);
      expect(jit(f).lower(w, x).compile({ oneHot: true }).passStats.oneHot).toBe(1);
    } finally {
      if (env === undefined) delete process.env.TPUKIT_ONEHOT;
      else process.env.TPUKIT_ONEHOT = env;
    }
    expect(jit(f).lower(w, x).compile().passStats.oneHot).toBe(env === '0' ? 0 : 1);
  });

  it('inf and NaN in the table: the dot spreads NaN from unselected rows (0 * inf), the gather does not', () => {
    const w = np.array(Float32Array.from([1, 2, Infinity, 4, NaN, 6])).reshape([3, 2]);
    const x = np.array(Int32Array.from([0, 1, 2]), 'int32');
    const f = (w: Array, x: Array) => np.matmul(nn.oneHot(x, 3), w);
    const { on, off } = compileBoth(f, [w, x]);
    const dot = globalThis.Array.from(off.call([w, x])[0].dataSync() as Float32Array);
    const gather = globalThis.Array.from(on.call([w, x])[0].dataSync() as Float32Array);
    // The dot: a column holding an inf or NaN in any row is NaN in every row (0 * inf, 0 * NaN).
    expect(dot).toEqual([NaN, 2, NaN, 4, NaN, 6]);
    // The gather: each row is its own (rounded) row, inf and NaN included.
    expect(gather).toEqual([1, 2, Infinity, 4, NaN, 6]);
  });

  it('the gather\'s cached row views follow the table: other shapes, new values, a grown scratch', () => {
    // (Small integers: exact in bfloat16, so a gathered row equals the table row on both backends.)
    const run = (V: number, N: number, M: number, seed: number) => {
      const table = Float32Array.from({ length: V * N }, (_, i) => ((i * 5 + seed) % 17) - 8);
      const index = Int32Array.from({ length: M }, (_, m) => ((m * 3 + seed) % (V + 2)) - 1);
      const p = { classes: V, precision: null, dtype: 'float32', nominalFlops: 0 };
      const got = evalPrimitive(oneHotGatherP, [np.array(table).reshape([V, N]), np.array(index, 'int32')], p)[0].dataSync() as Float32Array;
      const want = new Float32Array(M * N);
      index.forEach((v, m) => {
        if (v >= 0 && v < V) want.set(table.subarray(v * N, v * N + N), m * N);
      });
      expect(globalThis.Array.from(got)).toEqual(globalThis.Array.from(want));
    };
    for (const backend of ['systolic', 'reference'] as const) {
      withBackend(backend, () => {
        run(4, 3, 8, 0);
        run(6, 2, 12, 1); // another row length over the same scratch
        run(3, 2, 6, 2); // fewer rows of the same length: cached views reused
        run(4, 3, 8, 3); // the first shape again, other values
        run(300, 64, 600, 4); // the scratch grows: views of the new buffer
        run(4, 3, 8, 5);
        // A segment sum over 2M bfloat16 values grows the scratch the rounded table lies in
        // (the gather's shape is unchanged): the cached views must not read the old buffer.
        const values = np.ones([2048, 1024]).astype('bfloat16');
        evalPrimitive(oneHotSegmentSumP, [values, np.zeros([2048], 'int32')], { classes: 2, precision: null, dtype: 'float32', nominalFlops: 0 });
        run(4, 3, 8, 6);
      });
    }
  });

  it('the primitives reject bad operands with errors naming the operation and the values', () => {
    const p = { classes: 4, precision: null, dtype: 'float32', nominalFlops: 0 };
    const t = np.ones([4, 3]);
    expect(() => evalPrimitive(oneHotGatherP, [t, np.ones([2, 2])], p)).toThrow(/onehot_gather: index must be a vector .* got float32\[2,2\]/);
    expect(() => evalPrimitive(oneHotGatherP, [np.ones([5, 3]), np.ones([2])], p)).toThrow(/onehot_gather: the table has 5 rows but classes is 4/);
    expect(() => evalPrimitive(oneHotGatherP, [np.ones([4]), np.ones([2])], p)).toThrow(/onehot_gather: table must be a float32 or bfloat16 matrix; got float32\[4\]/);
    expect(() => evalPrimitive(oneHotSegmentSumP, [t, np.ones([3])], p)).toThrow(/onehot_segment_sum: values have 4 rows but index has 3 entries/);
    expect(() => evalPrimitive(oneHotSegmentSumP, [t, np.ones([4])], { ...p, classes: -1 })).toThrow(/onehot_segment_sum: classes must be a non-negative integer; got -1/);
  });

  it('the SIMD segment sum (rows of a multiple of 4) equals bf16 rounding then float32 sums in token order, NaN and inf included', () => {
    const T = 37;
    const N = 12;
    const V = 5;
    const vals = Float32Array.from({ length: T * N }, (_, j) => (j % 29 === 0 ? NaN : j % 31 === 0 ? -Infinity : Math.sin(j * 0.37) * 2 ** ((j % 9) - 4)));
    const idx = Int32Array.from({ length: T }, (_, t) => ((t * 7) % (V + 3)) - 1);
    const want = new Float32Array(V * N);
    const r = bf16.roundInPlace(Float32Array.from(vals));
    for (let t = 0; t < T; t++) if (idx[t] >= 0 && idx[t] < V) for (let n = 0; n < N; n++) want[idx[t] * N + n] += r[t * N + n];
    withBackend('systolic', () => {
      const got = evalPrimitive(oneHotSegmentSumP, [np.array(vals).reshape([T, N]), np.array(idx, 'int32')], { classes: V, precision: null, dtype: 'float32', nominalFlops: 0 })[0].dataSync();
      expect(got).toEqual(want);
    });
  });

  it('law: a gather of fewer rows than the table (rows rounded one by one) equals the whole-table path bit for bit', () => {
    const specials = [0, -0, 1e-40, -1e-40, Infinity, -Infinity, NaN, 3.0000002, -1.00390625, 65504.5];
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 9 }),
        fc.integer({ min: 1, max: 9 }),
        fc.constantFrom(null, 'default', 'high', 'highest'),
        fc.constantFrom('float32', 'bfloat16'),
        fc.constantFrom('float32', 'bfloat16'),
        fc.boolean(),
        fc.constantFrom('systolic', 'reference'),
        fc.integer({ min: 0, max: 1 << 30 }),
        (V, N, precision, tableDtype, dtype, flush, backend, seed) => {
          let s = seed;
          const rnd = (): number => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32);
          const tv = Float32Array.from({ length: V * N }, () => (rnd() < 0.5 ? specials[Math.floor(rnd() * specials.length)] : (rnd() - 0.5) * 2 ** Math.floor(rnd() * 40 - 20)));
          const M = 1 + Math.floor(rnd() * (V - 1));
          const few = Int32Array.from({ length: M }, () => Math.floor(rnd() * (V + 2)) - 1);
          // The same rows then V more (out of range): M + V >= V rows take the whole-table path.
          const many = Int32Array.from({ length: M + V }, (_, m) => (m < M ? few[m] : -1));
          const p = { classes: V, precision, dtype, nominalFlops: 0 };
          systolic.configure({ flushSubnormals: flush });
          try {
            withBackend(backend, () => {
              const table = np.array(tv).reshape([V, N]).astype(tableDtype);
              const a = evalPrimitive(oneHotGatherP, [table, np.array(few, 'int32')], p)[0];
              const b = evalPrimitive(oneHotGatherP, [table, np.array(many, 'int32')], p)[0];
              const rowBits = (x: Array): Uint32Array => new Uint32Array(Float32Array.from(x.astype('float32').dataSync() as Float32Array).buffer);
              expect(rowBits(a)).toEqual(rowBits(b).subarray(0, M * N));
            });
          } finally {
            systolic.configure({ flushSubnormals: false });
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it('reused scratch: segment sums and gathers of changing sizes and result dtypes equal their first results', () => {
    const N = 8;
    const V = 6;
    const call = (prim: typeof oneHotGatherP, T: number, dtype: 'float32' | 'bfloat16'): Uint32Array => {
      const x = np.array(Float32Array.from({ length: (prim === oneHotGatherP ? V : T) * N }, (_, j) => Math.sin(j * 0.61) * 3)).reshape([prim === oneHotGatherP ? V : T, N]);
      const idx = np.array(Int32Array.from({ length: T }, (_, t) => (t * 5) % (V + 1)), 'int32');
      return new Uint32Array(Float32Array.from(evalPrimitive(prim, [x, idx], { classes: V, precision: null, dtype, nominalFlops: 0 })[0].astype('float32').dataSync() as Float32Array).buffer);
    };
    withBackend('systolic', () => {
      for (const prim of [oneHotGatherP, oneHotSegmentSumP]) {
        for (const dtype of ['float32', 'bfloat16'] as const) {
          const first = [40, 3, 17].map((T) => call(prim, T, dtype));
          expect([3, 40, 17].map((T) => call(prim, T, dtype))).toEqual([first[1], first[0], first[2]]);
        }
      }
    });
  });

  it('the SIMD segment sum declines sizes past its memory limit (the caller sums in JavaScript) and leaves dst alone', () => {
    expect(segmentSumKernelAvailable(4)).toBe(wasm.wasmFeatures().simd);
    if (!wasm.wasmFeatures().simd) return;
    const dst = new Float32Array(4).fill(7);
    // (Only the lengths are read before the check: a stand-in for 2^28 values.)
    const huge = { length: SEGMENT_SUM_MAX_BYTES / 4 } as Float32Array;
    expect(segmentSumBf16(huge, new Int32Array(1), dst, 4)).toBe(false);
    expect(globalThis.Array.from(dst)).toEqual([7, 7, 7, 7]);
    // Within the limit it sums from zero, whatever dst held.
    expect(segmentSumBf16(Float32Array.from([1, 2, 3, 4]), Int32Array.from([0]), dst, 4)).toBe(true);
    expect(globalThis.Array.from(dst)).toEqual([1, 2, 3, 4]);
  });

  it('uint32 indices (2^31 and more select nothing): rewritten, equal to the dot', () => {
    const w = np.array(Float32Array.from({ length: 15 }, (_, i) => i + 1)).reshape([5, 3]);
    const x = np.array(Uint32Array.from([4, 0, 2 ** 31, 2 ** 32 - 1, 5, 2]), 'uint32');
    const f = (w: Array, x: Array) => np.matmul(np.equal(np.expandDims(x, 1), lax.iota('uint32', 5)).astype('float32'), w);
    const { on, off } = compileBoth(f, [w, x]);
    expect(on.passStats.oneHot).toBe(1);
    const got = on.call([w, x])[0].dataSync();
    expect(got).toEqual(off.call([w, x])[0].dataSync());
    expect(globalThis.Array.from(got as Float32Array)).toEqual([13, 14, 15, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 8, 9]);
  });

  it('non-integer float indices select nothing (as the float compare with the iota)', () => {
    const w = np.array(Float32Array.from({ length: 8 }, (_, i) => i + 1)).reshape([4, 2]);
    const x = np.array(Float32Array.from([1.5, 2, -0, 3.0000002]));
    // A float one-hot by hand: eq(x[:, None], iota) as float32.
    const f = (w: Array, x: Array) => np.matmul(np.equal(np.expandDims(x, 1), lax.iota('float32', 4)).astype('float32'), w);
    const { on, off } = compileBoth(f, [w, x]);
    expect(on.passStats.oneHot).toBe(1);
    expect(on.call([w, x])[0].dataSync()).toEqual(off.call([w, x])[0].dataSync());
  });
});
