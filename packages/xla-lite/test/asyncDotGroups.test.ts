// Started dot groups (passes/dotGroups.ts windows, executable 'dots' + 'join' steps, core
// `StartedDots`): the column sums between a group's members that no member needs move to right
// after its last member; the group starts there and is joined after them, the calling thread
// computing the sums while the pool's workers claim the products. Checks which instructions move
// and which stay, that buffer assignment keeps the members' operands and results live through
// the window (no window kernel's buffer lies over them, in the arena the program lays out with its
// own options), also when the window's last kernel is the last reader of a member's operand (a
// loop that could write over it in place), that a jitted step gives the same bits with the
// windows, without them and without groups, on 1, 2 and 3 threads, and that a window kernel that
// throws still joins the started group.
import { type Array, np, registerBackend, setNumThreads, systolic, toStorage, withBackend } from '@tpukit/core';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { assignBuffers, type BufferAssignment, dotGroupJoinsOf, dotGroupsOf, exportOrderOf, type HloComputation, type HloInstruction, jit, setPipelineOptions } from '../src/internal';
import { WasmProgram } from '../src/wasm/program';
import { fill } from './tinyTransformer';

// Every call of buffer assignment recorded (it runs as before): the tests read the arena's
// layout the program itself computed (`arenaOf`), with its own options, not a copy of them.
vi.mock('../src/passes/bufferAssignment', async (importOriginal) => {
  const m = await importOriginal<typeof import('../src/passes/bufferAssignment')>();
  return { ...m, assignBuffers: vi.fn(m.assignBuffers) };
});

/** The buffer assignment `WasmProgram.build` laid out the arena of computation `c` with (the call passing `materialises`: the program's). */
function arenaOf(c: HloComputation): BufferAssignment {
  const spy = vi.mocked(assignBuffers);
  let k = spy.mock.calls.length - 1;
  while (k >= 0 && !(spy.mock.calls[k][0] === c && spy.mock.calls[k][2]?.materialises !== undefined)) k--;
  expect(k, 'the program laid out its arena with buffer assignment').toBeGreaterThanOrEqual(0);
  return spy.mock.results[k].value as BufferAssignment;
}

type Slot = { region: string; offset: number; size: number };
const overlaps = (a: Slot, b: Slot): boolean => a.region === b.region && a.offset < b.offset + b.size && b.offset < a.offset + a.size;

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

/**
 * A window whose last kernel is the last reader of a member's operand: a = tanh(d1) is read by the
 * first weight gradient and by the loop 2a, traced between the two dots, which the pass moves into
 * the window after the second. A loop may write its result over an operand that dies at it (in
 * place): over a, while the group's products read it (at one thread the group runs at the join,
 * after the loop). Loop and products small enough to run on the calling thread alone (the
 * window's kernels must), the products large enough for a group job of the GEMM pool.
 */
