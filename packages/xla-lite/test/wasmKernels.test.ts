// The WebAssembly fused kernels (src/wasm/) against the JavaScript kernels and eager execution:
// random elementwise programs over random shapes (odd sizes, sizes that are not multiples of 4,
// scalars, broadcasts of every kind, empty arrays), fused reductions over leading and trailing
// axes, bool compares and selects; results independent of the thread count; and the arena
// (reused across calls and between temporaries) never corrupting arrays already returned.
import { type Array, nn, np, withBackend } from '@tpukit/core';
import fc from 'fast-check';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { buildExecutable, type CompileOptions, fuseElementwise, HloModule, kernelThreadsAvailable, poolStats, setKernelThreads, setWasmKernels, setZeroCopyDots } from '../src/internal';
import { B, expectAllclose as allclose, f32 } from './build';
import { colRowBlocks, getColumnRowBlocks, setColumnRowBlocks } from '../src/wasm/emitKernel';
import { columnRows4, setColumnRows4 } from '../src/wasm/columnReduceKernel';
import { COL_PARALLEL_WORK, getColumnParallelWork, getParallelWork, PARALLEL_WORK, setColumnParallelWork, setParallelWork, THREAD_WORK } from '../src/wasm/fusionPlan';
import { compileBoth, type Fn } from './wasmCompare';

/** `expectAllclose`, with equal infinities counting as equal. */
function expectAllclose(actual: Array, expected: Array, opts: { rtol: number; atol: number }): void {
  const a = actual.dataSync();
  const e = expected.dataSync();
  const keep = (v: ArrayLike<number>, w: ArrayLike<number>) => np.array(Float32Array.from(v, (x, i) => (x === w[i] ? 0 : x)), 'float32');
  allclose(keep(a, e), keep(e, a), opts);
}


/** Tests of the arena's layout count loop and reduction kernels only: row and dot-epilogue fusions off. */
const LOOP_FUSION_ONLY: CompileOptions = { rowFusion: false, outputFusion: false };

afterAll(() => {
  setWasmKernels(true);
  setKernelThreads(null);
});

// Continuous, well-conditioned steps only (periodic functions of bounded arguments, no floor or
// sign), so that the kernels' ulp-level differences stay ulp-level through a chain; floor, ceil
// and sign are checked on exact inputs below.
const UNARY: [string, (a: Array) => Array][] = [
  ['tanh', (a) => np.tanh(a)],
  ['exp', (a) => np.exp(np.multiply(a, 0.5))],
  ['log', (a) => np.log(np.add(np.abs(a), 0.25))],
  ['logistic', (a) => np.divide(1, np.add(1, np.exp(np.negative(a))))],
  ['sin', (a) => np.sin(np.multiply(np.tanh(a), 3))],
  ['cos', (a) => np.cos(np.multiply(np.tanh(a), 3))],
  ['log1p', (a) => np.log1p(np.abs(a))],
  ['expm1', (a) => np.expm1(a)],
  ['sqrt', (a) => np.sqrt(np.abs(a))],
  ['square', (a) => np.square(a)],
  ['pow3', (a) => np.power(a, 3)],
];
const BINARY: [string, (a: Array, b: Array) => Array][] = [
  ['add', (a, b) => np.add(a, b)],
  ['fma', (a, b) => np.add(np.multiply(a, b), 0.5)],
  ['sub', (a, b) => np.subtract(np.multiply(a, 0.5), b)],
  ['div', (a, b) => np.divide(a, np.add(np.abs(b), 1))],
  ['max', (a, b) => np.maximum(a, b)],
  ['min', (a, b) => np.minimum(a, b)],
  ['where', (a, b) => np.where(np.greater(a, b), a, np.multiply(b, 2))],
  ['where-le', (a, b) => np.where(np.lessEqual(a, 0), b, np.tanh(a))],
];

const dims = fc.oneof(fc.constantFrom(1, 2, 3, 4, 5, 7, 8, 9), fc.integer({ min: 10, max: 37 }));
const shapeArb = fc.array(dims, { minLength: 0, maxLength: 3 });

/** A broadcast-compatible operand shape for `shape`: a suffix, with some dims set to 1, or a scalar. */
function operandShape(shape: number[], pick: number): number[] {
  switch (pick % 4) {
    case 0:
      return shape;
    case 1:
      return [];
    case 2:
      return shape.slice(Math.min(shape.length, 1));
    default:
      return shape.map((d, i) => (i % 2 === pick % 3 % 2 ? 1 : d));
  }
}

const rand = (shape: number[], seed: number): Array => {
  const n = shape.reduce((a, b) => a * b, 1);
  let s = seed * 2654435761 + 12345;
  const v = Float32Array.from({ length: n }, () => {
    s = (s * 1103515245 + 12345) >>> 0;
    return (s / 2 ** 32) * 6 - 3;
  });
  return np.array(v, 'float32').reshape(shape);
};

