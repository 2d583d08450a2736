// Dot groups (passes/dotGroups.ts): independent dots made adjacent and run with one core
// `evalDotsInto` call (one GEMM pool job). Checks which dots group (independent ones, never
// across an effect, never a dot with its consumer), that buffer assignment keeps the members'
// operands live to the group's end, and that a jitted gradient gives the same bits with and
// without the pass on 1 and 2 threads, through the group steps.
import { type Array, debug, grad, np, setNumThreads, systolic, toStorage, withBackend } from '@tpukit/core';
import { afterAll, describe, expect, it } from 'vitest';
import { assignBuffers, dotGroupsOf, type HloInstruction, jit, MAX_DOT_GROUP, setPipelineOptions } from '../src/internal';
import { fill, tinyTransformerLoss, tinyTransformerParams } from './tinyTransformer';

const bits = (a: Array): Uint32Array => new Uint32Array(Float32Array.from(toStorage(a) as Float32Array).buffer);
const dims = (i: HloInstruction): string => `${i.operands.map((o) => `[${o.shape.shape.join(',')}]`).join('x')}`;

/** The dot groups of `f`'s optimised module (and the module's instruction order). */
function groupsOf(f: (...a: Array[]) => unknown, args: Array[], opts = {}): { groups: readonly (readonly HloInstruction[])[]; order: HloInstruction[] } {
  const c = jit(f).lower(...args).compile(opts).module.entry;
  return { groups: dotGroupsOf(c), order: c.instructions };
}

