/**
 * Groups of independent products (`GemmEngine.beginGroup`, threads.ts `runGroup`, core's
 * `evalDotsInto`): products deferred in a group run as one pool job, each thread claiming whole
 * products, largest first, then sharing what is left. It changes speed only: the law compares
 * every group, bit for bit, with its products run one by one on one thread, over 2-6 random products (transposed operands, both
 * storage dtypes, K around the K-block edge of 256), 1, 2 and 3 threads; groups whose products' A
 * end in a partial row panel (the 5 x 8 kernel on the GPT's shapes); then with the worker
 * held (the calling thread computes every unit), with the workers computing every unit, with a
 * worker released late, and with a failing worker; the claims themselves (counter, switch and
 * largest-first order) through `poolTestHooks.groupEnd`. A started group (`StartedDots`): the
 * systolic backend refuses any product, new group, reservation or primitive until the join, each
 * naming what was asked, and runs them all after it; a failed announcement (the pool's
 * `openJob` or `wake` throwing) leaves no started group behind.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { Array as TArray } from '../../array';
import { aval } from '../../aval';
import { bf16, systolic } from '../../index';
import { evalDotsInto, StartedDots } from '../../dotGroup';
import { np } from '../../index';
import { attentionFwdP } from '../../lax/attention';
import { dotGeneralP } from '../../lax/dot';
import { transposeP } from '../../lax/structural';
import { evalPrimitiveInto, evalPrimitiveIntoAll } from '../../trace';
import { WorkerPool } from '../../wasm/workerPool';
import { type GroupClaims, groupJobSettings, groupsBefore, poolTestHooks } from './threads';
import type { ParallelJob } from './gemmEngine';
import type { GemmEngine } from './gemmEngine';
import { mxuDotGeneral } from './mxuDot';
import { backend5x8, data, engineMemory, holdAll, lateJoins } from '../../../test/systolicEngines';

interface Dot {
  M: number;
  K: number;
  N: number;
  /** lhs stored [K, M] ('rc') rather than [M, K]; rhs [K, N] rather than [N, K]. */
  lhsT: boolean;
  rhsT: boolean;
  dtype: 'float32' | 'bfloat16';
}

const dotArb = fc.record({
  M: fc.constantFrom(64, 128, 256, 260),
  K: fc.constantFrom(128, 256, 260, 512, 1024),
  N: fc.constantFrom(64, 128, 136, 256),
  lhsT: fc.boolean(),
  rhsT: fc.boolean(),
  dtype: fc.constantFrom('float32' as const, 'bfloat16' as const),
});

/** The GPT step's pairs and triples: dX with dW of a linear layer, and three [2048,128] x [128,128] projections. */
const GPT_PAIR: Dot[] = [
  { M: 2048, K: 512, N: 128, lhsT: false, rhsT: false, dtype: 'float32' }, // dX = dY W^T ('kc' A)
  { M: 512, K: 2048, N: 128, lhsT: true, rhsT: true, dtype: 'float32' }, // dW = X^T dY (K-blocked)
];
const GPT_QKV: Dot[] = [0, 1, 2].map(() => ({ M: 2048, K: 128, N: 128, lhsT: false, rhsT: true, dtype: 'float32' as const }));

/**
 * The 5 x 8 kernel's groups (MR 5): the GPT's M = 2048, 512 and 128 are no multiples of 5, so
 * every product's A ends in a partial row panel (row-block and K-blocked products alike); with
 * M = 132 and M = 4 < MR (a K-blocked product of one partial panel).
 */
const PARTIAL_5X8: Dot[][] = [
  GPT_PAIR,
  GPT_QKV,
  [{ M: 128, K: 2048, N: 512, lhsT: true, rhsT: true, dtype: 'float32' }, { M: 512, K: 128, N: 512, lhsT: false, rhsT: false, dtype: 'bfloat16' }],
  [{ M: 132, K: 600, N: 64, lhsT: false, rhsT: true, dtype: 'float32' }, { M: 132, K: 600, N: 136, lhsT: true, rhsT: true, dtype: 'bfloat16' }, { M: 4, K: 2048, N: 512, lhsT: true, rhsT: true, dtype: 'float32' }],
];

// A backend whose engine runs the 5 x 8 micro-kernel (MR 5, MC 130).
const backend5 = backend5x8('systolic-dot-group-test-5x8');