/** `x` with 2^e added to the elements of rows (index over `x`'s first axis, `row` elements each) 1 mod 4 and subtracted from rows 2 mod 4. */
const cancelling = (x: Array, row: number, big: number): Array => {
  const v = Float32Array.from(x.dataSync() as Float32Array);
  for (let i = 0; i < v.length; i++) {
    const r = Math.floor(i / row) % 4;
    if (r === 1) v[i] += big;
    else if (r === 2) v[i] -= big;
  }
  return np.array(v, 'float32').reshape(x.shape);
};

const program = fc.record({
  shape: shapeArb,
  picks: fc.array(fc.nat(11), { minLength: 1, maxLength: 3 }),
  ops: fc.array(fc.tuple(fc.boolean(), fc.nat(UNARY.length - 1), fc.nat(BINARY.length - 1)), { minLength: 1, maxLength: 6 }),
  reduce: fc.constantFrom('none', 'none', 'sum-last', 'sum-first', 'max-last', 'max-first'),
  seed: fc.nat(1000),
});

/** The elementwise chain of a random program, before its reduction. */
function chain(ops: [boolean, number, number][]): Fn {
  return (...xs) => {
    let v = xs[0];
    ops.forEach(([unary, u, b], k) => {
      v = unary ? UNARY[u][1](v) : BINARY[b][1](v, xs[(k % (xs.length - 1)) + 1] ?? xs[0]);
    });
    return v;
  };
}

function build(ops: [boolean, number, number][], reduce: string, rank: number): Fn {
  return (...xs) => {
    const v = chain(ops)(...xs);
    if (rank === 0 || reduce === 'none') return v;
    const axis = reduce.endsWith('last') ? -1 : 0;
    return reduce.startsWith('sum') ? np.sum(v, { axis }) : np.max(v, { axis });
  };
}

/**
 * The error budget of each output of a random program, `atol + rtol*scale` with the per-element
 * budget `atol + rtol*|v|` of the elementwise chain carried through the reduction:
 * - no reduction: `scale = |v|`;
 * - max: max is 1-Lipschitz, so the output's error is at most its worst input's: `scale = max|v|`;
 * - sum of n terms: the inputs' errors add up, `n*atol + rtol*Σ|v|`, plus the summation's own
 *   roundings (n−1)·2^-24·Σ|v| (≤ 2.2e-6·Σ|v| for n ≤ 37, inside rtol). The scale is Σ|v|, not
 *   |Σv|: when the terms cancel (e.g. expm1(x)^3·y over 10 terms, Σ|v| ≈ 299 and Σv ≈ −0.35),
 *   a few ulps of the largest term are a large part of the result, and an rtol on |Σv| is wrong.
 */
function budget(v: Array, reduce: string, rank: number, tol: { rtol: number; atol: number }): Float64Array {
  const mag = np.abs(v);
  let scale = mag;
  let n = 1;
  if (rank > 0 && reduce !== 'none') {
    const axis = reduce.endsWith('last') ? -1 : 0;
    const sum = reduce.startsWith('sum');
    scale = sum ? np.sum(mag, { axis }) : np.max(mag, { axis });
    if (sum) n = v.shape.at(axis) ?? 1;
  }
  return Float64Array.from(scale.dataSync(), (s) => n * tol.atol + tol.rtol * s);
}

/** |actual − expected| within `bound` elementwise; NaN matches NaN and equal infinities match. */
function expectWithin(actual: Array, expected: Array, bound: Float64Array, what: string): void {
  const a = actual.dataSync();
  const e = expected.dataSync();
  expect(a.length, `${what}: length`).toBe(e.length);
  for (let i = 0; i < a.length; i++) {
    if (a[i] === e[i] || (Number.isNaN(a[i]) && Number.isNaN(e[i]))) continue;
    if (!(Math.abs(a[i] - e[i]) <= bound[i])) expect.fail(`${what}: element ${i}: got ${a[i]}, expected ${e[i]} (allowed difference ${bound[i]})`);
  }
}