const lastReader = (x: Array, d1: Array, d2: Array): Array[] => {
  const xt = np.tanh(x);
  const a = np.tanh(d1);
  const b = np.tanh(d2);
  const g1 = np.matmul(np.transpose(xt), a);
  const twice = np.multiply(a, 2);
  const g2 = np.matmul(np.transpose(xt), b);
  // (each product read twice: no dot epilogue takes it)
  return [np.subtract(g1, 1), np.multiply(g1, g1), np.subtract(g2, 1), np.multiply(g2, g2), twice];
};
const LR: [Array, Array, Array] = [fill([2048, 128], 0.5, 11), fill([2048, 64], 0.5, 12), fill([2048, 64], 0.5, 13)];

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

  it("keeps every member's operands and result live past the window (the program's arena): no window instruction's buffer lies over them", () => {
    const c = compiled().module.entry;
    const g = dotGroupsOf(c)[0];
    const { end, inside } = window(c, 0);
    const ba = arenaOf(c);
    const guarded = [...g, ...g.flatMap((m) => m.operands)].filter((v) => ba.slots.has(v));
    // (the members write into the arena, and the operand tanh(x) lies there: the products read it in place)
    expect(guarded.filter((v) => g.includes(v)).length).toBe(g.length);
    expect(guarded.length).toBeGreaterThan(g.length);
    // (live until the join, which comes right after the window's last instruction)
    for (const v of guarded) expect(ba.lastUse.get(v)!, `${v.opcode} live past the window's end`).toBeGreaterThan(end);
    for (const i of inside) {
      const s = ba.slots.get(i);
      if (!s) continue;
      for (const v of guarded) expect(overlaps(s, ba.slots.get(v)!), `${i.opcode} in the window over ${v.opcode}`).toBe(false);
    }
  });

  it("a window's last kernel that is the last reader of a member's operand (a loop, which could take its buffer in place) leaves that operand live past the join: the same bits on 1, 2 and 3 threads", () => {
    const backend = new systolic.SystolicBackend('systolic-async-last-reader');
    registerBackend(backend);
    withBackend(backend.name, () => {
      const lowered = jit(lastReader).lower(...LR);
      const comp = lowered.compile({ asyncDotGroups: true });
      const c = comp.module.entry;
      const [g] = dotGroupsOf(c);
      expect(g.length).toBe(2);
      const { end } = window(c, 0);
      const loop = c.instructions[end];
      expect(loop.opcode === 'fusion' && (loop.params as { kind: string }).kind).toBe('kLoop');
      // the loop reads a (the first member's operand) and is its last reader: a dies at it
      const a = g[0].operands.find((o) => loop.operands.includes(o))!;
      expect(a, "the window's loop reads a member's operand").toBeDefined();
      expect(c.instructions.slice(end + 1).some((i) => i.operands.includes(a)), 'nothing after the loop reads it').toBe(false);
      expect(comp.stats.asyncGroups, 'the group is started before the loop and joined after it').toBe(1);
      const ba = arenaOf(c);
      expect(ba.lastUse.get(a)!, 'a live past the window (the join)').toBeGreaterThan(end);
      for (const v of [a, ...g]) expect(overlaps(ba.slots.get(loop)!, ba.slots.get(v)!), `the loop's buffer over ${v === a ? 'a' : 'a member'}`).toBe(false);
      // The bits: the products read a at the join (1 thread) or meanwhile (2, 3), against no groups on 1 thread.
      const args = [...lowered.jaxpr.consts, ...LR];
      const run = (t: number, opts: { dotGroups?: boolean; asyncDotGroups?: boolean }): Uint32Array[] => {
        setNumThreads(t);
        const x = jit(lastReader).lower(...LR).compile(opts);
        x.call(args);
        return x.call(args).map(bits);
      };
      const want = run(1, { dotGroups: false });
      const before = backend.engine.traffic.groupProducts;
      for (const t of [1, 2, 3]) expect(run(t, { asyncDotGroups: true }).map((v, k) => v.findIndex((u, j) => u !== want[k][j])), `${t} threads`).toEqual(want.map(() => -1));
      if (backend.engine.shared) expect(backend.engine.traffic.groupProducts - before, 'products run in group jobs').toBeGreaterThan(0);
    });
  });

  it('a window kernel that throws still joins the started group (no group left started): the next call runs, with the same bits, on 1, 2 and 3 threads', () => {
    const backend = new systolic.SystolicBackend('systolic-async-throw');
    registerBackend(backend);
    withBackend(backend.name, () => {
      const lowered = jit(lastReader).lower(...LR);
      const args = [...lowered.jaxpr.consts, ...LR];
      setNumThreads(1);
      const want = lowered.compile({ dotGroups: false }).call(args).map(bits);
      for (const t of [1, 2, 3]) {
        setNumThreads(t);
        const comp = lowered.compile({ asyncDotGroups: true });
        expect(comp.stats.asyncGroups).toBe(1);
        comp.call(args); // (the arena's steady state)
        const { inside } = window(comp.module.entry, 0);
        // The window's kernel throws once (after the 'dots' step started the group).
        let thrown = 0;
        let started = false;
        const run = WasmProgram.prototype.run;
        const fail = vi.spyOn(WasmProgram.prototype, 'run').mockImplementation(function (this: WasmProgram, ...a: Parameters<WasmProgram['run']>) {
          if (thrown === 0 && inside.includes(a[0].out.inst)) {
            thrown++;
            started = backend.engine.groupStarted;
            throw new Error('injected window kernel failure');
          }
          return run.apply(this, a);
        });
        try {
          expect(() => comp.call(args)).toThrow('injected window kernel failure');
        } finally {
          fail.mockRestore();
        }
        expect(thrown).toBe(1);
        if (t > 1 && backend.engine.shared) expect(started, `${t} threads: the group ran on the pool when the kernel threw`).toBe(true);
        expect(backend.engine.groupStarted, `${t} threads: no group left started`).toBe(false);
        expect(comp.call(args).map(bits).map((v, k) => v.findIndex((u, j) => u !== want[k][j])), `${t} threads: the next call`).toEqual(want.map(() => -1));
      }
    });
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
