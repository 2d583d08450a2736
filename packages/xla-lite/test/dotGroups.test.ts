// Dot groups (passes/dotGroups.ts): independent dots recorded as groups (the order unchanged)
// and run with one core `evalDotsInto` call at the last member (one GEMM pool job). Checks which dots group (independent ones, never
// across an effect, never a dot with its consumer), that buffer assignment keeps the members'
// operands live to the group's end, and that a jitted gradient gives the same bits with and
// without the pass on 1 and 2 threads, through the group steps.
import { type Array, debug, grad, np, registerBackend, setNumThreads, systolic, toStorage, withBackend } from '@tpukit/core';
import { afterAll, describe, expect, it } from 'vitest';
import { assignBuffers, DOT_GROUP_LIMIT, dotGroupsOf, type HloInstruction, jit, MAX_DOT_GROUP, setPipelineOptions } from '../src/internal';
import { fill } from './tinyTransformer';

const bits = (a: Array): Uint32Array => new Uint32Array(Float32Array.from(toStorage(a) as Float32Array).buffer);
const dims = (i: HloInstruction): string => `${i.operands.map((o) => `[${o.shape.shape.join(',')}]`).join('x')}`;

/**
 * A registered systolic backend whose GEMM engine runs micro-kernel `kernel` whatever the
 * environment picks (`gemmKernel`). With 5 x 8 (MR
 * 5) the test's M = 512 is no multiple of MR, so A's last row panel is partial.
 */
function systolicWith(kernel: '4x8' | '5x8'): InstanceType<typeof systolic.SystolicBackend> {
  const backend = new systolic.SystolicBackend(`systolic-dot-groups-${kernel}`, { gemmKernel: kernel });
  registerBackend(backend);
  return backend;
}

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

  it('groups dots that share nothing but inputs, up to the limit, and leaves the order as it is', () => {
    const f = (x: Array, a: Array, b: Array, w: Array): Array[] => [np.matmul(x, a), np.matmul(x, b), np.matmul(x, w), np.matmul(np.transpose(x), x), np.matmul(x, np.transpose(w)), np.matmul(np.transpose(a), np.transpose(x)), np.matmul(np.transpose(b), np.transpose(x))];
    const { groups, order } = groupsOf(f, [x, a, b, w]);
    expect(MAX_DOT_GROUP).toBe(6);
    // The seven dots in order, in groups of the limit in force (6, or env TPUKIT_DOT_GROUP_MAX);
    // a last dot alone opens no group (a group needs two): with 6, the seventh.
    const all = ['[64,32]x[32,48]', '[64,32]x[32,40]', '[64,32]x[32,32]', '[64,32]x[64,32]', '[64,32]x[32,32]', '[32,48]x[64,32]', '[32,40]x[64,32]'];
    const want: string[][] = [];
    for (let i = 0; i < all.length; i += DOT_GROUP_LIMIT) if (all.length - i >= 2) want.push(all.slice(i, i + DOT_GROUP_LIMIT));
    expect(groups.map((g) => g.map(dims))).toEqual(want);
    if (DOT_GROUP_LIMIT === MAX_DOT_GROUP) expect(groups.map((g) => g.length)).toEqual([6]);
    const off = groupsOf(f, [x, a, b, w], { dotGroups: false });
    expect(off.groups).toEqual([]);
    expect(order.map((i) => i.opcode)).toEqual(off.order.map((i) => i.opcode));
  });

  it('ends a group before an instruction that reads a member', () => {
    // y = x a is read by the next dot: the dots before it group, the reader does not join them
    const f = (x: Array, a: Array, b: Array, w: Array): Array[] => {
      const y = np.matmul(x, w);
      const z = np.matmul(x, a);
      return [np.matmul(y, b), z, np.matmul(x, b)];
    };
    const { groups } = groupsOf(f, [x, a, b, w]);
    expect(groups.length).toBeGreaterThan(0);
    for (const g of groups) for (const m of g) for (const o of m.operands) expect(g.includes(o)).toBe(false);
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

  it.each(['4x8', '5x8'] as const)('a jitted SGD step of two projections gives the same bits with and without the groups, on 1 and 2 threads (%s kernel)', (kernel) => {
    const backend = systolicWith(kernel);
    const name = backend.name;
    // Two projections of one input (as q / k / v): the forward's x w1 and x w2 group (the
    // backward's x^T z2 reads the second, and x^T z1 the first: a group of its own would run
    // the first after its reader); the update reads every gradient in a wasm kernel and the
    // dots read the projections in place, so the dots write into the arena, as in a training step.
    const loss = (p: Record<string, Array>, x: Array): Array => {
      const h = np.tanh(x); // (a wasm kernel's result: the projections read it in place from the arena)
      return np.sum(np.multiply(np.matmul(h, p.w1), np.matmul(h, p.w2)));
    };
    const step = (p: Record<string, Array>, x: Array): Record<string, Array> => {
      const g = grad(loss)(p, x) as Record<string, Array>;
      return { w1: np.subtract(p.w1, np.multiply(g.w1, 0.01)), w2: np.subtract(p.w2, np.multiply(g.w2, 0.01)) };
    };
    const params = { w1: fill([128, 256], 0.1, 7), w2: fill([128, 256], 0.1, 8) };
    const xs = fill([512, 128], 0.5, 9);
    const run = (on: boolean, t: number): Uint32Array[] =>
      withBackend(name, () => {
        setNumThreads(t);
        setPipelineOptions({ dotGroups: on });
        try {
          if (on) expect(dotGroupsOf(jit(step).lower(params, xs).compile().module.entry).map((g) => g.map(dims))).toEqual([['[512,128]x[128,256]', '[512,128]x[128,256]']]);
          const g = jit(step);
          g(params, xs); // (second call: the arena's steady state)
          const r = g(params, xs);
          return [bits(r.w1), bits(r.w2)];
        } finally {
          setPipelineOptions({});
        }
      });
    const want = run(false, 1);
    const before = backend.engine.traffic.groupProducts;
    for (const t of [1, 2]) expect(run(true, t)).toEqual(want);
    if (backend.engine.shared) expect(backend.engine.traffic.groupProducts - before, 'products run in group jobs').toBeGreaterThan(0);
    // (the engine this ran on: the one with the kernel named)
    expect(backend.engine.shape.mr).toBe(kernel === '5x8' ? 5 : 4);
  });

  it('the README example (pipeline step 5d) groups both projections', () => {
    const x = np.ones([2048, 128]);
    const wq = np.ones([128, 128]);
    const wk = np.ones([128, 128]);
    const proj = (x: Array, wq: Array, wk: Array): Array[] => [np.matmul(x, wq), np.matmul(x, wk)];
    expect(jit(proj).lower(x, wq, wk).compile().passStats.dotGroups).toBe(2);
    expect(jit(proj).lower(x, wq, wk).compile({ dotGroups: false }).passStats.dotGroups).toBe(0);
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