describe('WebAssembly kernels agree with the JavaScript kernels and eager execution', () => {
  it('random fused programs over random shapes and broadcasts', () => {
    let wasmKernels = 0;
    fc.assert(
      fc.property(program, ({ shape, picks, ops, reduce, seed }) => {
        const args = [rand(shape, seed), ...picks.map((p, k) => rand(operandShape(shape, p), seed + k + 1))];
        const f = build(ops, reduce, shape.length);
        const { js, wasm } = compileBoth(f, args);
        wasmKernels += wasm.stats.wasmKernels;
        const [a] = wasm.call(args);
        const [b] = js.call(args);
        expect(a.shape).toEqual(b.shape);
        // Up to six steps, where exp/expm1 of arguments up to ~90 multiply an input's relative
        // difference by the argument: a few ulps of difference can grow to ~1e-5 relative per
        // element; `budget` carries that through the reduction (see there).
        const v = chain(ops)(...args);
        expectWithin(a, b, budget(v, reduce, shape.length, { rtol: 1e-4, atol: 2e-5 }), 'wasm vs js');
        expectWithin(a, f(...args), budget(v, reduce, shape.length, { rtol: 1e-4, atol: 1e-4 }), 'wasm vs eager');
      }),
      {
        numRuns: 120,
        // FC_SEED=2052691033: 10 terms from −70.8 to 146.6 cancelling to −0.35 (see `budget`).
        examples: [[{ shape: [10, 17, 22], picks: [0], ops: [[true, 7, 0], [true, 10, 0], [false, 0, 1]], reduce: 'sum-first', seed: 138 }]],
      },
    );
    expect(wasmKernels).toBeGreaterThan(100);
  });

  it('empty arrays, scalars and reductions over an empty axis', () => {
    const cases: [Fn, number[][]][] = [
      [(x) => np.tanh(np.add(x, 1)), [[0]]],
      [(x) => np.exp(x), [[3, 0, 5]]],
      [(x) => np.sum(np.exp(x), { axis: -1 }), [[4, 0]]],
      [(x) => np.max(np.exp(x), { axis: 0 }), [[5, 0]]],
      [(x) => np.sum(np.tanh(x), { axis: 0 }), [[0, 3]]],
      [(x, y) => np.multiply(np.sin(x), y), [[], []]],
      [(x) => np.sum(np.square(x)), [[]]],
    ];
    for (const [f, shapes] of cases) {
      const args = shapes.map((s, k) => rand(s, k));
      const { js, wasm } = compileBoth(f, args);
      expect(wasm.stats.wasmKernels, wasm.asText()).toBeGreaterThan(0);
      const [a] = wasm.call(args);
      expectAllclose(a, js.call(args)[0], { rtol: 1e-6, atol: 1e-6 });
      expectAllclose(a, f(...args), { rtol: 1e-6, atol: 1e-6 });
    }
  });

  it('special values: NaN, ±Inf, ±0 through arithmetic, max reductions and transcendentals', () => {
    const x = np.array([NaN, Infinity, -Infinity, 0, -0, 1, -1, 100, -100, 1e-40, 3, 2], 'float32').reshape([3, 4]);
    const fns: Fn[] = [
      (a) => np.exp(a),
      (a) => np.tanh(a),
      (a) => np.log(np.abs(a)),
      (a) => np.max(np.multiply(a, 2), { axis: -1 }),
      (a) => np.max(np.sin(a), { axis: 0 }),
      (a) => np.sum(np.sign(a), { axis: 0 }),
      (a) => np.add(np.floor(np.multiply(a, 0.7)), np.ceil(np.multiply(a, 1.3))),
      (a) => np.sin(np.multiply(a, 1e6)),
      (a) => np.where(np.greaterEqual(a, 0), np.sqrt(a), np.negative(a)),
    ];
    for (const f of fns) {
      const { js, wasm } = compileBoth(f, [x]);
      expect(wasm.stats.wasmKernels).toBeGreaterThan(0);
      const a = wasm.call([x])[0].dataSync();
      const b = js.call([x])[0].dataSync();
      for (let i = 0; i < b.length; i++) {
        if (Number.isNaN(b[i])) expect(a[i], `${f} element ${i}`).toBeNaN();
        else if (!Number.isFinite(b[i]) || b[i] === 0) expect(a[i] === b[i], `${f} element ${i}: ${a[i]} vs ${b[i]}`).toBe(true);
        else expect(Math.abs(a[i] - b[i]), `${f} element ${i}`).toBeLessThanOrEqual(4e-7 * Math.abs(b[i]));
      }
    }
  });

  it('bool outputs and inputs (compare roots, selects on parameters)', () => {
    const x = rand([5, 7], 1);
    const y = rand([7], 2);
    const f = (a: Array, b: Array) => np.greater(np.tanh(a), b);
    const { js, wasm } = compileBoth(f, [x, y]);
    expect(wasm.stats.wasmKernels).toBe(1);
    expect(globalThis.Array.from(wasm.call([x, y])[0].dataSync())).toEqual(globalThis.Array.from(js.call([x, y])[0].dataSync()));
    const g = (m: Array, a: Array) => np.where(m, np.exp(a), np.negative(a));
    const m = np.greater(rand([5, 7], 3), 0);
    const both = compileBoth(g, [m, x]);
    expectAllclose(both.wasm.call([m, x])[0], both.js.call([m, x])[0], { rtol: 1e-6, atol: 0 });
  });
});

