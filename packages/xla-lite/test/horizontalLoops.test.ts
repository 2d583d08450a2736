// Horizontal loop fusion (passes/horizontalLoops.ts): small independent loop fusions whose
// outputs have one shape become one multi-output loop fusion (the members' bodies copied
// unchanged). Laws: the results are bit-identical to the unmerged program on the wasm and the
// JavaScript kernels, on 1 and 2 threads; members never merge across shapes, with a fusion that
// reads another's result, with one whose result a later instruction reads, or past
// MAX_HORIZONTAL_OUTPUTS outputs; the kernel walks each member as one output group
// (`outputGroupsOf`); the exported module is the one before the merges.
import { type Array, np, tree } from '@tpukit/core';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { type Compiled, jit, type Lowered, setKernelThreads, setWasmKernels } from '../src/internal';
import { MAX_HORIZONTAL_OUTPUTS } from '../src/passes/horizontalLoops';
import { planFusion } from '../src/wasm/emitKernel';
import { outputGroupsOf } from '../src/wasm/loopKernel';
import { getParallelWork, PARALLEL_WORK, setParallelWork } from '../src/wasm/fusionPlan';
import { expectSameValues, unitHash } from './wasmCompare';

const savedWork = getParallelWork();
afterEach(() => {
  setWasmKernels(true);
  setKernelThreads(null);
  setParallelWork(savedWork);
});

const data = (shape: number[], seed: number): Array => np.array(Float32Array.from({ length: shape.reduce((p, q) => p * q, 1) }, (_, i) => Math.fround((unitHash(i, seed) - 0.5) * 4)), 'float32').reshape(shape);
const loops = (c: Compiled) => c.module.entry.instructions.filter((i) => i.opcode === 'fusion' && (i.params as { kind: string }).kind === 'kLoop');
const values = (c: Compiled, args: Array[]): Float32Array[] => c.call(args).map((a) => Float32Array.from(a.dataSync() as Float32Array));

/** `jit(f).lower(...args)` for arguments in an array. */
const lowerAll = (f: (...a: any[]) => unknown, args: unknown[]): Lowered => (jit(f).lower as (...a: unknown[]) => Lowered)(...args);

/** Adam's update over a pytree: one 3-output loop fusion per leaf (as in bench/gpt.bench.ts). */
type Leaves = Record<string, Array>;
const adam = (p: Leaves, m: Leaves, v: Leaves, g: Leaves, lr: Array) => {
  const m2 = tree.map((a: Array, b: Array) => np.add(np.multiply(a, 0.9), np.multiply(b, 0.1)), m, g) as Leaves;
  const v2 = tree.map((a: Array, b: Array) => np.add(np.multiply(a, 0.999), np.multiply(np.square(b), 0.001)), v, g) as Leaves;
  const p2 = tree.map((w: Array, a: Array, b: Array) => np.subtract(w, np.multiply(lr, np.divide(a, np.add(np.sqrt(b), 1e-8)))), p, m2, v2) as Leaves;
  return [p2, m2, v2];
};

/** Compiles `f` with the pass on and off on the wasm (1 and 2 threads) and the JavaScript kernels; expects the same bits everywhere. */
function expectSameBits(f: (...a: any[]) => unknown, args: unknown[], flat: Array[]): { on: Compiled; off: Compiled } {
  let on!: Compiled;
  let off!: Compiled;
  for (const wasm of [true, false]) {
    setWasmKernels(wasm);
    on = lowerAll(f, args).compile();
    off = lowerAll(f, args).compile({ horizontalLoops: false });
    expect(off.passStats.horizontalLoops).toBe(0);
    for (const t of wasm ? [1, 2] : [1]) {
      setKernelThreads(t);
      const want = values(off, flat);
      values(on, flat).forEach((o, q) => expectSameValues(o, want[q], `output ${q}, ${wasm ? 'wasm' : 'JS'} kernels, ${t} thread(s)`));
    }
    setKernelThreads(null);
  }
  setWasmKernels(true);
  return { on, off };
}

