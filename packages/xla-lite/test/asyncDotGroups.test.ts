// Started dot groups (passes/dotGroups.ts windows, executable 'dots' + 'join' steps, core
// `StartedDots`): the column sums between a group's members that no member needs move to right
// after its last member; the group starts there and is joined after them, the calling thread
// computing the sums while the pool's workers claim the products. Checks which instructions move
// and which stay, that buffer assignment keeps the members' operands and results live through
// the window (no window kernel's buffer lies over them), and that a jitted step gives the same
// bits with the windows, without them and without groups, on 1, 2 and 3 threads.
import { type Array, np, registerBackend, setNumThreads, systolic, toStorage, withBackend } from '@tpukit/core';
import { afterAll, describe, expect, it } from 'vitest';
import { assignBuffers, dotGroupJoinsOf, dotGroupsOf, exportOrderOf, type HloComputation, type HloInstruction, jit, setPipelineOptions } from '../src/internal';
import { fill } from './tinyTransformer';

const bits = (a: Array): Uint32Array => new Uint32Array(Float32Array.from(toStorage(a) as Float32Array).buffer);
const isSum = (i: HloInstruction): boolean => i.opcode === 'fusion' && i.called[0].instructions.some((m) => m.opcode === 'reduce');

/**
 * The GPT backward's tail in small: weight gradients x^T dy_k (independent dots) with the bias
 * gradients sum(dy_k, 0) between them, each product read by a wasm kernel (an SGD update), so
 * the dots write into the arena and group.
 */
const step = (p: Record<string, Array>, x: Array, d1: Array, d2: Array, d3: Array): Record<string, Array> => {
  const upd = (w: Array, g: Array): Array => np.subtract(w, np.multiply(g, 0.01));
  // (traced in the backward's order: each weight gradient, then its bias gradient; the updates after all of them)
  const gs: Array[] = [];
  const sums: Array[] = [];
  const xt = np.tanh(x); // (in the arena too: the products read both operands in place, as the GPT's)
  for (const dy of [d1, d2, d3]) {
    const dy2 = np.tanh(dy); // (a wasm kernel's result: the dot reads it in place, and so does the sum)
    gs.push(np.matmul(np.transpose(xt), dy2));
    sums.push(np.sum(dy2, 0));
  }
  const out: Record<string, Array> = {};
  gs.forEach((g, k) => {
    out[`w${k}`] = upd(p[`w${k}`], g);
    out[`v${k}`] = np.multiply(g, g); // (two readers, as Adam's moments: no dot epilogue takes the product)
    out[`b${k}`] = upd(p[`b${k}`], sums[k]);
  });
  return out;
};
// (the GPT's weight-gradient shape, 128 x 128 over 2048 rows: large enough for the GEMM pool)
const P = { w0: fill([128, 128], 0.1, 1), w1: fill([128, 128], 0.1, 2), w2: fill([128, 128], 0.1, 3), b0: fill([128], 0.1, 4), b1: fill([128], 0.1, 5), b2: fill([128], 0.1, 6) };
const X = fill([2048, 128], 0.5, 7);
const D: [Array, Array, Array] = [fill([2048, 128], 0.5, 8), fill([2048, 128], 0.5, 9), fill([2048, 128], 0.5, 10)];

// (every compile here names the option, whatever the environment's default)
function compiled(opts: { asyncDotGroups?: boolean } = {}) {
  return jit(step).lower(P, X, ...D).compile({ asyncDotGroups: true, ...opts });
}

/** Positions of `g`'s members and of its window's instructions in `c`. */
function window(c: HloComputation, q: number): { last: number; end: number; inside: HloInstruction[] } {
  const g = dotGroupsOf(c)[q];
  const w = dotGroupJoinsOf(c)[q];
  const last = c.instructions.indexOf(g[g.length - 1]);
  const end = w ? c.instructions.indexOf(w) : last;
  return { last, end, inside: c.instructions.slice(last + 1, end + 1) };
}