describe('dot epilogues (kOutput fusions) as wasm kernels', () => {
  it('matmul + bias + gelu / + residual: the epilogue runs in wasm over the dot result, equal to JS and eager', () => {
    const mlp = (x: Array, w: Array, b: Array) => nn.gelu(np.add(np.matmul(x, w), b));
    const residual = (x: Array, w: Array, b: Array) => np.add(np.multiply(np.tanh(np.matmul(x, w)), b), x);
    for (const [f, shapes] of [
      [mlp, [[37, 19], [19, 23], [23]]],
      [residual, [[16, 16], [16, 16], [16]]],
      [mlp, [[130, 64], [64, 130], [130]]],
    ] as [Fn, number[][]][]) {
      const args = shapes.map((sh, k) => np.multiply(rand(sh, k + 11), 0.3));
      const { js, wasm } = compileBoth(f, args);
      expect(wasm.stats.outputFusions).toBe(1);
      expect(wasm.stats.wasmKernels).toBe(1);
      expect(js.stats.wasmKernels).toBe(0);
      const a = wasm.call(args)[0];
      expectAllclose(a, js.call(args)[0], { rtol: 1e-5, atol: 1e-6 });
      expectAllclose(a, f(...args), { rtol: 1e-5, atol: 1e-6 });
      // A second call with other inputs does not change the first result.
      const snap = Float32Array.from(a.dataSync() as Float32Array);
      wasm.call(args.map((x) => np.multiply(x, -2)));
      expect(a.dataSync()).toEqual(snap);
    }
  });

  it('a wasm kernel reading an epilogue result reads it from the arena', () => {
    const f = (x: Array, w: Array, b: Array) => {
      const h = nn.gelu(np.add(np.matmul(x, w), b));
      return [h, np.sum(np.multiply(h, h), { axis: -1 })] as unknown as Array;
    };
    const args = [rand([21, 13], 1), rand([13, 18], 2), rand([18], 3)].map((x) => np.multiply(x, 0.3));
    const { js, wasm } = compileBoth(f as Fn, args);
    expect(wasm.stats.outputFusions).toBe(1);
    expect(wasm.stats.wasmKernels).toBe(2);
    const want = f(args[0], args[1], args[2]) as unknown as Array[];
    for (let round = 0; round < 2; round++) {
      const got = wasm.call(args);
      const ref = js.call(args);
      got.forEach((g, k) => {
        expectAllclose(g, ref[k], { rtol: 1e-5, atol: 1e-6 });
        expectAllclose(g, want[k], { rtol: 1e-5, atol: 1e-6 });
      });
    }
  });
});

describe('fallback to the JavaScript kernels', () => {
  it('a fusion kind the wasm emitter does not implement keeps its JS kernel, with the same results', () => {
    const make = (kind: string | null) => {
      const b = new B();
      const x = b.param(f32(6, 5));
      const y = b.op('tanh', [b.op('mul', [x, x])]);
      const c = b.out(b.op('exp', [y]));
      fuseElementwise(c);
      const fusion = c.instructions.find((i) => i.opcode === 'fusion')!;
      if (kind) fusion.params = { ...fusion.params, kind };
      return buildExecutable(new HloModule('m', c), 'm');
    };
    const x = rand([6, 5], 9);
    const wasm = make(null);
    const other = make('kCustomForTest');
    expect(wasm.stats.wasmKernels).toBe(1);
    expect(other.stats.wasmKernels).toBe(0);
    expect(other.stats.fusedKernels).toBe(1);
    expectAllclose(wasm.run([x])[0], other.run([x])[0], { rtol: 1e-6, atol: 0 });
    expectAllclose(other.run([x])[0], np.exp(np.tanh(np.multiply(x, x))), { rtol: 1e-6, atol: 0 });
  });
});

