// Sibling multi-output fusion of column reductions (passes/siblingFusion.ts): column sums (or
// maxes) of one shape that read a common array become one kInput fusion with a tuple output,
// reading that array once. Each output is still its own column reduction over the rows in
// order: results are bit-identical to the unmerged program, on the wasm and the JavaScript
// kernels and on any thread count; bytes never grow.
import { debug, getBackend, grad, lax, nn, np, setBackend } from '@tpukit/core';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { B, f32 } from './build';
import { columnReduction, fuseElementwise, fuseRows, fuseSiblingReductions, type HloComputation, HloInstruction, HloModule, jit, poolStats, setKernelThreads, setWasmKernels } from '../src/internal';
import { getColumnRowBlocks, setColumnRowBlocks } from '../src/wasm/emitKernel';
import { getColumnParallelWork, getParallelWork, PARALLEL_WORK, setColumnParallelWork, setParallelWork } from '../src/wasm/fusionPlan';

afterEach(() => {
  setWasmKernels(true);
  setKernelThreads(null);
});

const bits = (a: any): number[] => Array.from(new Uint32Array(Float32Array.from(a.dataSync() as Float32Array).buffer));
const data = (shape: number[], seed: number): any => np.array(Float32Array.from({ length: shape.reduce((p, q) => p * q, 1) }, (_, i) => Math.sin(i * 0.731 + seed) * 2 + Math.cos(i * 0.37 * seed))).reshape(shape);
const fusions = (c: any): any[] => c.module.entry.instructions.filter((i: any) => i.opcode === 'fusion');