describe('horizontal loop fusion', () => {
  it("Adam's per-leaf updates: one fusion per leaf shape, the same bits", () => {
    const shapes: Record<string, number[]> = { a: [7], b: [7], c: [33, 5], d: [33, 5], e: [33, 5], f: [130], g: [7] };
    const leaves = (s: number): Leaves => Object.fromEntries(Object.entries(shapes).map(([k, sh], j) => [k, data(sh, s * 10 + j)]));
    const args = [leaves(1), leaves(2), tree.map((x: Array) => np.abs(x), leaves(3)) as Leaves, leaves(4), np.array(0.01, 'float32')];
    const flat = tree.leaves(args) as Array[];
    const { on, off } = expectSameBits(adam, args, flat);
    // 7 leaves: one fusion per shape ([7] x 3, [33,5] x 3, [130]) plus the step size's.
    expect(loops(off).length - loops(on).length).toBe(on.passStats.horizontalLoops);
    expect(on.passStats.horizontalLoops).toBe(4);
    const byShape = loops(on).filter((f) => f.shapes.length >= 3).map((f) => `${f.shapes[0].shape.join()}:${f.shapes.length}`).sort();
    expect(byShape).toEqual(['130:3', '33,5:9', '7:9']);
    for (const f of loops(on)) expect(f.shapes.every((s) => s.shape.join() === f.shapes[0].shape.join())).toBe(true);
  });

  it('exports (HLO text, StableHLO) the module as it was before the merges', () => {
    const shapes: Record<string, number[]> = { a: [7], b: [7], c: [33, 5], d: [33, 5] };
    const leaves = (s: number): Leaves => Object.fromEntries(Object.entries(shapes).map(([k, sh], j) => [k, data(sh, s * 10 + j)]));
    const args = [leaves(1), leaves(2), tree.map((x: Array) => np.abs(x), leaves(3)) as Leaves, leaves(4), np.array(0.01, 'float32')];
    const on = lowerAll(adam, args).compile();
    const off = lowerAll(adam, args).compile({ horizontalLoops: false });
    expect(on.passStats.horizontalLoops).toBe(2);
    expect(loops(on).length).toBeLessThan(loops(off).length);
    // (fusion names come from a global counter: compare with the numbers out)
    const norm = (t: string): string => t.replace(/\.\d+/g, '.N');
    expect(norm(on.asText())).toBe(norm(off.asText()));
    expect(norm(on.asStableHlo())).toBe(norm(off.asStableHlo()));
  });

  it('merges only results of the computation: fusions a later instruction reads keep their own kernels', () => {
    const x = data([16, 16], 1);
    const w = data([16, 16], 2);
    const f = (a: Array, b: Array) => [1, 2, 3].map((k) => np.matmul(np.tanh(np.multiply(a, k)), b));
    expect(lowerAll(f, [x, w]).compile().passStats.horizontalLoops).toBe(0);
    const g = (a: Array) => [1, 2, 3].map((k) => np.tanh(np.multiply(a, k)));
    expect(lowerAll(g, [x]).compile().passStats.horizontalLoops).toBe(2);
  });

  it("a merged kernel walks each member's outputs as a group, and its work is its loop's (the calling thread's, as its members')", () => {
    const n = 4096;
    const leaves = (s: number): Leaves => Object.fromEntries([0, 1, 2, 3].map((j) => [`w${j}`, data([n], s * 10 + j)]));
    const args = [leaves(1), leaves(2), tree.map((x: Array) => np.abs(x), leaves(3)) as Leaves, leaves(4), np.array(0.01, 'float32')];
    const on = lowerAll(adam, args).compile();
    const merged = loops(on).find((f) => f.shapes.length === 12)!;
    expect(merged).toBeDefined();
    // Each member's p', m', v' (m' feeds p' inside the member): 4 groups of 3, in member order.
    expect(outputGroupsOf(merged.called[0]).map((g) => g.length)).toEqual([3, 3, 3, 3]);
    expect(outputGroupsOf(merged.called[0]).flat()).toEqual([...globalThis.Array(12).keys()]);
    expect(planFusion(merged.called[0])!.work).toBe(n);
    // A fusion's own outputs are one group.
    const off = lowerAll(adam, args).compile({ horizontalLoops: false });
    for (const f of loops(off)) expect(outputGroupsOf(f.called[0])).toHaveLength(1);
  });

  it('never merges a fusion with one that reads its result, fusions of different shapes, or past MAX_HORIZONTAL_OUTPUTS outputs', () => {
    const x = data([40], 1);
    const y = data([40], 2);
    // Every later value reads the earlier through a sum (a reduction between them): chained loop fusions.
    const chained = (a: Array, b: Array) => {
      const u = np.tanh(np.add(a, b));
      const s = np.sum(u);
      return [u, np.multiply(b, s)];
    };
    const c1 = jit(chained).lower(x, y).compile();
    expect(c1.passStats.horizontalLoops).toBe(0);
    const shapes = (a: Array, b: Array) => [np.exp(a), np.tanh(b.reshape([8, 5]))];
    expect(jit(shapes).lower(x, y).compile().passStats.horizontalLoops).toBe(0);
    // N independent single-output fusions of one shape (each reads its own sum): groups of at most MAX_HORIZONTAL_OUTPUTS outputs.
    const N = MAX_HORIZONTAL_OUTPUTS + 6;
    const many = (a: Array) => globalThis.Array.from({ length: N }, (_, k: number) => np.multiply(np.exp(np.multiply(a, (k + 1) * 0.01)), np.sum(np.multiply(a, k + 2))));
    const c3 = jit(many).lower(x).compile();
    for (const f of loops(c3)) expect(f.shapes.length).toBeLessThanOrEqual(MAX_HORIZONTAL_OUTPUTS);
    const sizes = loops(c3).filter((f) => f.shapes[0].shape.join() === '40').map((f) => f.shapes.length);
    expect(sizes.reduce((p, q) => p + q, 0)).toBe(N);
    expect(sizes.length).toBe(2);
  });

  it('the same bits for random independent and dependent members, shapes and thread splits (property)', () => {
    setParallelWork(PARALLEL_WORK);
    fc.assert(
      fc.property(
        fc.array(fc.record({ shape: fc.constantFrom(0, 1), kind: fc.integer({ min: 0, max: 2 }), reads: fc.option(fc.nat(20)) }), { minLength: 1, maxLength: 9 }),
        fc.integer({ min: 1, max: 3000 }),
        fc.nat(1000),
        (members, n, seed) => {
          const shapes = [[n], [3, 17]];
          const inputs = shapes.map((sh, k) => [data(sh, seed + k), data(sh, seed + k + 7)]);
          const f = (a0: Array, b0: Array, a1: Array, b1: Array) => {
            const ins = [[a0, b0], [a1, b1]];
            const outs: Array[][] = [[], []];
            const res: Array[] = [];
            for (const m of members) {
              const [a, b] = ins[m.shape];
              // Optionally read an earlier member's result of the same shape through a sum (a dependency).
              const prev = m.reads !== null && outs[m.shape].length > 0 ? np.sum(outs[m.shape][m.reads % outs[m.shape].length]) : null;
              const a2 = prev ? np.multiply(a, prev) : a;
              const r = m.kind === 0 ? [np.tanh(np.add(a2, b))] : m.kind === 1 ? [np.add(np.multiply(a2, 0.9), np.multiply(b, 0.1)), np.sqrt(np.abs(np.subtract(a2, b)))] : [np.divide(a2, np.add(np.abs(b), 1))];
              outs[m.shape].push(...r);
              res.push(...r);
            }
            return res;
          };
          const args = [...inputs[0], ...inputs[1]];
          expectSameBits(f, args, args);
        },
      ),
      { numRuns: 25 },
    );
  });
});