describe('threads and the arena', () => {
  // The thresholds and thread counts the tests below change are global: restored after each test, failing or not.
  const saved = { work: getParallelWork(), col: getColumnParallelWork(), blocks: getColumnRowBlocks() };
  afterEach(() => {
    setKernelThreads(null);
    setParallelWork(saved.work);
    setColumnParallelWork(saved.col);
    setColumnRowBlocks(saved.blocks);
  });

  it('the thresholds decide which kernels run on threads (job counts)', () => {
    // A loop kernel of 2^17 elements (between PARALLEL_WORK and THREAD_WORK), and a column sum of 2^18.
    const x = rand([128, 1024], 11);
    const y = rand([256, 1024], 12);
    const loop = compileBoth((a) => np.add(np.multiply(a, a), 1), [x]).wasm;
    const col = compileBoth((a) => np.sum(np.multiply(a, a), { axis: 0 }), [y]).wasm;
    const jobs = (c: typeof loop, arg: Array) => {
      const before = poolStats().parallelJobs;
      c.call([arg]);
      return poolStats().parallelJobs - before;
    };
    setKernelThreads(2);
    expect(getParallelWork()).toBe(THREAD_WORK);
    expect(getColumnParallelWork()).toBe(COL_PARALLEL_WORK);
    expect(jobs(loop, x)).toBe(0);
    expect(jobs(col, y)).toBe(0);
    if (!kernelThreadsAvailable()) return;
    // Thresholds apply to executables built afterwards.
    setParallelWork(PARALLEL_WORK);
    setColumnParallelWork(PARALLEL_WORK);
    expect(jobs(compileBoth((a) => np.add(np.multiply(a, a), 1), [x]).wasm, x)).toBeGreaterThan(0);
    expect(jobs(compileBoth((a) => np.sum(np.multiply(a, a), { axis: 0 }), [y]).wasm, y)).toBeGreaterThan(0);
  });

  it('a column reduction is split by rows only where the split runs on threads', () => {
    setColumnRowBlocks(4);
    // [2048, 70] summed over rows: 143,360 work, past PARALLEL_WORK but below the default thread threshold.
    expect(colRowBlocks(2048, 1, 2048 * 70)).toBe(1);
    setParallelWork(PARALLEL_WORK);
    expect(colRowBlocks(2048, 1, 2048 * 70)).toBe(4);
  });

  it('results do not depend on the thread count', () => {
    // Rows wider than COL_CHUNK (1024), so that column reductions have several spans (the last one ending in a partial vector), on threads.
    setColumnParallelWork(PARALLEL_WORK);
    const x = rand([129, 2101], 5);
    const b = rand([2101], 6);
    const other = rand([129, 2101], 7);
    const fns: Fn[] = [
      (a, c) => np.multiply(a, np.divide(1, np.add(1, np.exp(np.negative(np.add(a, c)))))),
      (a, c) => np.sum(np.tanh(np.add(a, c)), { axis: -1 }),
      (a, c) => np.max(np.exp(np.multiply(a, c)), { axis: 0 }),
      (a, c) => np.sum(np.sin(np.multiply(a, c)), { axis: 0 }),
    ];
    const before = poolStats().parallelJobs;
    for (const f of fns) {
      const { wasm } = compileBoth(f, [x, b]);
      const out: Float32Array[] = [];
      for (const t of [1, 2, 3]) {
        // Other values in the arena first (computed on one thread), so an item a thread skipped
        // cannot pass for a computed one.
        setKernelThreads(1);
        wasm.call([other, b]);
        setKernelThreads(t);
        out.push(wasm.call([x, b])[0].dataSync() as Float32Array);
      }
      expect(out[1]).toEqual(out[0]);
      expect(out[2]).toEqual(out[0]);
      expectAllclose(np.array(out[0]).reshape(f(x, b).shape), f(x, b), { rtol: 1e-5, atol: 1e-5 });
    }
    setKernelThreads(null);
    if (kernelThreadsAvailable()) expect(poolStats().parallelJobs - before).toBeGreaterThanOrEqual(8);
  });

  it('column reductions on any thread count: each column summed over its rows in order in float64, rounded once (property)', () => {
    // Rows of up to ~1.2k columns (several narrow items, spans split between threads, partial
    // vectors at a row's end), enough rows to run on threads; sum or max, with a fused product by a broadcast weight; [K, A, L] reduced over axes 0 and 1, or over axis 0 only (A groups
    // of L columns: the weight runs along L only, so the kernel's rows are L columns wide).
    const before = poolStats().parallelJobs;
    // Column reductions of any size past PARALLEL_WORK on threads (the default threshold is higher).
    setColumnParallelWork(PARALLEL_WORK);
    fc.assert(
      fc.property(
        fc.record({ K: fc.integer({ min: 1, max: 700 }), A: fc.constantFrom(1, 1, 2, 3), L: fc.oneof(fc.integer({ min: 1, max: 300 }), fc.integer({ min: 1000, max: 1200 })), max: fc.boolean(), groups: fc.boolean(), perRow: fc.boolean(), seed: fc.integer({ min: 1, max: 10000 }) }),
        ({ K, A, L, max, groups, perRow, seed }) => {
          const shape = [K, A, L];
          const x = rand(shape, seed);
          // The weight runs along the columns, or is one value per row (along the reduced dims).
          const c = perRow ? rand([K, A, 1], seed + 1) : rand([L], seed + 1);
          const axis = groups ? 0 : [0, 1];
          const f: Fn = (a, w) => (max ? np.max(np.multiply(a, w), { axis }) : np.sum(np.multiply(a, w), { axis }));
          const { wasm } = compileBoth(f, [x, c]);
          expect(wasm.stats.wasmKernels).toBe(1);
          const xs = x.dataSync();
          const cs = c.dataSync();
          const G = groups ? A : 1;
          const rows = groups ? K : K * A;
          const want = new Float32Array(G * L);
          for (let g = 0; g < G; g++)
            for (let j = 0; j < L; j++) {
              let acc = max ? -Infinity : 0;
              for (let k = 0; k < rows; k++) {
                const v = Math.fround(xs[(k * G + g) * L + j] * cs[perRow ? k * G + g : j]);
                acc = max ? Math.max(acc, v) : acc + v;
              }
              want[g * L + j] = acc;
            }
          for (const t of [1, 2, 3]) {
            setKernelThreads(1);
            wasm.call([rand(shape, seed + 2), c]);
            setKernelThreads(t);
            expect(wasm.call([x, c])[0].dataSync()).toEqual(want);
          }
          setKernelThreads(null);
        },
      ),
      { numRuns: 40, examples: [[{ K: 700, A: 3, L: 128, max: false, seed: 3, groups: false, perRow: false }], [{ K: 600, A: 2, L: 1100, max: false, seed: 5, groups: true, perRow: false }], [{ K: 700, A: 3, L: 130, max: true, seed: 4, groups: true, perRow: true }]] },
    );
    if (kernelThreadsAvailable()) expect(poolStats().parallelJobs - before).toBeGreaterThan(0);
  });

  it('plain column reductions (four rows per scratch round trip): each column summed over its rows in order in float64, rounded once, split or not (property)', () => {
    // No broadcast or iota in the body: the four-row path of columnReduceKernel.ts. K of every
    // residue mod 4 (the last rows go one by one), one operand or the product of two whole ones,
    // sum or max, groups of L columns or not, split by rows into blocks or not, 1-3 threads;
    // the same bits with the four-row path off.
    const before = poolStats().parallelJobs;
    const saved = columnRows4();
    setColumnParallelWork(PARALLEL_WORK);
    setParallelWork(PARALLEL_WORK);
    try {
      fc.assert(
        fc.property(
          fc.record({ K: fc.integer({ min: 1, max: 400 }), A: fc.constantFrom(1, 1, 2, 3), L: fc.oneof(fc.integer({ min: 1, max: 200 }), fc.integer({ min: 1000, max: 1100 })), max: fc.boolean(), groups: fc.boolean(), two: fc.boolean(), sibling: fc.boolean(), blocks: fc.constantFrom(1, 4), seed: fc.integer({ min: 1, max: 10000 }), cancel: fc.boolean() }),
          ({ K, A, L, max, groups, two, sibling, blocks, seed, cancel }) => {
            const shape = [K, A, L];
            // cancel: rows k = 1 and 2 mod 4 get + and - 2^e (e in 60..100, per seed) added, so
            // a float64 sum depends on its order (what came before a +2^e is lost when it cancels)
            // and a kernel adding its rows in another order than the reference's fails.
            const x = cancel ? cancelling(rand(shape, seed), A * L, 2 ** (60 + (seed % 41))) : rand(shape, seed);
            const y = rand(shape, seed + 1);
            const axis = groups ? 0 : [0, 1];
            // sibling: two reductions of the same rows in one kernel (the product's and the
            // operand's own, which reads its halves directly), added afterwards.
            const red = (v: Array): Array => (max ? np.max(v, { axis }) : np.sum(v, { axis }));
            const f: Fn = (a, w) => (sibling ? np.add(red(np.multiply(a, w)), np.multiply(red(a), 2)) : red(two ? np.multiply(a, w) : a));
            setColumnRowBlocks(blocks);
            setColumnRows4(true);
            const { wasm } = compileBoth(f, [x, y]);
            setColumnRows4(false);
            const { wasm: off } = compileBoth(f, [x, y]);
            expect(wasm.stats.wasmKernels).toBe(sibling ? 2 : 1);
            const xs = x.dataSync();
            const ys = y.dataSync();
            const G = groups ? A : 1;
            const rows = groups ? K : K * A;
            const B = colRowBlocks(rows, G * Math.ceil(L / 1024), rows * G * L);
            const per = Math.ceil(rows / B);
            const reduced = (prod: boolean): Float32Array => {
              const out = new Float32Array(G * L);
              for (let g = 0; g < G; g++)
                for (let j = 0; j < L; j++) {
                  let total = max ? -Infinity : 0;
                  for (let q = 0; q < B; q++) {
                    let acc = max ? -Infinity : 0;
                    for (let k = q * per; k < Math.min(rows, (q + 1) * per); k++) {
                      const i = (k * G + g) * L + j;
                      const v = prod ? Math.fround(xs[i] * ys[i]) : xs[i];
                      acc = max ? Math.max(acc, v) : acc + v;
                    }
                    total = max ? Math.max(total, acc) : total + acc;
                  }
                  out[g * L + j] = total;
                }
              return out;
            };
            const want = sibling ? ((p, o) => p.map((v, i) => v + o[i] * 2))(reduced(true), reduced(false)) : reduced(two);
            for (const t of [1, 2, 3]) {
              setKernelThreads(1);
              wasm.call([rand(shape, seed + 2), y]);
              setKernelThreads(t);
              expect(wasm.call([x, y])[0].dataSync()).toEqual(want);
              expect(off.call([x, y])[0].dataSync()).toEqual(want);
            }
            setKernelThreads(null);
          },
        ),
        { numRuns: 40, examples: [[{ K: 403, A: 1, L: 512, max: false, groups: false, two: false, sibling: false, blocks: 1, seed: 3, cancel: true }], [{ K: 130, A: 3, L: 1030, max: false, groups: true, two: true, sibling: true, blocks: 1, seed: 5, cancel: false }], [{ K: 399, A: 2, L: 70, max: true, groups: false, two: true, sibling: false, blocks: 4, seed: 4, cancel: true }], [{ K: 232, A: 1, L: 100, max: false, groups: true, two: false, sibling: true, blocks: 4, seed: 8, cancel: true }]] },
      );
    } finally {
      setColumnRows4(saved);
    }
    if (kernelThreadsAvailable()) expect(poolStats().parallelJobs - before).toBeGreaterThan(0);
  });

  it('setColumnParallelWork and setParallelWork reject bad thresholds', () => {
    expect(() => setColumnParallelWork(0)).toThrow(/setColumnParallelWork: work must be an integer >= 65536 or Infinity; got 0/);
    expect(() => setColumnParallelWork(70000.5)).toThrow(/got 70000\.5/);
    expect(() => setColumnParallelWork(5)).toThrow(/got 5/);
    expect(() => setColumnParallelWork(Number.NaN)).toThrow(/got NaN/);
    expect(() => setParallelWork(1000)).toThrow(/setParallelWork: work must be an integer >= 65536; got 1000/);
    expect(() => setParallelWork(Number.NaN)).toThrow(/got NaN/);
  });

  it('setColumnRowBlocks rejects bad limits', () => {
    expect(() => setColumnRowBlocks(0)).toThrow(/setColumnRowBlocks: n must be an integer in 1\.\.16; got 0/);
    expect(() => setColumnRowBlocks(2.5)).toThrow(/got 2\.5/);
    expect(() => setColumnRowBlocks(17)).toThrow(/got 17/);
  });

  it('column reductions split by rows: blocks summed in row order, added in block order, on any thread count (property)', () => {
    const before = poolStats().parallelJobs;
    let split = 0;
    setColumnRowBlocks(4);
    // Split reductions of any size past PARALLEL_WORK on threads (the default threshold is higher).
    setParallelWork(PARALLEL_WORK);
    fc.assert(
      fc.property(
        fc.record({ K1: fc.integer({ min: 1, max: 1500 }), K2: fc.constantFrom(1, 1, 2, 3), L: fc.integer({ min: 1, max: 70 }), max: fc.boolean(), seed: fc.integer({ min: 1, max: 10000 }) }),
        ({ K1, K2, L, max, seed }) => {
          const x = rand([K1, K2, L], seed);
          const c = rand([L], seed + 1);
          const f: Fn = (a, w) => (max ? np.max(np.multiply(a, w), { axis: [0, 1] }) : np.sum(np.multiply(a, w), { axis: [0, 1] }));
          const { wasm } = compileBoth(f, [x, c]);
          expect(wasm.stats.wasmKernels).toBe(1);
          // The reference: float32 products, float64 sums over each block of rows in order, the
          // blocks added in order, one rounding (the block count depends on the shape only).
          const K = K1 * K2;
          const B = colRowBlocks(K, 1, K * L);
          if (B > 1) split++;
          const per = Math.ceil(K / B);
          const xs = x.dataSync();
          const cs = c.dataSync();
          const want = new Float32Array(L);
          for (let j = 0; j < L; j++) {
            let total = max ? -Infinity : 0;
            for (let q = 0; q < B; q++) {
              let acc = max ? -Infinity : 0;
              for (let k = q * per; k < Math.min(K, (q + 1) * per); k++) {
                const v = Math.fround(xs[k * L + j] * cs[j]);
                acc = max ? Math.max(acc, v) : acc + v;
              }
              total = max ? Math.max(total, acc) : total + acc;
            }
            want[j] = total;
          }
          for (const t of [1, 2, 3]) {
            setKernelThreads(1);
            wasm.call([rand([K1, K2, L], seed + 2), c]);
            setKernelThreads(t);
            expect(wasm.call([x, c])[0].dataSync()).toEqual(want);
          }
          setKernelThreads(null);
        },
      ),
      { numRuns: 40, examples: [[{ K1: 1025, K2: 1, L: 67, max: false, seed: 3 }], [{ K1: 700, K2: 3, L: 33, max: true, seed: 4 }]] },
    );
    expect(split).toBeGreaterThan(0);
    if (kernelThreadsAvailable()) expect(poolStats().parallelJobs - before).toBeGreaterThan(0);
  });

  it('arrays returned by one call are not changed by the next (arena reuse)', () => {
    // Several temporaries share arena memory; outputs and intermediates read by primitives are copied out.
    const f = (a: Array, w: Array) => {
      const h = np.tanh(np.multiply(a, 2));
      const z = np.matmul(h, w);
      const s = np.exp(np.subtract(z, np.max(z, { axis: -1, keepdims: true })));
      return [np.divide(s, np.sum(s, { axis: -1, keepdims: true })), h] as unknown as Array;
    };
    const a1 = rand([33, 16], 1);
    const a2 = rand([33, 16], 2);
    const w = rand([16, 9], 3);
    const { wasm } = compileBoth(f as Fn, [a1, w], LOOP_FUSION_ONLY);
    expect(wasm.stats.wasmKernels).toBeGreaterThanOrEqual(3);
    const r1 = wasm.call([a1, w]);
    const snapshot = r1.map((r) => Float32Array.from(r.dataSync() as Float32Array));
    const r2 = wasm.call([a2, w]);
    r1.forEach((r, k) => expect(r.dataSync()).toEqual(snapshot[k]));
    const want = f(a2, w) as unknown as Array[];
    r2.forEach((r, k) => expectAllclose(r, want[k], { rtol: 1e-5, atol: 1e-6 }));
    // And the same arrays again: repeated calls agree bit for bit.
    const r3 = wasm.call([a1, w]);
    r3.forEach((r, k) => expect(r.dataSync()).toEqual(snapshot[k]));
  });

  it('temporaries share the arena: a value stays only until its last read by a wasm kernel', () => {
    // Six layers: each matmul result is read only by the next fusion, each fusion result by the
    // next matmul (a core primitive, which reads a copy) and the next fusion. (The broadcast
    // 0.5 is duplicated into each of the six fusions, not materialised as a seventh kernel.)
    const layers = (x: Array, w: Array) => {
      let h = x;
      for (let l = 0; l < 6; l++) h = np.add(np.tanh(np.matmul(h, w)), np.multiply(h, 0.5));
      return h;
    };
    const x = rand([64, 64], 4);
    const w = np.multiply(rand([64, 64], 5), 0.1);
    const { wasm } = compileBoth(layers, [x, w], LOOP_FUSION_ONLY);
    const bytes = 64 * 64 * 4;
    expect(wasm.stats.wasmKernels).toBe(6);
    // Without reuse: 6 fusion outputs + 6 staged matmul results + the staged x; with reuse
    // three arrays (no materialised broadcast held for the whole program as a fourth).
    expect(wasm.stats.arenaBytes).toBeLessThanOrEqual(3 * bytes + 64);
    // Six tanh layers amplify the kernels' ulp-level differences: compare at 1e-4.
    expectAllclose(wasm.call([x, w])[0], layers(x, w), { rtol: 1e-4, atol: 1e-4 });
    expectAllclose(wasm.call([w, x])[0], layers(w, x), { rtol: 1e-4, atol: 1e-4 });
  });

  it('a kernel result read only by core primitives leaves the arena at once (zero-copy dots off)', () => {
    // Six fusions whose results only the matmuls at the end read (through copies): the arena
    // holds x and one result at a time, not all six. With zero-copy dots (the default on a
    // backend that hosts the arena) the matmuls read the six results in place instead, so all
    // six stay in the arena until their matmul.
    const late = (x: Array, w: Array) => {
      const hs = [1, 2, 3, 4, 5, 6].map((k) => np.tanh(np.multiply(x, k)));
      return hs.map((h) => np.matmul(h, w)) as unknown as Array;
    };
    const x = rand([32, 32], 6);
    const w = rand([32, 32], 7);
    const want = late(x, w) as unknown as Array[];
    setZeroCopyDots(false);
    try {
      const { wasm } = compileBoth(late as Fn, [x, w], LOOP_FUSION_ONLY);
      expect(wasm.stats.wasmKernels).toBe(6);
      expect(wasm.stats.arenaBytes).toBeLessThanOrEqual(2 * 32 * 32 * 4 + 64);
      wasm.call([x, w]).forEach((r, k) => expectAllclose(r, want[k], { rtol: 1e-5, atol: 1e-5 }));
    } finally {
      setZeroCopyDots(true);
    }
    const { wasm } = withBackend('systolic', () => compileBoth(late as Fn, [x, w], LOOP_FUSION_ONLY));
    expect(wasm.stats.arenaInBackend).toBe(true);
    expect(wasm.stats.arenaBytes).toBeLessThanOrEqual(7 * 32 * 32 * 4 + 64);
    withBackend('systolic', () => wasm.call([x, w])).forEach((r, k) => expectAllclose(r, want[k], { rtol: 1e-5, atol: 1e-5 }));
  });
});