describe('sibling fusion of column reductions', () => {
  it("LayerNorm's dgamma and dbeta: one kernel with two outputs reading dy once, same bits, fewer bytes", () => {
    const dy = data([37, 133], 1);
    const xhat = data([37, 133], 2);
    const f = (d: any, x: any) => [np.sum(np.multiply(d, x), { axis: 0 }), np.sum(d, { axis: 0 })];
    for (const wasm of [true, false]) {
      setWasmKernels(wasm);
      const on = jit(f).lower(dy, xhat).compile();
      const off = jit(f).lower(dy, xhat).compile({ siblingFusion: false });
      expect(on.passStats.siblingFusion).toBe(1);
      expect(fusions(off)).toHaveLength(2);
      expect(fusions(on)).toHaveLength(1);
      expect(fusions(on)[0].shapes).toHaveLength(2);
      expect(on.stats.wasmKernels).toBe(wasm ? 1 : 0);
      // dy (37 x 133 float32) is read once instead of twice.
      expect(off.costAnalysis().bytesAccessed - on.costAnalysis().bytesAccessed).toBe(37 * 133 * 4);
      const a = on.call([dy, xhat]);
      const b = off.call([dy, xhat]);
      a.forEach((r: any, k: number) => expect(bits(r)).toEqual(bits(b[k])));
    }
  });

  it('leaves reductions where one reads the other, and ones that share no array', () => {
    const x = data([20, 9], 3);
    const y = data([20, 9], 4);
    // s2 reads s1 (through a broadcast): merging would put s1's reader inside its own producer.
    const dependent = (a: any) => {
      const s1 = np.sum(a, { axis: 0 });
      return [s1, np.sum(np.multiply(a, s1), { axis: 0 })];
    };
    const c1 = jit(dependent).lower(x).compile();
    expect(c1.passStats.siblingFusion).toBe(0);
    expect(fusions(c1)).toHaveLength(2);
    const c2 = jit((a: any, b: any) => [np.sum(a, { axis: 0 }), np.sum(np.square(b), { axis: 0 })]).lower(x, y).compile();
    expect(c2.passStats.siblingFusion).toBe(0);
    // A sum and a max of the same array reduce differently: two kernels.
    const c3 = jit((a: any) => [np.sum(a, { axis: 0 }), np.max(a, { axis: 0 })]).lower(x).compile();
    expect(c3.passStats.siblingFusion).toBe(0);
  });

  it('merges at most MAX_SIBLING_OUTPUTS outputs into one fusion, and readers of an earlier output that come before the later one still follow it', () => {
    const b = new B();
    const x = b.param(f32(6, 5));
    const sums = Array.from({ length: 10 }, (_, k) => b.op('reduce_sum', [k === 0 ? x : b.op('mul', [x, b.op('broadcast_in_dim', [b.constant(k + 1)], { shape: [6, 5], broadcastDimensions: [] })])], { axes: [0] }));
    // A reader of the first sum between the sums.
    const early = b.op('exp', [sums[0]]);
    const c = b.out(early, ...sums.slice(1));
    c.instructions.splice(c.instructions.indexOf(early), 1);
    c.instructions.splice(c.instructions.indexOf(sums[1]), 0, early);
    const mod = new HloModule('m', c);
    fuseElementwise(c, mod, 1);
    expect(c.instructions.filter((i) => columnReduction(i) !== null)).toHaveLength(10);
    expect(fuseSiblingReductions(c, mod)).toBe(8); // 10 -> one of 8 outputs and one of 2
    const fs = c.instructions.filter((i) => columnReduction(i) !== null);
    expect(fs.map((f) => f.shapes.length).sort()).toEqual([2, 8]);
    const pos = new Map(c.instructions.map((i, k) => [i, k]));
    for (const i of c.instructions) for (const o of i.operands) expect(pos.get(o)!).toBeLessThan(pos.get(i)!);
  });

  it('law: random programs of column reductions: merged == unmerged bit for bit (wasm and JavaScript kernels), bytes never grow, 1-3 threads equal', () => {
    // Each program: arrays a, b, c of [K, A, L]; reductions over axis 0 (A groups) or axes 0-1
    // of an elementwise expression of one or two of them, sums or maxes, some reading an
    // earlier reduction (through a broadcast), in random order.
    const EXPR = [
      (p: any) => p,
      (p: any) => np.square(p),
      (p: any) => np.tanh(p),
      (p: any, q: any) => np.multiply(p, q),
      (p: any, q: any) => np.subtract(p, np.multiply(q, 0.5)),
      (p: any, q: any) => np.add(np.exp(np.negative(np.abs(p))), q),
    ];
    const threshold = getColumnParallelWork();
    // Column spans split between threads at any size past PARALLEL_WORK (off by default).
    setColumnParallelWork(PARALLEL_WORK);
    let merges = 0;
    const jobs0 = poolStats().parallelJobs;
    try {
      fc.assert(
        fc.property(
          fc.record({
            K: fc.integer({ min: 1, max: 90 }),
            A: fc.constantFrom(1, 2, 3),
            L: fc.oneof(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 250, max: 700 })),
            groups: fc.boolean(),
            max: fc.boolean(),
            reds: fc.array(fc.tuple(fc.nat(5), fc.nat(2), fc.nat(2), fc.nat(4)), { minLength: 2, maxLength: 7 }),
            seed: fc.integer({ min: 1, max: 1000 }),
          }),
          ({ K, A, L, groups, max, reds, seed }) => {
            const shape = [K, A, L];
            const args = [data(shape, seed), data(shape, seed + 1), data(shape, seed + 2)];
            const axis = groups ? 0 : [0, 1];
            const f = (...xs: any[]) => {
              const outs: any[] = [];
              for (const [e, i, j, dep] of reds) {
                let v = EXPR[e](xs[i], xs[j]);
                // Read an earlier reduction: a dependency the pass must respect.
                if (dep === 0 && outs.length > 0) v = np.multiply(v, outs[outs.length - 1]);
                outs.push(max ? np.max(v, { axis }) : np.sum(v, { axis }));
              }
              return outs;
            };
            for (const wasm of [true, false]) {
              setWasmKernels(wasm);
              const on = jit(f).lower(...args).compile();
              const off = jit(f).lower(...args).compile({ siblingFusion: false });
              merges += on.passStats.siblingFusion;
              expect(on.costAnalysis().bytesAccessed).toBeLessThanOrEqual(off.costAnalysis().bytesAccessed);
              expect(fusions(on).length + on.passStats.siblingFusion).toBe(fusions(off).length);
              const b = off.call(args).map(bits);
              const threads = wasm ? [1, 2, 3] : [1];
              for (const t of threads) {
                // Other data through the arena first, so a column a thread skipped cannot pass.
                setKernelThreads(1);
                on.call(args.map((_, k) => data(shape, seed + 7 + k)));
                setKernelThreads(t);
                expect(on.call(args).map(bits)).toEqual(b);
              }
              setKernelThreads(null);
            }
          },
        ),
        // (the second example is large enough, 90 x 3 x 700, for its kernels to run on threads)
        { numRuns: 40, examples: [[{ K: 64, A: 2, L: 300, groups: true, max: false, reds: [[3, 0, 1, 1], [0, 0, 0, 1], [0, 1, 1, 0], [1, 1, 2, 1]], seed: 3 }], [{ K: 90, A: 3, L: 700, groups: true, max: false, reds: [[3, 0, 1, 1], [0, 0, 0, 1], [1, 1, 2, 1]], seed: 5 }]] },
      );
    } finally {
      setColumnParallelWork(threshold);
      setKernelThreads(null);
    }
    expect(merges).toBeGreaterThan(10); // the law exercises the merge
    expect(poolStats().parallelJobs).toBeGreaterThan(jobs0); // and the kernels on threads
  });
  it('law: split by row blocks (opt-in), each output keeps its own blocks: merged == unmerged bit for bit, 1-3 threads equal', () => {
    const saved = { work: getParallelWork(), blocks: getColumnRowBlocks() };
    // Row blocks from PARALLEL_WORK (the split runs on threads from that work).
    setParallelWork(PARALLEL_WORK);
    try {
      fc.assert(
        fc.property(fc.integer({ min: 600, max: 1100 }), fc.integer({ min: 110, max: 160 }), fc.constantFrom(2, 3, 4), fc.boolean(), fc.integer({ min: 1, max: 1000 }), (K, L, blocks, max, seed) => {
          setColumnRowBlocks(blocks);
          const args: [any, any] = [data([K, L], seed), data([K, L], seed + 1)];
          const red = (v: any) => (max ? np.max(v, { axis: 0 }) : np.sum(v, { axis: 0 }));
          const f = (a: any, b: any) => [red(np.multiply(a, b)), red(a), red(np.tanh(a))];
          const on = jit(f).lower(...args).compile();
          const off = jit(f).lower(...args).compile({ siblingFusion: false });
          expect(on.passStats.siblingFusion).toBe(2);
          const want = off.call(args).map(bits);
          for (const t of [1, 2, 3]) {
            setKernelThreads(1);
            on.call(args.map((_, k) => data([K, L], seed + 5 + k)));
            setKernelThreads(t);
            expect(on.call(args).map(bits)).toEqual(want);
          }
          setKernelThreads(null);
        }),
        { numRuns: 12 },
      );
    } finally {
      setParallelWork(saved.work);
      setColumnRowBlocks(saved.blocks);
      setKernelThreads(null);
    }
  });
  it('leaves a pair with an effect between them alone (the merge could move the later one\'s operands, and their effects, above it)', () => {
    const printed = debug.capturePrints();
    try {
      const x = data([8, 5], 4);
      const f = (a: any) => {
        const s1 = np.sum(a, { axis: 0 });
        debug.print('A {}', s1);
        const y = lax.whileLoop((c: any) => np.less(np.sum(c[1]), 1), (c: any) => {
          debug.print('B');
          return [np.add(c[0], 1), np.add(c[1], 1)];
        }, [a, np.array(0, 'float32')])[0];
        return [s1, np.sum(np.multiply(a, y), { axis: 0 })];
      };
      const c = jit(f).lower(x).compile();
      expect(c.passStats.siblingFusion).toBe(0);
      c.call([x]);
      expect(printed.lines.map((l: string) => l[0])).toEqual(['A', 'B']);
    } finally {
      printed.restore();
    }
  });
  it('leaves a pair alone when the merged kernel would split its rows into other blocks than one of them (a split changes the summation order)', () => {
    const saved = { work: getParallelWork(), blocks: getColumnRowBlocks() };
    setParallelWork(PARALLEL_WORK);
    setColumnRowBlocks(4);
    try {
      // 600 x 100: the plain sum is too little work to split, the tanh sum is split; column 0's
      // rows 2^25, 2, then 2^-35s sum to 2^25 in order, and to 2^25 + 4 from a later block's partial.
      const K = 600;
      const L = 100;
      const v = new Float32Array(K * L);
      v[0] = 2 ** 25;
      v[L] = 2;
      for (let r = 300; r < K; r++) v[r * L] = 2 ** -35;
      const a = np.array(v).reshape([K, L]);
      const f = (x: any) => [np.sum(x, { axis: 0 }), np.sum(np.tanh(x), { axis: 0 })];
      const on = jit(f).lower(a).compile();
      const off = jit(f).lower(a).compile({ siblingFusion: false });
      expect(on.passStats.siblingFusion).toBe(0);
      expect(on.call([a]).map(bits)).toEqual(off.call([a]).map(bits));
      expect(on.call([a])[0].dataSync()[0]).toBe(2 ** 25);
    } finally {
      setParallelWork(saved.work);
      setColumnRowBlocks(saved.blocks);
    }
  });
  it('TPUKIT_SIBLING_FUSION=0 turns the pass off; a value other than 0 or 1 throws naming the variable (as TPUKIT_ONEHOT and TPUKIT_FUSION_REMAT)', () => {
    const f = (d: any, x: any) => [np.sum(np.multiply(d, x), { axis: 0 }), np.sum(d, { axis: 0 })];
    const args: [any, any] = [data([8, 5], 1), data([8, 5], 2)];
    const names = ['TPUKIT_SIBLING_FUSION', 'TPUKIT_ONEHOT', 'TPUKIT_FUSION_REMAT'];
    const saved = names.map((n) => process.env[n]);
    try {
      process.env.TPUKIT_SIBLING_FUSION = '0';
      expect(jit(f).lower(...args).compile().passStats.siblingFusion).toBe(0);
      process.env.TPUKIT_SIBLING_FUSION = '1';
      expect(jit(f).lower(...args).compile().passStats.siblingFusion).toBe(1);
      for (const n of names) {
        for (const bad of ['off', 'false', ' 0']) {
          process.env[n] = bad;
          expect(() => jit(f).lower(...args).compile()).toThrow(new RegExp(`${n} must be 0 or 1; got "${bad}"`));
        }
        delete process.env[n];
      }
    } finally {
      names.forEach((n, k) => (saved[k] === undefined ? delete process.env[n] : (process.env[n] = saved[k])));
    }
  });
});