describe('started dot groups (windows)', () => {
  const threads = systolic.getNumThreads();
  afterAll(() => {
    setNumThreads(threads);
    setPipelineOptions({});
  });

  it('move the column sums between the members that no member needs to right after the last member, and end the window before a reader of a member', () => {
    const c = compiled().module.entry;
    const groups = dotGroupsOf(c);
    expect(groups.length).toBe(1);
    expect(groups[0].length).toBe(3);
    const { last, end, inside } = window(c, 0);
    const first = c.instructions.indexOf(groups[0][0]);
    // no sum between the members any more; the three sums in the window
    expect(c.instructions.slice(first, last).filter(isSum)).toEqual([]);
    expect(inside.filter(isSum).length).toBe(3);
    expect(end).toBeGreaterThan(last);
    for (const i of inside) for (const o of i.operands) expect(groups[0].includes(o), `${i.opcode} in the window reads a member`).toBe(false);
    // without windows: the order is the pass's input order (the sums between the members)
    const off = compiled({ asyncDotGroups: false }).module.entry;
    expect(dotGroupJoinsOf(off)).toEqual([null]);
    const g = dotGroupsOf(off)[0];
    expect(off.instructions.slice(off.instructions.indexOf(g[0]), off.instructions.indexOf(g[g.length - 1])).filter(isSum).length).toBeGreaterThan(0);
  });

  it('leave the exported optimised module unchanged: its HLO text and StableHLO print the order from before the windows', () => {
    const on = compiled();
    const off = compiled({ asyncDotGroups: false });
    // (the executable's order differs: otherwise this test could not tell the two orders apart)
    const ids = (c: HloComputation): string => c.instructions.map((i) => i.opcode + ':' + i.shapes.map((s) => s.shape.join('x')).join()).join(' ');
    expect(ids(on.module.entry)).not.toEqual(ids(off.module.entry));
    // (instruction ids count on across compiles: each `name.id` renumbered by first appearance)
    const canon = (t: string): string => {
      const seen = new Map<string, number>();
      return t.replace(/([A-Za-z_][\w-]*)\.(\d+)/g, (m, n: string) => {
        if (!seen.has(m)) seen.set(m, seen.size);
        return `${n}.${seen.get(m)}`;
      });
    };
    expect(canon(on.asText())).toEqual(canon(off.asText()));
    expect(canon(on.asStableHlo())).toEqual(canon(off.asStableHlo()));
    // the recorded order holds the same instructions, each after its operands
    const order = exportOrderOf(on.module.entry);
    expect(new Set(order)).toEqual(new Set(on.module.entry.instructions));
    const seen = new Set<HloInstruction>();
    for (const i of order) {
      for (const o of i.operands) if (on.module.entry.instructions.includes(o)) expect(seen.has(o), `${i.opcode} after its operand ${o.opcode}`).toBe(true);
      seen.add(i);
    }
    // without windows the exporters print the computation's own order
    expect(exportOrderOf(off.module.entry)).toBe(off.module.entry.instructions);
  });

  it("keeps every member's operands and result live through the window: no window instruction's buffer lies over them", () => {
    const c = compiled().module.entry;
    const g = dotGroupsOf(c)[0];
    const { end, inside } = window(c, 0);
    const ba = assignBuffers(c);
    const overlaps = (a: { region: string; offset: number; size: number }, b: { region: string; offset: number; size: number }): boolean => a.region === b.region && a.offset < b.offset + b.size && b.offset < a.offset + a.size;
    const guarded = [...g, ...g.flatMap((m) => m.operands)].filter((v) => ba.slots.has(v));
    expect(guarded.length).toBeGreaterThan(0);
    for (const v of guarded) expect(ba.lastUse.get(v)!, `${v.opcode} live to the window's end`).toBeGreaterThanOrEqual(end);
    for (const i of inside) {
      const s = ba.slots.get(i);
      if (!s) continue;
      for (const v of guarded) expect(overlaps(s, ba.slots.get(v)!), `${i.opcode} in the window over ${v.opcode}`).toBe(false);
    }
  });

  it.each(['4x8', '5x8'] as const)('a jitted step gives the same bits with windows, without them and without groups, on 1, 2 and 3 threads; the group starts before its window (%s kernel)', (kernel) => {
    const backend = new systolic.SystolicBackend(`systolic-async-groups-${kernel}`, { gemmKernel: kernel });
    registerBackend(backend);
    const run = (opts: { dotGroups?: boolean; asyncDotGroups?: boolean }, t: number): Uint32Array[] =>
      withBackend(backend.name, () => {
        setNumThreads(t);
        setPipelineOptions(opts);
        try {
          const f = jit(step);
          f(P, X, ...D); // (second call: the arena's steady state)
          const r = f(P, X, ...D);
          return Object.keys(r).sort().map((k) => bits(r[k]));
        } finally {
          setPipelineOptions({});
        }
      });
    const want = run({ dotGroups: false }, 1);
    expect(withBackend(backend.name, () => compiled().stats.asyncGroups), 'groups started before a window').toBe(1);
    expect(withBackend(backend.name, () => compiled({ asyncDotGroups: false }).stats.asyncGroups)).toBe(0);
    expect(withBackend(backend.name, () => jit(step).lower(P, X, ...D).compile().stats.asyncGroups), 'on by default').toBe(process.env.TPUKIT_ASYNC_GROUPS === '0' ? 0 : 1);
    const before = backend.engine.traffic.groupProducts;
    // (the first differing element per output, -1 for none: a diff of whole arrays would take minutes to print)
    const same = (got: Uint32Array[]): number[] => got.map((g, k) => (g.length !== want[k].length ? -2 : g.findIndex((v, j) => v !== want[k][j])));
    const none = want.map(() => -1);
    for (const t of [1, 2, 3]) {
      expect(same(run({ asyncDotGroups: true }, t)), `windows, ${t} threads`).toEqual(none);
      expect(same(run({ asyncDotGroups: false }, t)), `no windows, ${t} threads`).toEqual(none);
    }
    if (backend.engine.shared) expect(backend.engine.traffic.groupProducts - before, 'products run in group jobs').toBeGreaterThan(0);
    expect(backend.engine.shape.mr).toBe(kernel === '5x8' ? 5 : 4);
    expect(backend.engine.groupStarted).toBe(false);
  });
});