function engineWith(threads: number, k5x8 = false): GemmEngine {
  systolic.setNumThreads(threads);
  return (k5x8 ? backend5 : systolic.backend).engine;
}

const params = (d: Dot) => ({ dimensionNumbers: [[[d.lhsT ? 0 : 1], [d.rhsT ? 0 : 1]], [[], []]] as [[number[], number[]], [number[], number[]]], precision: null, preferredElementType: null });

/**
 * Runs `dots` one by one on one thread (the reference), then as a group on `threads` threads
 * (`during` right before the group's products), operands and destinations in the engine's
 * memory; expects the same bits and returns the products the pool ran in group jobs.
 */
function check(dots: readonly Dot[], threads: number, seed: number, during?: () => void, k5x8 = false, started?: (e: GemmEngine) => void): number {
  const e = engineWith(1, k5x8);
  const { inMemory, releaseAll } = engineMemory(e);
  try {
    const ops = dots.map((d, i) => {
      const store = (x: Float32Array): Float32Array | Uint16Array => (d.dtype === 'bfloat16' ? bf16.encode(x) : x);
      const lhs = { data: inMemory(store(data(d.M * d.K, seed + 2 * i))), shape: d.lhsT ? [d.K, d.M] : [d.M, d.K], dtype: d.dtype };
      const rhs = { data: inMemory(store(data(d.K * d.N, seed + 2 * i + 1))), shape: d.rhsT ? [d.K, d.N] : [d.N, d.K], dtype: d.dtype };
      return { lhs, rhs, into: inMemory(new Float32Array(d.M * d.N)) };
    });
    const run = (t: number, group: boolean): Uint32Array[] => {
      const eng = engineWith(t, k5x8);
      eng.f32.fill(Number.NaN, eng.floor / 4); // poisoned scratch: nothing packed before may reach a result
      for (const o of ops) o.into.fill(Number.NaN);
      if (group) during?.();
      const open = group && eng.beginGroup();
      let ok = false;
      try {
        dots.forEach((d, i) => mxuDotGeneral(eng, ops[i].lhs, ops[i].rhs, params(d), aval([d.M, d.N], 'float32'), { flushSubnormals: false }, ops[i].into));
        ok = true;
      } finally {
        if (open && started && ok) {
          // Started, not run: the calling thread does `started` meanwhile, then joins.
          const running = eng.startGroup();
          try {
            if (running) started(eng);
          } finally {
            eng.joinGroup();
          }
        } else if (open) eng.endGroup(ok);
      }
      return ops.map((o) => new Uint32Array(o.into.slice().buffer));
    };
    const want = run(1, false);
    const before = e.traffic.groupProducts;
    const got = run(threads, true);
    for (let i = 0; i < dots.length; i++) expect(got[i].findIndex((x, j) => x !== want[i][j]), `product ${i}`).toBe(-1);
    return e.traffic.groupProducts - before;
  } finally {
    releaseAll();
  }
}

const shared = systolic.backend.engine.shared;

