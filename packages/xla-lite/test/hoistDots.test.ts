// Dots hoisted in front of the backward's layer-norm gradients (passes/dotGroups.ts
// `hoistBeforeRowSums`, the executable's window over a row kernel that runs with its column sums
// on the calling thread): members of a later dot group whose operands are ready move to right
// before the row fusion and form a group whose window is that row fusion. Checks the move (which
// dots, where, which groups keep what), that the exported order is the one from before, that the
// executable starts the hoisted group before the row kernel only when that kernel runs on the
// calling thread alone, and the same bits with and without the move, with and without groups,
// on 1, 2 and 3 threads.
import { type Array, np, registerBackend, setNumThreads, systolic, toStorage, valueAndGrad, withBackend } from '@tpukit/core';
import { afterAll, describe, expect, it } from 'vitest';
import { dotGroupJoinsOf, dotGroupsOf, exportOrderOf, HOISTED_DOTS, type HloComputation, type HloInstruction, jit, setHoistDots, setPipelineOptions } from '../src/internal';
import { rowSumsOneThreadEnabled, setKernelThreads, setRowSumsOneThread } from '../src/index';
import { fill } from './tinyTransformer';

const bits = (a: Array): Uint32Array => new Uint32Array(Float32Array.from(toStorage(a) as Float32Array).buffer);
const kindOf = (i: HloInstruction): string | null => (i.opcode === 'fusion' ? (i.params as { kind: string }).kind : null);

/**
 * The GPT backward in small: a layer norm's gradients (dy a dot the backward row fusion reads; its
 * gamma and beta gradients column sums), then four weight gradients: three tanh(a_k)^T tanh(e_k)
 * of arguments (ready before the row fusion, traced after it) and one tanh(a_0)^T dx (ready only
 * after it), one group of four at the end, each
 * read by two wasm kernels (no dot epilogue takes it, and it is written into the arena).
 */
const step = (x: Array, g: Array, b: Array, t: Array, w: Array, ...ae: Array[]): Array[] => {
  // (operands that wasm kernels compute before the layer norm: in the arena, where the products read them in place, as the GPT's)
  const th = ae.map((a) => np.tanh(a));
  const loss = (x: Array, g: Array, b: Array): Array => {
    const xc = np.subtract(x, np.mean(x, { axis: -1, keepdims: true }));
    const v = np.mean(np.square(xc), { axis: -1, keepdims: true });
    const y = np.add(np.multiply(np.multiply(xc, np.divide(1, np.sqrt(np.add(v, 1e-5)))), g), b);
    return np.sum(np.multiply(np.tanh(np.matmul(y, w)), t));
  };
  const grads = valueAndGrad(loss, { argnums: [0, 1, 2] })(x, g, b)[1] as Array[];
  // (the first reads dx, the row fusion's result: it cannot move in front of it)
  const gs = [0, 1, 2, 3].map((k) => np.matmul(np.transpose(th[k]), k === 0 ? grads[0] : th[k + 4]));
  return [...grads, ...gs.map((p) => np.subtract(p, 1)), ...gs.map((p) => np.multiply(p, p))];
};
// (the GPT's layer-norm and weight-gradient shapes: 2048 rows of 128, products of 128 x 128)
const ARGS = [fill([2048, 128], 0.5, 1), fill([128], 0.3, 2), fill([128], 0.2, 3), fill([2048, 3], 0.5, 4), fill([128, 3], 0.4, 5), ...[0, 1, 2, 3, 4, 5, 6, 7].map((k) => fill([2048, 128], 0.5, 6 + k))];

const backend = new systolic.SystolicBackend('systolic-hoist-dots');
registerBackend(backend);

/** The step compiled for a systolic backend with the move on or off (and `opts`); it runs there (`call`). */
function compiled(hoist: boolean, opts: { dotGroups?: boolean; asyncDotGroups?: boolean } = { asyncDotGroups: true }) {
  setHoistDots(hoist);
  try {
    const x = withBackend(backend.name, () => jit(step).lower(...ARGS).compile(opts));
    return { module: x.module, stats: x.stats, call: (args: Array[]) => withBackend(backend.name, () => x.call(args)) };
  } finally {
    setHoistDots(true);
  }
}

/** The row fusion a column sum pairs with: the one reading dy (a dot's result). */
const rowOf = (c: HloComputation): HloInstruction => {
  const rows = c.instructions.filter((i) => kindOf(i) === 'kRow' && i.operands.some((o) => o.opcode === 'dot'));
  expect(rows.length).toBe(1);
  return rows[0];
};