// Horizontal merges: column sums that share no array but read outputs of ONE multi-output
// instruction (the fused attention backward's dq, dk, dv: the GPT step's q/k/v bias gradients).
/** A two-output instruction that is not a fusion (as the fused attention backward) over f32[6,5] operands, and its outputs. */
/** The one column reduction of `c` after a merge of two sums (checked: one, with two outputs) and the loop fusion beside it. */
const mergedPairAndLoop = (c: HloComputation): [HloInstruction, HloInstruction] => {
  const merged = c.instructions.filter((i) => columnReduction(i) !== null);
  expect(merged).toHaveLength(1);
  expect(merged[0].shapes).toHaveLength(2);
  const loop = c.instructions.find((i) => i.opcode === 'fusion' && (i.params as { kind: string }).kind === 'kLoop')!;
  return [merged[0], loop];
};
const twoOutputs = (b: B, p: HloInstruction, q: HloInstruction): [HloInstruction, HloInstruction, HloInstruction] => {
  const t = b.c.add(new HloInstruction('two', [f32(6, 5), f32(6, 5)], [p, q], {}, null));
  const gte = (index: number): HloInstruction => b.c.add(new HloInstruction('get-tuple-element', [f32(6, 5)], [t], { index }, null));
  return [t, gte(0), gte(1)];
};