describe('systolic threads: groups of independent products', () => {
  const before = systolic.getNumThreads();
  afterAll(() => systolic.setNumThreads(before));

  it.runIf(shared)("give the products' one-by-one bits on 1, 2 and 3 threads", () => {
    let grouped = 0;
    fc.assert(
      fc.property(fc.array(dotArb, { minLength: 2, maxLength: 6 }), fc.constantFrom(1, 2, 3), fc.integer({ min: 0, max: 1000 }), (dots, threads, seed) => {
        const n = check(dots, threads, seed);
        if (threads === 1) expect(n).toBe(0);
        grouped += n;
      }),
      { numRuns: 25, endOnFailure: true },
    );
    expect(grouped).toBeGreaterThan(0);
    // The GPT's groups: both products of a pair, all three projections, in one job each.
    expect(check(GPT_PAIR, 2, 1)).toBe(2);
    expect(check(GPT_QKV, 2, 2)).toBe(3);
    expect(check(GPT_QKV, 3, 3)).toBe(3);
  });

  it.runIf(shared)("take products whose A ends in a partial row panel (the 5 x 8 kernel), with their one-by-one bits, on the calling thread and on workers", () => {
    expect(engineWith(1, true).shape.mr).toBe(5);
    PARTIAL_5X8.forEach((dots, i) => expect(check(dots, 2, 30 + i, undefined, true), `group ${i}`).toBe(dots.length));
    expect(check(GPT_QKV, 3, 40, undefined, true)).toBe(3);
    poolTestHooks.callerComputes = false;
    try {
      PARTIAL_5X8.forEach((dots, i) => expect(check(dots, 2, 50 + i, undefined, true), `group ${i}, workers`).toBe(dots.length));
    } finally {
      poolTestHooks.callerComputes = true;
    }
  });

  it.runIf(shared)('the calling thread finishes alone when the worker has not joined; a worker let go late changes no bit', () => {
    check(GPT_PAIR, 2, 4); // (the worker is started)
    const held = holdAll();
    try {
      expect(check(GPT_PAIR, 2, 5)).toBe(2);
      expect(Atomics.load(held.hold, 0), 'the calling thread waited for the held worker').toBe(1);
    } finally {
      held.release();
    }
    // Let go ~2 ms into the group (a few attempts: a loaded machine may deschedule either thread):
    // the worker then joins with units left, and in some attempt computes some of them.
    const joined = lateJoins((start, attempt) => expect(check(GPT_PAIR, 2, 6 + attempt, start)).toBe(2));
    expect(joined, 'the released worker computed some units in one of 20 attempts').toBeGreaterThan(0);
  });

  it.runIf(shared)("the workers' own path: every unit of every product computed by workers", () => {
    poolTestHooks.callerComputes = false;
    try {
      expect(check(GPT_PAIR, 2, 7)).toBe(2);
      expect(check(GPT_QKV, 3, 8)).toBe(3);
      expect(check([GPT_PAIR[1], { M: 260, K: 260, N: 136, lhsT: false, rhsT: false, dtype: 'bfloat16' }], 2, 9)).toBe(2);
    } finally {
      poolTestHooks.callerComputes = true;
    }
  });

  it.runIf(shared)('a worker that fails makes the group throw, naming the operation; the next group runs as before', () => {
    poolTestHooks.callerComputes = false;
    poolTestHooks.breakWorkers = true;
    try {
      expect(() => check(GPT_PAIR, 2, 10)).toThrow(/dot_general: a systolic worker thread failed/);
    } finally {
      poolTestHooks.callerComputes = true;
      poolTestHooks.breakWorkers = false;
    }
    expect(check(GPT_PAIR, 2, 11)).toBe(2);
  });

  it.runIf(shared)('a group started (startGroup) while the calling thread works, then joined, gives the one-by-one bits; products and reservations meanwhile throw', () => {
    // The calling thread's own work while the workers claim the products: a column sum over a
    // host array (as xla-lite's window kernels do), and an attempt at a product, a new group and
    // a reservation on the engine, each refused with an error naming what was asked.
    const x = data(2048 * 128, 99);
    const sums = new Float32Array(128);
    let refused = 0;
    const between = (e: GemmEngine): void => {
      expect(e.groupStarted).toBe(true);
      for (let r = 0; r < 2048; r++) for (let j = 0; j < 128; j++) sums[j] += x[r * 128 + j];
      const d = GPT_QKV[0];
      const a = { data: new Float32Array(d.M * d.K), shape: [d.M, d.K], dtype: 'float32' as const };
      const b = { data: new Float32Array(d.K * d.N), shape: [d.N, d.K], dtype: 'float32' as const };
      expect(() => mxuDotGeneral(e, a, b, params({ ...d, rhsT: false }), aval([d.M, d.N], 'float32'), { flushSubnormals: false })).toThrow(/dot_general group: .* asked for while a started group of products runs .*joinGroup first/);
      expect(() => e.beginGroup()).toThrow(/a new group asked for while a started group/);
      expect(() => e.reserve(1024)).toThrow(/a reservation of 1024 bytes asked for while a started group/);
      // (the pool itself refuses another job too, whatever reaches it)
      expect(() => e.parallel!({} as never)).toThrow(/a product job asked for while a started group of products runs on this pool/);
      expect(() => e.parallelBatch!({} as never)).toThrow(/a batch job asked for while a started group of products runs on this pool/);
      refused++;
    };
    for (const threads of [2, 3]) {
      expect(check(GPT_PAIR, threads, 60 + threads, undefined, false, between)).toBe(2);
      expect(check(GPT_QKV, threads, 70 + threads, undefined, true, between)).toBe(3);
    }
    expect(refused).toBe(4);
    expect(systolic.backend.engine.groupStarted).toBe(false);
    // The workers' own path (the calling thread joins with every unit taken), and one thread (nothing starts: the group runs at once).
    poolTestHooks.callerComputes = false;
    try {
      expect(check(GPT_PAIR, 2, 80, undefined, false, between)).toBe(2);
    } finally {
      poolTestHooks.callerComputes = true;
    }
    expect(check(GPT_PAIR, 1, 81, undefined, false, between)).toBe(0);
  });

  it.runIf(shared)('threads claim whole products largest first, or walk them in order with the claims off: the same bits either way, up to six products in one job', () => {
    // The GPT's weight-gradient groups (dW q, dW k, dW up, dW down: work 1 : 1 : 4 : 4, all
    // K-blocked; six of them at the end of its backward), its attention backward's group of five
    // (dX, dW, dX, dW, dX: row-block and K-blocked products of the same work), and a group mixing shapes.
    const dW = (M: number, N: number): Dot => ({ M, K: 2048, N, lhsT: true, rhsT: true, dtype: 'float32' });
    const groups: Dot[][] = [
      [dW(128, 128), dW(128, 128), dW(128, 512), dW(512, 128)],
      [dW(128, 128), dW(128, 128), dW(128, 512), dW(512, 128), dW(128, 128), dW(256, 128)],
      [GPT_QKV[0], dW(128, 128), GPT_QKV[1], dW(128, 128), GPT_QKV[2]],
      [GPT_QKV[0], dW(128, 128), GPT_QKV[1], GPT_PAIR[0]],
    ];
    const was = groupJobSettings.claim;
    try {
      for (const claim of [true, false]) {
        groupJobSettings.claim = claim;
        groups.forEach((dots, i) => {
          for (const k5x8 of [false, true]) {
            const jobs = engineWith(2, k5x8).traffic.groupJobs;
            expect(check(dots, 2, 60 + i, undefined, k5x8), `group ${i}, claim ${claim}, 5x8 ${k5x8}`).toBe(dots.length);
            expect(engineWith(2, k5x8).traffic.groupJobs - jobs, `group ${i}: one job`).toBe(1);
          }
          expect(check(dots, 3, 62 + i), `group ${i}, claim ${claim}, 3 threads`).toBe(dots.length);
        });
        poolTestHooks.callerComputes = false;
        try {
          groups.forEach((dots, i) => expect(check(dots, 2, 64 + i, undefined, true), `group ${i}, claim ${claim}, workers`).toBe(dots.length));
        } finally {
          poolTestHooks.callerComputes = true;
        }
      }
    } finally {
      groupJobSettings.claim = was;
    }
  });

  it.runIf(shared)('the calling thread alone claims every product of each group job once, largest first (the claim counter restarts per job)', () => {
    const dW = (M: number, N: number): Dot => ({ M, K: 2048, N, lhsT: true, rhsT: true, dtype: 'float32' });
    // (given smallest first; B's two largest have the same work, the K-blocked one claimed first)
    const groupA = [dW(128, 128), GPT_QKV[0], dW(512, 128), dW(128, 512)];
    const groupB = [GPT_PAIR[0], dW(128, 128), GPT_PAIR[1]];
    const was = groupJobSettings.claim;
    groupJobSettings.claim = true;
    check(GPT_PAIR, 2, 70); // (the worker is started)
    const claims: GroupClaims[] = [];
    poolTestHooks.groupEnd = (g) => claims.push(g);
    const held = holdAll();
    try {
      // Two group jobs back to back, the worker held: the calling thread runs each alone.
      expect(check(groupA, 2, 71)).toBe(4);
      expect(check(groupB, 2, 72)).toBe(3);
      expect(Atomics.load(held.hold, 0), 'the worker stayed held').toBe(1);
    } finally {
      held.release();
      poolTestHooks.groupEnd = null;
      groupJobSettings.claim = was;
    }
    expect(claims.map((g) => g.products)).toEqual([4, 3]);
    for (const [i, g] of claims.entries()) {
      expect(g.claim, `job ${i}: the claim switch`).toBe(true);
      // n products claimed, then one claim that found none left.
      expect(g.claimed, `job ${i}: the claim counter`).toBe(g.products + 1);
      for (let r = 1; r < g.work.length; r++) expect(g.work[r], `job ${i}: region ${r} after ${r - 1} (${g.work.join(', ')})`).toBeLessThanOrEqual(g.work[r - 1]);
    }
    // (the orders really differ from the given ones)
    expect(claims[0].work[0]).toBeGreaterThan(claims[0].work[3]);
  });

  it("orders a group's products for claiming: more multiply-adds first, a K-blocked product before a row-block one of the same work", () => {
    const job = (mp: number, np: number, kp: number, kBlocked: boolean): ParallelJob => ({ args: { ap: 0, bp: 0, cp: 0, mp, np, kp }, ...(kBlocked ? { kBlocks: {} } : {}) }) as unknown as ParallelJob;
    expect(groupsBefore(job(512, 128, 2048, true), job(128, 128, 2048, true))).toBe(true);
    expect(groupsBefore(job(128, 128, 2048, true), job(512, 128, 2048, true))).toBe(false);
    expect(groupsBefore(job(128, 128, 2048, true), job(2048, 128, 128, false))).toBe(true);
    expect(groupsBefore(job(2048, 128, 128, false), job(128, 128, 2048, true))).toBe(false);
    expect(groupsBefore(job(128, 128, 2048, true), job(128, 128, 2048, true))).toBe(false);
  });
});