describe('dots hoisted in front of a layer-norm gradient', () => {
  const threads = systolic.getNumThreads();
  const oneThreadSums = rowSumsOneThreadEnabled();
  afterAll(() => {
    setNumThreads(threads);
    setKernelThreads(null);
    setRowSumsOneThread(oneThreadSums);
    setHoistDots(true);
    setPipelineOptions({});
  });

  it('moves two members of the later group to right before the row fusion, as a group of their own whose window is the row fusion; the other group keeps two', () => {
    const off = compiled(false).module.entry;
    expect(dotGroupsOf(off).map((g) => g.length)).toEqual([4]);
    const c = compiled(true).module.entry;
    const row = rowOf(c);
    const at = c.instructions.indexOf(row);
    const groups = dotGroupsOf(c);
    expect(groups.map((g) => g.length).sort()).toEqual([HOISTED_DOTS, 2]);
    const q = groups.findIndex((g) => c.instructions.indexOf(g[0]) < at);
    expect(q).toBeGreaterThanOrEqual(0);
    const g = groups[q];
    expect(g.map((d) => c.instructions.indexOf(d))).toEqual([at - 2, at - 1]);
    // (the window: the row fusion, and the sums after it, which read no member)
    const end = c.instructions.indexOf(dotGroupJoinsOf(c)[q]!);
    expect(end).toBeGreaterThanOrEqual(at);
    for (const i of c.instructions.slice(at, end + 1)) for (const o of i.operands) expect(g.includes(o), `${i.opcode} in the window reads a member`).toBe(false);
    // (the rest stays after the row fusion, in the group of the end)
    const other = groups[1 - q];
    for (const d of other) expect(c.instructions.indexOf(d)).toBeGreaterThan(at);
    // every instruction after its operands
    const seen = new Set<HloInstruction>();
    for (const i of c.instructions) {
      for (const o of i.operands) expect(seen.has(o), `${i.opcode} after its operand ${o.opcode}`).toBe(true);
      seen.add(i);
    }
    // the exported order is the one from before the move (the hoisted dots after the row fusion)
    const order = exportOrderOf(c);
    for (const d of g) expect(order.indexOf(d)).toBeGreaterThan(order.indexOf(row));
    // without windows nothing moves
    const sync = compiled(true, { asyncDotGroups: false }).module.entry;
    expect(dotGroupsOf(sync).map((x) => x.length)).toEqual([4]);
  });

  it('the executable starts the hoisted group before the row kernel when that kernel runs with its sums on the calling thread alone, not when it runs on threads', () => {
    setRowSumsOneThread(true);
    const on = compiled(true);
    const base = compiled(false);
    expect(on.stats.asyncGroups - base.stats.asyncGroups, 'the hoisted group is started').toBe(1);
    setRowSumsOneThread(false);
    try {
      const parallel = compiled(true);
      const rowSteps = parallel.stats.asyncGroups - compiled(false).stats.asyncGroups;
      // (without worker threads the row kernel is not parallel, and runs on the calling thread anyway)
      expect(rowSteps).toBe(backend.engine.shared ? 0 : 1);
    } finally {
      setRowSumsOneThread(true);
    }
  });

  it('gives the same bits with and without the move, with and without groups, on 1, 2 and 3 threads', () => {
    const run = (t: number, hoist: boolean, opts: { dotGroups?: boolean; asyncDotGroups?: boolean }): Uint32Array[] => {
      setNumThreads(t);
      setKernelThreads(t);
      const x = compiled(hoist, opts);
      x.call(ARGS);
      return x.call(ARGS).map(bits);
    };
    const want = run(1, false, { dotGroups: false });
    const same = (got: Uint32Array[]): number[] => got.map((v, k) => (v.length !== want[k].length ? -2 : v.findIndex((u, j) => u !== want[k][j])));
    const none = want.map(() => -1);
    const before = backend.engine.traffic.groupProducts;
    for (const t of [1, 2, 3]) {
      expect(same(run(t, true, { asyncDotGroups: true })), `hoisted, ${t} threads`).toEqual(none);
      expect(same(run(t, false, { asyncDotGroups: true })), `not hoisted, ${t} threads`).toEqual(none);
    }
    if (backend.engine.shared) expect(backend.engine.traffic.groupProducts - before, 'products run in group jobs').toBeGreaterThan(0);
    expect(() => setHoistDots(1 as unknown as boolean)).toThrow(/setHoistDots: on must be a boolean; got 1/);
  });
});