describe('horizontal merges of column sums over one instruction\'s outputs', () => {
  let prev = '';
  beforeAll(() => {
    prev = getBackend().name;
    setBackend('systolic');
  });
  afterAll(() => setBackend(prev));
  const [Bn, T, H, D] = [3, 21, 4, 8];
  const [Hn, Dn] = [4, 32];
  const x = data([Bn, T, H, D], 5);
  const w = data([Bn, T, H, D], 6);
  const bias = (s: number): any => data([H, D], s);
  // q/k/v = x + its bias (per head and feature); the biases' gradients are column sums of dq, dk, dv over (batch, time).
  const attn = (xx: any, bq: any, bk: any, bv: any): any => nn.dotProductAttention(np.add(xx, bq), np.add(np.multiply(xx, 0.5), bk), np.add(np.tanh(xx), bv), { isCausal: true });
  const loss = (bq: any, bk: any, bv: any, xx: any, ww: any): any => np.sum(np.multiply(attn(xx, bq, bk, bv), ww));
  const step = grad(loss, { argnums: [0, 1, 2] });
  const attnSums = (c: any): any[] => fusions(c).filter((f: any) => columnReduction(f) !== null && f.operands.every((o: any) => o.opcode === 'get-tuple-element' && o.operands[0].prim?.name === 'dot_product_attention_bwd'));

  it('the bias gradients over dq, dk and dv become one kernel with three outputs; the same bits on 1 and 2 threads (wasm) and on the JavaScript kernels; off with horizontalSums: false', () => {
    // Large enough ([8,64,4,32]: 512 rows of 128 columns per sum) for the column spans to split
    // between threads once the column-split threshold is PARALLEL_WORK (off by default).
    const shape = [8, 64, Hn, Dn];
    const args = [data([Hn, Dn], 7), data([Hn, Dn], 8), data([Hn, Dn], 9), data(shape, 5), data(shape, 6)];
    const threshold = getColumnParallelWork();
    setColumnParallelWork(PARALLEL_WORK);
    try {
      for (const wasm of [true, false]) {
        setWasmKernels(wasm);
        const on = jit(step).lower(...args).compile();
        const off = jit(step).lower(...args).compile({ horizontalSums: false });
        expect(on.passStats.siblingFusion).toBe(2);
        expect(off.passStats.siblingFusion).toBe(0);
        const merged = attnSums(on);
        expect(merged).toHaveLength(1);
        expect(merged[0].shapes).toHaveLength(3);
        expect(new Set(merged[0].operands.map((o: any) => o.operands[0])).size).toBe(1);
        expect(new Set(merged[0].operands.map((o: any) => (o.params as { index: number }).index))).toEqual(new Set([0, 1, 2]));
        expect(attnSums(off).map((f: any) => f.shapes.length)).toEqual([1, 1, 1]);
        expect(on.stats.wasmKernels > 0).toBe(wasm);
        const want = off.call(args).map(bits);
        // (the pool jobs of one call at 2 threads without the column split: the merged sum's own
        // jobs are those past it)
        let unsplitJobs = 0;
        if (wasm) {
          setColumnParallelWork(threshold);
          const unsplit = jit(step).lower(...args).compile();
          setColumnParallelWork(PARALLEL_WORK);
          setKernelThreads(2);
          const j0 = poolStats().parallelJobs;
          expect(unsplit.call(args).map(bits)).toEqual(want);
          unsplitJobs = poolStats().parallelJobs - j0;
        }
        for (const threads of wasm ? [1, 2, 1, 2] : [1]) {
          // Other data through the arena first, so a column a thread skipped cannot pass.
          setKernelThreads(1);
          on.call(args.map((a: any, k: number) => data(a.shape, 20 + k)));
          setKernelThreads(threads);
          const jobs0 = poolStats().parallelJobs;
          const a = on.call(args);
          if (threads === 2) expect(poolStats().parallelJobs - jobs0).toBeGreaterThan(unsplitJobs);
          expect(a).toHaveLength(3);
          expect(a.map(bits)).toEqual(want);
        }
        setKernelThreads(null);
      }
    } finally {
      setColumnParallelWork(threshold);
      setKernelThreads(null);
      setWasmKernels(true);
    }
  });

  it('the merged sums take the first one\'s place: an instruction between the two sums stays after them', () => {
    const b = new B();
    const x = b.param(f32(6, 5));
    const y = b.param(f32(6, 5));
    const [, g0, g1] = twoOutputs(b, x, y);
    const s0 = b.op('reduce_sum', [g0], { axes: [0] });
    const between = b.op('mul', [x, y]);
    const s1 = b.op('reduce_sum', [b.op('reshape', [g1], { newSizes: [6, 5], dimensions: null })], { axes: [0] });
    const c = b.out(s0, between, s1);
    const mod = new HloModule('m', c);
    fuseElementwise(c, mod, 1);
    expect(fuseSiblingReductions(c, mod, false)).toBe(0);
    expect(fuseSiblingReductions(c, mod)).toBe(1);
    const [merged, loop] = mergedPairAndLoop(c);
    expect(c.instructions.indexOf(merged)).toBeLessThan(c.instructions.indexOf(loop));
    const pos = new Map(c.instructions.map((i, k) => [i, k]));
    for (const i of c.instructions) for (const o of i.operands) expect(pos.get(o)!).toBeLessThan(pos.get(i)!);
  });

  it('leaves a later sum alone when it reads outputs of two instructions, one of them between the sums (merging at the first place would compute it earlier)', () => {
    const b = new B();
    const x = b.param(f32(6, 5));
    const y = b.param(f32(6, 5));
    const two = (p: HloInstruction, q: HloInstruction): HloInstruction => b.c.add(new HloInstruction('two', [f32(6, 5), f32(6, 5)], [p, q], {}, null));
    const gte = (t: HloInstruction, index: number): HloInstruction => b.c.add(new HloInstruction('get-tuple-element', [f32(6, 5)], [t], { index }, null));
    const t1 = two(x, y);
    const s0 = b.op('reduce_sum', [gte(t1, 0)], { axes: [0] });
    // S2 comes after the first sum; the second sum reads gte(S2) first, then gte(S1).
    const t2 = two(y, x);
    const s1 = b.op('reduce_sum', [b.op('add', [gte(t2, 0), gte(t1, 1)])], { axes: [0] });
    const c = b.out(s0, s1);
    const mod = new HloModule('m', c);
    fuseElementwise(c, mod, 1);
    const sums = c.instructions.filter((i) => columnReduction(i) !== null);
    expect(sums).toHaveLength(2);
    expect(sums[1].operands.map((o) => o.operands[0])).toEqual([t2, t1]);
    expect(fuseSiblingReductions(c, mod)).toBe(0);
    expect(c.instructions.indexOf(t2)).toBeGreaterThan(c.instructions.indexOf(sums[0]));
  });

  it('a merge over a shared array (not horizontal) keeps the later sum\'s place: an instruction between the two sums stays before them', () => {
    const b = new B();
    const x = b.param(f32(6, 5));
    const y = b.param(f32(6, 5));
    const s0 = b.op('reduce_sum', [x], { axes: [0] });
    const between = b.op('mul', [y, y]);
    const s1 = b.op('reduce_sum', [b.op('tanh', [x])], { axes: [0] });
    const c = b.out(s0, between, s1);
    const mod = new HloModule('m', c);
    fuseElementwise(c, mod, 1);
    expect(fuseSiblingReductions(c, mod)).toBe(1);
    const [merged, loop] = mergedPairAndLoop(c);
    expect(c.instructions.indexOf(merged)).toBeGreaterThan(c.instructions.indexOf(loop));
  });

  it('leaves sums alone when a row fusion reads one of their operands (its row kernel may compute that sum, rows14\'s pairing)', () => {
    const build = (rowReader: boolean): number => {
      const b = new B();
      const x = b.param(f32(6, 5));
      const y = b.param(f32(6, 5));
      const [, g0, g1] = twoOutputs(b, x, y);
      const outs = [b.op('reduce_sum', [g0], { axes: [0] }), b.op('reduce_sum', [g1], { axes: [0] })];
      if (rowReader) {
        // A softmax over g0's rows: a kRow fusion reading g0.
        const m = b.op('reshape', [b.op('reduce_max', [g0], { axes: [1] })], { newSizes: [6, 1], dimensions: null });
        const e = b.op('exp', [b.op('sub', [g0, b.op('broadcast_in_dim', [m], { shape: [6, 5], broadcastDimensions: [0, 1] })])]);
        const z = b.op('reduce_sum', [e], { axes: [1] });
        outs.push(b.op('div', [e, b.op('broadcast_in_dim', [z], { shape: [6, 5], broadcastDimensions: [0] })]));
      }
      const c = b.out(...outs);
      const mod = new HloModule('m', c);
      expect(fuseRows(c, mod)).toBe(rowReader ? 1 : 0);
      fuseElementwise(c, mod, 1);
      expect(c.instructions.filter((i) => columnReduction(i) !== null)).toHaveLength(2);
      return fuseSiblingReductions(c, mod);
    };
    expect(build(false)).toBe(1);
    expect(build(true)).toBe(0);
  });

  it('leaves sums over outputs of two different instructions alone (two attention backwards) or of a row fusion, and TPUKIT_HORIZONTAL_SUMS=0 turns the merges off', () => {
    const two = (bq1: any, bq2: any, xx: any, ww: any): any => np.sum(np.multiply(np.add(attn(xx, bq1, 0, 0), attn(np.sin(xx), bq2, 0, 0)), ww));
    const c = jit(grad(two, { argnums: [0, 1] })).lower(bias(1), bias(2), x, w).compile();
    expect(c.passStats.siblingFusion).toBe(0);
    expect(attnSums(c)).toHaveLength(2);
    // Sums of a (row) fusion's outputs stay apart: its kernel computes each as it writes them.
    const centered = (a: any, m: any): any[] => {
      const z = np.subtract(a, np.mean(a, { axis: -1, keepdims: true }));
      const sq = np.square(z);
      const r = np.divide(z, np.sqrt(np.add(np.mean(sq, { axis: -1, keepdims: true }), 1e-5)));
      return [np.sum(sq, { axis: 0 }), np.sum(r, { axis: 0 }), np.matmul(sq, m), np.matmul(r, m)];
    };
    const rc = jit(centered).lower(data([40, 24], 3), data([24, 5], 4)).compile();
    expect(fusions(rc).some((f: any) => (f.params as { kind: string }).kind === 'kRow' && f.isTuple)).toBe(true);
    expect(rc.passStats.siblingFusion).toBe(0);
    const saved = process.env.TPUKIT_HORIZONTAL_SUMS;
    try {
      process.env.TPUKIT_HORIZONTAL_SUMS = '0';
      expect(jit(step).lower(bias(7), bias(8), bias(9), x, w).compile().passStats.siblingFusion).toBe(0);
      process.env.TPUKIT_HORIZONTAL_SUMS = 'off';
      expect(() => jit(step).lower(bias(7), bias(8), bias(9), x, w).compile()).toThrow(/TPUKIT_HORIZONTAL_SUMS must be 0 or 1; got "off"/);
    } finally {
      if (saved === undefined) delete process.env.TPUKIT_HORIZONTAL_SUMS;
      else process.env.TPUKIT_HORIZONTAL_SUMS = saved;
    }
  });
});