describe('StartedDots (evalDotsInto in two halves)', () => {
  it.runIf(shared)('start, work on the calling thread, join: evalDotsInto\'s bits on 1, 2 and 3 threads, the products started on the pool at 2 and 3; a second start before the join, or a join without a start, throws', () => {
    const dots = [...GPT_PAIR, GPT_QKV[0]];
    const e = engineWith(1);
    const { inMemory, releaseAll } = engineMemory(e);
    try {
      const args = dots.map((d, i) => [new TArray(aval(d.lhsT ? [d.K, d.M] : [d.M, d.K], 'float32'), systolic.backend, inMemory(data(d.M * d.K, 200 + 2 * i))), new TArray(aval(d.rhsT ? [d.K, d.N] : [d.N, d.K], 'float32'), systolic.backend, inMemory(data(d.K * d.N, 201 + 2 * i)))]);
      const outs = dots.map((d) => inMemory(new Float32Array(d.M * d.N)));
      const list = dots.map((d, i) => ({ args: args[i], params: params(d), out: outs[i] }));
      const want = (evalDotsInto(list) as TArray[]).map((r) => new Uint32Array((r.dataSync() as Float32Array).slice().buffer));
      const g = new StartedDots();
      for (const threads of [1, 2, 3]) {
        engineWith(threads);
        for (const o of outs) o.fill(Number.NaN);
        const before = e.traffic.groupProducts;
        g.start(list);
        expect(g.pending).toBe(true);
        expect(() => g.start(list)).toThrow(/StartedDots.start: this group was started already and not joined/);
        // (the calling thread's own work meanwhile, as xla-lite's window kernels)
        let s = 0;
        for (let k = 0; k < 1 << 16; k++) s += Math.sqrt(k);
        expect(s).toBeGreaterThan(0);
        const rs = g.join();
        expect(g.pending).toBe(false);
        expect(e.traffic.groupProducts - before, `${threads} threads: products run in a group job`).toBe(threads === 1 ? 0 : dots.length);
        for (let i = 0; i < dots.length; i++) {
          expect(rs[i]).not.toBeNull();
          expect(new Uint32Array(outs[i].buffer, outs[i].byteOffset, outs[i].length).findIndex((v, j) => v !== want[i][j]), `${threads} threads, dot ${i}`).toBe(-1);
        }
      }
      expect(() => g.join()).toThrow(/StartedDots.join: join without a started group/);
      expect(() => g.start([])).toThrow(/StartedDots.start: list must be a non-empty array/);
      expect(g.pending).toBe(false);
    } finally {
      releaseAll();
    }
  });
});