describe('dot groups', () => {
  const threads = systolic.getNumThreads();
  afterAll(() => setNumThreads(threads));
  const x = fill([64, 32], 0.5, 1);
  const a = fill([32, 48], 0.5, 2);
  const b = fill([32, 40], 0.5, 3);
  const w = fill([32, 32], 0.5, 4);

  it('groups dots that share nothing but inputs, up to the limit, and records them adjacent', () => {
    const f = (x: Array, a: Array, b: Array, w: Array): Array[] => [np.matmul(x, a), np.matmul(x, b), np.matmul(x, w), np.matmul(np.transpose(x), x), np.matmul(x, np.transpose(w))];
    const { groups, order } = groupsOf(f, [x, a, b, w]);
    expect(groups.map((g) => g.length)).toEqual([MAX_DOT_GROUP]);
    // The fifth dot opens no group of its own (a group needs two).
    const at = groups[0].map((i) => order.indexOf(i));
    expect(at).toEqual([at[0], at[0] + 1, at[0] + 2, at[0] + 3]);
    expect(groups[0].map(dims)).toEqual(['[64,32]x[32,48]', '[64,32]x[32,40]', '[64,32]x[32,32]', '[64,32]x[64,32]']);
    expect(groupsOf(f, [x, a, b, w], { dotGroups: false }).groups).toEqual([]);
  });

  it('never groups a dot with one that reads it, nor across an effect', () => {
    expect(groupsOf((x: Array, a: Array, w: Array) => np.matmul(np.matmul(x, w), a), [x, a, w]).groups).toEqual([]);
    const withPrint = (x: Array, a: Array, b: Array): Array[] => {
      const p = np.matmul(x, a);
      debug.print('between {}', np.sum(x));
      return [p, np.matmul(x, b)];
    };
    expect(groupsOf(withPrint, [x, a, b]).groups).toEqual([]);
    // (the same without the print groups)
    expect(groupsOf((x: Array, a: Array, b: Array) => [np.matmul(x, a), np.matmul(x, b)], [x, a, b]).groups.length).toBe(1);
  });

  it('keeps every member operand live until the group ends (no member result takes its buffer)', () => {
    // dX and dW of two linear layers: the backward's pairs.
    const loss = (p: Record<string, Array>, x: Array): Array => np.sum(np.tanh(np.matmul(np.tanh(np.matmul(x, p.w1)), p.w2)));
    const p = { w1: fill([32, 64], 0.2, 5), w2: fill([64, 16], 0.2, 6) };
    const c = jit(grad(loss)).lower(p, x).compile().module.entry;
    const groups = dotGroupsOf(c);
    expect(groups.length).toBeGreaterThan(0);
    const ba = assignBuffers(c);
    for (const g of groups) {
      const end = c.instructions.indexOf(g[g.length - 1]);
      for (const m of g) for (const o of m.operands) if (ba.slots.has(o)) expect(ba.lastUse.get(o)!).toBeGreaterThanOrEqual(end);
      // no member's result overlaps another member's operand
      for (const m of g) {
        const s = ba.slots.get(m)!;
        for (const n of g) for (const o of n.operands) {
          const t = ba.slots.get(o);
          if (t && t.region === s.region) expect(s.offset >= t.offset + t.size || t.offset >= s.offset + s.size, `${dims(m)} over an operand of ${dims(n)}`).toBe(true);
        }
      }
    }
  });

  it('a jitted transformer SGD step gives the same bits with and without the groups, on 1 and 2 threads', () => {
    const d = { V: 128, D: 128, H: 4, F: 512, T: 128, B: 4 };
    const loss = tinyTransformerLoss(d, (x, g) => np.multiply(x, g));
    const params = tinyTransformerParams(d);
    const tokens = np.array(Int32Array.from({ length: d.B * d.T }, (_, i) => (i * 7) % d.V), 'int32').reshape([d.B, d.T]);
    const targets = np.array(Int32Array.from({ length: d.B * d.T }, (_, i) => (i * 5 + 3) % d.V), 'int32').reshape([d.B, d.T]);
    // (an update reads each gradient in a wasm kernel: the dots write into the arena, as in a training step)
    const step = (p: Record<string, Array>, tok: Array, tgt: Array): Record<string, Array> => {
      const g = grad(loss)(p, tok, tgt) as Record<string, Array>;
      return Object.fromEntries(Object.keys(p).map((k) => [k, np.subtract(p[k], np.multiply(g[k], 0.1))]));
    };
    const run = (on: boolean, t: number): Uint32Array[] =>
      withBackend('systolic', () => {
        setNumThreads(t);
        setPipelineOptions({ dotGroups: on });
        try {
          if (on) expect(dotGroupsOf(jit(step).lower(params, tokens, targets).compile().module.entry).length, 'groups in the module').toBeGreaterThan(0);
          const g = jit(step);
          g(params, tokens, targets); // (second call: the arena's steady state)
          const r = g(params, tokens, targets) as Record<string, Array>;
          return Object.keys(r).sort().map((k) => bits(r[k]));
        } finally {
          setPipelineOptions({});
        }
      });
    const want = run(false, 1);
    const before = systolic.backend.engine.traffic.groupProducts;
    for (const t of [1, 2]) expect(run(true, t)).toEqual(want);
    if (systolic.backend.engine.shared) expect(systolic.backend.engine.traffic.groupProducts, 'products run in group jobs').toBeGreaterThan(before);
  });

  it('TPUKIT_DOT_GROUPS takes 0 or 1 and throws on anything else', async () => {
    const { envDefaults } = await import('../src/internal');
    const saved = process.env.TPUKIT_DOT_GROUPS;
    try {
      process.env.TPUKIT_DOT_GROUPS = '0';
      expect(envDefaults().dotGroups).toBe(false);
      process.env.TPUKIT_DOT_GROUPS = '1';
      expect(envDefaults().dotGroups).toBeUndefined();
      process.env.TPUKIT_DOT_GROUPS = 'yes';
      expect(() => envDefaults()).toThrow(/TPUKIT_DOT_GROUPS must be 0 or 1; got "yes"/);
    } finally {
      if (saved === undefined) delete process.env.TPUKIT_DOT_GROUPS;
      else process.env.TPUKIT_DOT_GROUPS = saved;
    }
  });
});