describe('a started group on the systolic backend (StartedDots)', () => {
  const before = systolic.getNumThreads();
  afterAll(() => systolic.setNumThreads(before));

  /** A group of `dots` (operands and destinations in the engine's memory, from `seed`) as StartedDots and evalDotsInto take it; `want` its bits, one by one on one thread. */
  function group(dots: readonly Dot[], seed: number, inMemory: <T extends Float32Array | Uint16Array>(x: T) => T) {
    engineWith(1);
    const list = dots.map((d, i) => ({
      args: [new TArray(aval(d.lhsT ? [d.K, d.M] : [d.M, d.K], 'float32'), systolic.backend, inMemory(data(d.M * d.K, seed + 2 * i))), new TArray(aval(d.rhsT ? [d.K, d.N] : [d.N, d.K], 'float32'), systolic.backend, inMemory(data(d.K * d.N, seed + 2 * i + 1)))],
      params: params(d),
      out: inMemory(new Float32Array(d.M * d.N)),
    }));
    const want = list.map((x) => {
      evalPrimitiveInto(dotGeneralP, x.args, x.params, x.out);
      return new Uint32Array(x.out.slice().buffer);
    });
    /** The first element of each destination that differs from `want` (-1: none). */
    const diff = (): number[] => list.map((x, i) => new Uint32Array(x.out.buffer, x.out.byteOffset, x.out.length).findIndex((v, j) => v !== want[i][j]));
    return { list, diff, none: list.map(() => -1) };
  }

  it.runIf(shared)('refuses a product, a new group, a reservation and any primitive (execute, executeInto, executeIntoAll) while started, each naming what was asked; after the join all of them run', () => {
    const e = engineWith(1);
    const { inMemory, releaseAll } = engineMemory(e);
    try {
      const g1 = group(GPT_PAIR, 300, inMemory);
      const g2 = group([GPT_QKV[0], GPT_QKV[1]], 320, inMemory);
      const x = np.array([[1, 2, 3], [4, 5, 6]], 'float32');
      const y = np.array([[0.5, 0.25], [2, 4], [8, 16]], 'float32');
      const att = [1, 2, 3].map((s) => np.reshape(np.array(globalThis.Array.from({ length: 64 }, (_, i) => Math.sin(0.1 * s * i)), 'float32'), [2, 4, 2, 4]));
      const attParams = { scale: 0.5, isCausal: true };
      // What each refused call does after the join (it must then run), and the error it gets while started.
      const calls: [string, () => unknown, RegExp][] = [
        ['a product (execute)', () => np.matmul(x, y), /dot_general group: dot_general asked for while a started group of products runs on this engine's threads \(joinGroup first/],
        ['a product into caller storage (executeInto)', () => evalPrimitiveInto(dotGeneralP, [x, y], params({ M: 2, K: 3, N: 2, lhsT: false, rhsT: true, dtype: 'float32' }), new Float32Array(4)), /dot_general group: dot_general asked for while a started group/],
        ['another group (evalDotsInto)', () => evalDotsInto(g2.list), /dot_general group: a new group asked for while a started group/],
        ['another group (StartedDots)', () => {
          const s = new StartedDots();
          s.start(g2.list);
          return s.join();
        }, /dot_general group: a new group asked for while a started group/],
        ['a reservation', () => e.release(systolic.backend.arenaHost()!.reserve(4096)), /dot_general group: a reservation of 4096 bytes asked for while a started group/],
        ['a primitive (execute)', () => np.add(x, x), /dot_general group: add asked for while a started group/],
        ['a primitive into caller storage (executeInto)', () => evalPrimitiveInto(transposeP, [x], { permutation: [1, 0] }, new Float32Array(6)), /dot_general group: transpose asked for while a started group/],
        ['the fused attention into caller storage (executeIntoAll)', () => evalPrimitiveIntoAll(attentionFwdP, att, attParams, [new Float32Array(64), new Float32Array(16)]), /dot_general group: dot_product_attention_fwd asked for while a started group/],
      ];
      // (their results on one thread, with nothing started: what they must give after the join)
      const ref = (r: unknown): string => JSON.stringify(r === undefined ? null : (globalThis.Array.isArray(r) ? r : [r]).map((a) => (a instanceof TArray ? globalThis.Array.from(a.dataSync() as Float32Array) : null)));
      const wantAfter = calls.map(([, f]) => ref(f()));
      for (const threads of [2, 3]) {
        engineWith(threads);
        const s = new StartedDots();
        for (const x of g1.list) x.out.fill(Number.NaN);
        s.start(g1.list);
        expect(e.groupStarted, `${threads} threads: the group was started on the pool`).toBe(true);
        try {
          for (const [what, f, err] of calls) expect(f, `${threads} threads: ${what}`).toThrow(err);
        } finally {
          s.join();
        }
        expect(e.groupStarted).toBe(false);
        expect(g1.diff(), `${threads} threads: the started group's bits`).toEqual(g1.none);
        calls.forEach(([what, f], i) => expect(ref(f()), `${threads} threads, after the join: ${what}`).toBe(wantAfter[i]));
        // (and the group refused meanwhile runs, with its one-by-one bits)
        for (const x of g2.list) x.out.fill(Number.NaN);
        evalDotsInto(g2.list);
        expect(g2.diff(), `${threads} threads: the other group after the join`).toEqual(g2.none);
      }
    } finally {
      releaseAll();
    }
  });

  it.runIf(shared)("a failed announcement (the pool's openJob or wake throws) leaves no started group behind: the next started and plain groups run", () => {
    const e = engineWith(1);
    const { inMemory, releaseAll } = engineMemory(e);
    try {
      const g = group(GPT_PAIR, 340, inMemory);
      engineWith(2);
      evalDotsInto(g.list); // (the worker is started)
      for (const method of ['openJob', 'wake'] as const) {
        let thrown = 0;
        const fail = vi.spyOn(WorkerPool.prototype, method).mockImplementation((): never => {
          thrown++;
          throw new Error(`injected ${method} failure`);
        });
        const s = new StartedDots();
        try {
          expect(() => s.start(g.list)).toThrow(`injected ${method} failure`);
        } finally {
          fail.mockRestore();
        }
        expect(thrown, `${method}: one announcement failed`).toBe(1);
        expect(s.pending, `${method}: StartedDots holds no group`).toBe(false);
        expect(e.groupStarted, `${method}: the engine holds no group`).toBe(false);
        // The next group, started then joined, and run at once: each a group job, with the one-by-one bits.
        for (const started of [true, false]) {
          for (const x of g.list) x.out.fill(Number.NaN);
          const jobs = e.traffic.groupJobs;
          if (started) {
            s.start(g.list);
            expect(e.groupStarted).toBe(true);
            s.join();
          } else evalDotsInto(g.list);
          expect(e.traffic.groupJobs - jobs, `${method}, then a ${started ? 'started' : 'plain'} group: one group job`).toBe(1);
          expect(g.diff(), `${method}, then a ${started ? 'started' : 'plain'} group`).toEqual(g.none);
        }
      }
    } finally {
      releaseAll();
    }
  });
});

describe('evalDotsInto', () => {
  it('equals evalPrimitiveInto one by one, and names bad input', () => {
    const e = engineWith(2);
    const { inMemory, releaseAll } = engineMemory(e);
    try {
      const mk = (d: Dot, seed: number) => {
        const l = inMemory(data(d.M * d.K, seed));
        const r = inMemory(data(d.K * d.N, seed + 1));
        return {
          args: [new TArray(aval(d.lhsT ? [d.K, d.M] : [d.M, d.K], 'float32'), systolic.backend, l), new TArray(aval(d.rhsT ? [d.K, d.N] : [d.N, d.K], 'float32'), systolic.backend, r)],
          params: params(d),
          out: inMemory(new Float32Array(d.M * d.N)),
        };
      };
      const list = [mk(GPT_PAIR[0], 1), mk(GPT_PAIR[1], 3)];
      const g0 = e.traffic.groupProducts;
      const res = evalDotsInto(list);
      expect(e.traffic.groupProducts - g0).toBe(2);
      const got = list.map((d) => d.out.slice());
      engineWith(1);
      evalDotsInto([list[0]]);
      evalDotsInto([list[1]]);
      list.forEach((d, i) => expect(new Uint32Array(d.out.slice().buffer)).toEqual(new Uint32Array(got[i].buffer)));
      expect(res.every((r) => r !== null)).toBe(true);
      expect(() => evalDotsInto([])).toThrow(/evalDotsInto: list must be a non-empty array/);
      expect(() => evalDotsInto([list[0], { ...list[1], out: list[0].out.subarray(5) }])).toThrow(/evalDotsInto: the destinations of dots 0 and 1 overlap/);
      expect(() => evalDotsInto([{ ...list[0], args: [list[0].args[0]] }])).toThrow(/evalDotsInto: dot 0 must be/);
    } finally {
      releaseAll();
    }
  });
});
