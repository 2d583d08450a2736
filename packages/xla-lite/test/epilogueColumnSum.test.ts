// Dot epilogues with their column sum (wasm/program.ts `setEpilogueColumnSums`): a column sum
// of a wasm dot epilogue's result (a bias gradient), or of values of a row fusion's outputs and
// operands (a layer norm's bias, gamma and beta gradients), is computed by the producer's fused
// kernel when the producer runs on one thread. The sum and the producer's result must be the same
// bits as with the path turned off, and the sum of an output must be the float64 sum of its rows
// in row order, rounded once, for any shape, on 1, 2 and 3 threads.
import { type Array, lax, np, setNumThreads, toStorage, valueAndGrad, withBackend } from '@tpukit/core';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { epilogueColumnSumsEnabled, jit, ROW_SUMS_ONE_THREAD_MAX, rowOperandSumsEnabled, rowSumsOneThreadEnabled, setEpilogueColumnSums, setKernelThreads, setRowOperandSums, setRowSumsOneThread } from '../src/index';
import { WasmProgram, type WasmStep } from '../src/wasm/program';
import { getParallelWork, PARALLEL_WORK, setParallelWork } from '../src/wasm/fusionPlan';
import { kernelThreadsAvailable } from '../src/wasm/pool';

const seq = (shape: number[], s: number): Array => {
  const n = shape.reduce((a, b) => a * b, 1);
  return np.array(globalThis.Array.from({ length: n }, (_, i) => Math.sin(i * s + 0.3) * (1 + (i % 7) * 0.5)), 'float32').reshape(shape);
};
/** The setting from the environment (on unless TPUKIT_EPILOGUE_COLSUM=0), restored after each test. */
const initial = epilogueColumnSumsEnabled();
const initialWork = getParallelWork();
const initialOperandSums = rowOperandSumsEnabled();
const initialOneThread = rowSumsOneThreadEnabled();
const bits = (a: Array) => globalThis.Array.from(new Uint32Array((toStorage(a) as Float32Array).slice().buffer));
const range = (n: number): number[] => globalThis.Array.from({ length: n }, (_, k) => k);
type Fn = (...xs: Array[]) => Array[];

/** Epilogues over the dot d = x w (h: an operand of the result's shape, b: a bias along its last axis). */
const epilogues = {
  bias: (d: Array, _h: Array, b: Array) => np.add(d, b),
  // The GPT's GELU' epilogue: the incoming gradient times the derivative, from the forward's pre-bias h plus the bias, and tanh.
  geluGrad: (d: Array, h: Array, b: Array) => {
    const u = np.add(h, b);
    const t = np.tanh(np.multiply(u, 0.79788456));
    return np.multiply(d, np.add(np.multiply(np.add(t, 1), 0.5), np.multiply(np.multiply(u, np.subtract(1, np.multiply(t, t))), 0.3989)));
  },
};
type Epilogue = keyof typeof epilogues;

/** The epilogue's result e (an output), its sum over `axes` (all leading axes when absent), and a product reading e. */
const epilogueFn =
  (epi: Epilogue, axes?: number[]): Fn =>
  (...[x, w, h, b, w2]: Array[]): Array[] => {
    const e = epilogues[epi](np.matmul(x, w), h, b);
    return [e, np.sum(e, { axis: axes ?? range(e.ndim - 1) }), np.matmul(e, w2)];
  };
/** The arguments of `epilogueFn` for rows `rows`, K, F, from `seed`. */
const epilogueArgs = (rows: number[], K: number, F: number, seed: number): Array[] => [seq([...rows, K], seed * 0.37), seq([K, F], seed * 0.11 + 1), seq([...rows, F], seed * 0.05 + 2), seq([F], 0.9 + seed * 0.01), seq([F, 3], 0.7)];

/**
 * Row fusions: the value `summed` (a full output) and the value `read` that a product reads.
 * `centered` has two outputs, `x - mean` squared (summed) and the normalized row (read): the
 * summed one is not the fusion's first output.
 */
const rowFns = {
  layerNorm: (x: Array, g: Array) => {
    const m = np.mean(x, { axis: -1, keepdims: true });
    const v = np.mean(np.square(np.subtract(x, m)), { axis: -1, keepdims: true });
    const y = np.multiply(np.divide(np.subtract(x, m), np.sqrt(np.add(v, 1e-5))), g);
    return { summed: y, read: y };
  },
  softmax: (x: Array, _g: Array) => {
    const e = np.exp(np.subtract(x, np.max(x, { axis: -1, keepdims: true })));
    const y = np.divide(e, np.sum(e, { axis: -1, keepdims: true }));
    return { summed: y, read: y };
  },
  centered: (x: Array, _g: Array) => {
    const z = np.subtract(x, np.mean(x, { axis: -1, keepdims: true }));
    const s = np.square(z);
    return { summed: s, read: np.divide(z, np.sqrt(np.add(np.mean(s, { axis: -1, keepdims: true }), 1e-5))) };
  },
};
type RowFn = keyof typeof rowFns;

/** The row fusion's summed output, its sum over `axes` (all leading axes when absent), and a product reading its other value. */
const rowFn =
  (kind: RowFn, axes?: number[]): Fn =>
  (...[x, gamma, w]: Array[]): Array[] => {
    const { summed, read } = rowFns[kind](x, gamma);
    return [summed, np.sum(summed, { axis: axes ?? range(x.ndim - 1) }), np.matmul(read, w)];
  };
const rowArgs = (rows: number[], C: number, seed: number): Array[] => [seq([...rows, C], seed * 0.29), seq([C], 0.7 + seed * 0.01), seq([C, 3], 0.4)];

/** `g` compiled under the systolic backend with the fused sums on or off. */
function compile(g: Fn, args: Array[], on: boolean) {
  setEpilogueColumnSums(on);
  try {
    return withBackend('systolic', () => jit(g).lower(...args).compile());
  } finally {
    setEpilogueColumnSums(initial);
  }
}

type Compiled = ReturnType<typeof compile>;
const kindOf = (i: Compiled['module']['entry']['instructions'][number]): string | undefined => (i.opcode === 'fusion' ? (i.params as { kind?: string }).kind : undefined);
/** Whether a column reduction (kInput) of the executable reads an output of a row fusion (kRow). */
const sumsRowFusion = (c: Compiled): boolean =>
  c.module.entry.instructions.some((i) => {
    const x = i.operands[0];
    return kindOf(i) === 'kInput' && i.operands.length === 1 && kindOf(x.opcode === 'get-tuple-element' ? x.operands[0] : x) === 'kRow';
  });

/** Records the steps of every call that pair a producer (`withSum`) with a sum (`sumBy`). */
function pairedSteps(): WasmStep[] {
  const seen: WasmStep[] = [];
  const run = WasmProgram.prototype.run;
  vi.spyOn(WasmProgram.prototype, 'run').mockImplementation(function (this: WasmProgram, ...a: Parameters<WasmProgram['run']>) {
    if (a[0].withSum !== null || a[0].sumBy !== null) seen.push(a[0]);
    return run.apply(this, a);
  });
  return seen;
}

/** The float64 sums of `e` (of shape `shape`) over `axes`, elements in row-major order, each rounded once to float32. */
function sumsOver(e: Array, shape: number[], axes: number[]): number[] {
  const v = toStorage(e) as Float32Array;
  const kept = range(shape.length).filter((k) => !axes.includes(k));
  const out = new Float64Array(kept.reduce((a, k) => a * shape[k], 1));
  const idx = new globalThis.Array<number>(shape.length).fill(0);
  for (let i = 0; i < v.length; i++) {
    let o = 0;
    for (const k of kept) o = o * shape[k] + idx[k];
    out[o] += v[i];
    for (let k = shape.length - 1; k >= 0 && ++idx[k] === shape[k]; k--) idx[k] = 0;
  }
  return globalThis.Array.from(new Uint32Array(Float32Array.from(out).buffer));
}

/**
 * The law, on 1, 2, 3 and again 1 thread(s), with other arguments on each pass (`argsAt(pass)`,
 * so that a sum step that did not run cannot hand on the last call's output): the fused
 * executable gives the separate one's bits; its sum (output 1) is output 0 summed over `axes`
 * in row order in float64; the producer is paired with the sum step exactly when `paired`; and
 * a paired producer computed the sum in every call on one thread (its kernel ran: `ran` moved),
 * and on threads whenever it runs on one. Returns the producer's step (null when unpaired).
 */
function checkLaw(g: Fn, argsAt: (pass: number) => Array[], shape: number[], axes: number[], paired: boolean | ((c: Compiled) => boolean)): WasmStep | null {
  const seen = pairedSteps();
  try {
    return lawWith(seen, g, argsAt, shape, axes, paired);
  } finally {
    vi.restoreAllMocks();
  }
}
/** `checkLaw`'s body, with `seen` recording the calls' paired steps. */
function lawWith(seen: WasmStep[], g: Fn, argsAt: (pass: number) => Array[], shape: number[], axes: number[], pairs: boolean | ((c: Compiled) => boolean)): WasmStep | null {
  const fused = compile(g, argsAt(0), true);
  const paired = typeof pairs === 'boolean' ? pairs : pairs(fused);
  const separate = compile(g, argsAt(0), false);
  withBackend('systolic', () => fused.call(argsAt(0)));
  const producer = seen.find((s) => s.withSum !== null) ?? null;
  expect(producer !== null, 'the producer pairs with the sum').toBe(paired);
  if (producer !== null) expect(seen.some((s) => s.sumBy === producer.withSum)).toBe(true);
  [1, 2, 3, 1].forEach((t, pass) => {
    setNumThreads(t);
    setKernelThreads(t);
    const args = argsAt(pass + 1);
    const before = producer?.withSum!.ran;
    const [e, sum, p] = withBackend('systolic', () => fused.call(args)) as Array[];
    const ran = producer?.withSum!.ran;
    const [e0, sum0, p0] = withBackend('systolic', () => separate.call(args)) as Array[];
    expect(bits(e)).toEqual(bits(e0));
    expect(bits(sum)).toEqual(bits(sum0));
    expect(bits(p)).toEqual(bits(p0));
    expect(bits(sum)).toEqual(sumsOver(e, shape, axes));
    if (producer !== null && (t === 1 || !producer.parallel || producer.withSum!.always)) expect(ran).not.toBe(before);
  });
  return producer;
}

/**
 * The gradients (x, gamma, beta) of a layer norm's loss: the gamma/beta gradients are column
 * sums of dy * xc * inv and of dy, a two-output column reduction. `operands`: the loss reads the
 * layer norm through a matmul, so dy is a dot that the backward row fusion reads (an operand),
 * and xc and inv come from the forward row fusion (operands too), as in the GPT; `outputs`: the
 * loss reads it elementwise, so one row fusion computes forward and backward and the sums read
 * two of its outputs.
 */
type LnGrad = 'operands' | 'outputs';
const lnGradFn =
  (kind: LnGrad): Fn =>
  (...[x, g, b, t, w]: Array[]): Array[] => {
    const loss = (x: Array, g: Array, b: Array): Array => {
      const xc = np.subtract(x, np.mean(x, { axis: -1, keepdims: true }));
      const v = np.mean(np.square(xc), { axis: -1, keepdims: true });
      const y = np.add(np.multiply(np.multiply(xc, np.divide(1, np.sqrt(np.add(v, 1e-5)))), g), b);
      return np.sum(np.multiply(np.tanh(kind === 'operands' ? np.matmul(y, w) : y), t));
    };
    return valueAndGrad(loss, { argnums: [0, 1, 2] })(x, g, b)[1] as Array[];
  };
const lnGradArgs = (kind: LnGrad, rows: number[], C: number, seed: number): Array[] => [seq([...rows, C], seed * 0.29), seq([C], 0.7 + seed * 0.01), seq([C], 0.3 + seed * 0.02), seq([...rows, kind === 'operands' ? 3 : C], 0.2 + seed * 0.03), seq([C, 3], 0.4)];

/**
 * The law for the layer-norm gradients: on 1, 2, 3 and again 1 thread(s), new arguments each
 * pass, the fused executable gives the separate one's bits for dx, dgamma and dbeta; the
 * two-output sum pairs with the backward row fusion exactly when `paired`, and then the row
 * fusion computed it in every call on one thread.
 */
function lnGradLaw(kind: LnGrad, rows: number[], C: number, seed: number, paired: boolean): void {
  const seen = pairedSteps();
  try {
    const argsAt = (pass: number): Array[] => lnGradArgs(kind, rows, C, seed + pass);
    const g = lnGradFn(kind);
    const fused = compile(g, argsAt(0), true);
    const separate = compile(g, argsAt(0), false);
    withBackend('systolic', () => fused.call(argsAt(0)));
    const producer = seen.find((s) => s.withSum !== null) ?? null;
    const sum = seen.find((s) => producer !== null && s.sumBy === producer.withSum) ?? null;
    expect(producer !== null, 'the backward row fusion pairs with the gamma/beta sums').toBe(paired);
    if (paired) {
      expect(producer!.outputs === null ? 1 : producer!.outputs.length).toBe(kind === 'operands' ? 1 : 3);
      expect(sum?.outputs?.length, 'a two-output sum').toBe(2);
    }
    [1, 2, 3, 1].forEach((t, pass) => {
      setNumThreads(t);
      setKernelThreads(t);
      const args = argsAt(pass + 1);
      const before = producer?.withSum!.ran;
      const got = withBackend('systolic', () => fused.call(args)) as Array[];
      const ran = producer?.withSum!.ran;
      const want = withBackend('systolic', () => separate.call(args)) as Array[];
      got.forEach((x, q) => expect(bits(x), `output ${q} at ${t} thread(s)`).toEqual(bits(want[q])));
      if (producer !== null && (t === 1 || !producer.parallel || producer.withSum!.always)) expect(ran).not.toBe(before);
    });
  } finally {
    vi.restoreAllMocks();
  }
}

afterEach(() => {
  setEpilogueColumnSums(initial);
  setRowOperandSums(initialOperandSums);
  setRowSumsOneThread(initialOneThread);
  setParallelWork(initialWork);
  setKernelThreads(null);
  setNumThreads(null);
  vi.restoreAllMocks();
});

describe('dot epilogues and row fusions with their column sum', () => {
  it('law: an epilogue with its sum: fused == separate == the rows summed in order in float64, for random shapes, 1-3 threads', () => {
    fc.assert(
      fc.property(
        fc.record({
          lead: fc.oneof(fc.constant([] as number[]), fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 2 })),
          M: fc.integer({ min: 1, max: 70 }),
          K: fc.integer({ min: 1, max: 24 }),
          F: fc.oneof(fc.integer({ min: 1, max: 70 }), fc.constantFrom(128, 512, 1030)),
          epi: fc.constantFrom<Epilogue>('bias', 'geluGrad'),
          seed: fc.integer({ min: 1, max: 1000 }),
        }),
        ({ lead, M, K, F, epi, seed }) => {
          const rows = [...lead, M];
          checkLaw(epilogueFn(epi), (pass) => epilogueArgs(rows, K, F, seed + pass), [...rows, F], range(rows.length), true);
        },
      ),
      { numRuns: 25, examples: [[{ lead: [16], M: 128, K: 8, F: 512, epi: 'geluGrad', seed: 3 }], [{ lead: [], M: 5, K: 3, F: 7, epi: 'bias', seed: 2 }]] },
    );
  });

  it('law: a row fusion (layer norm, softmax, two outputs) with the sum of an output: fused == separate == the rows summed in order, 1-3 threads', () => {
    let pairedRuns = 0;
    fc.assert(
      fc.property(
        fc.record({ lead: fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 0, maxLength: 2 }), M: fc.integer({ min: 1, max: 60 }), C: fc.oneof(fc.integer({ min: 2, max: 70 }), fc.constant(128)), kind: fc.constantFrom<RowFn>('layerNorm', 'softmax', 'centered'), seed: fc.integer({ min: 1, max: 1000 }) }),
        ({ lead, M, C, kind, seed }) => {
          const rows = [...lead, M];
          // Every sum of a row fusion's output pairs (with M = 1 a loop fusion may compute the summed rows: unpaired).
          const producer = checkLaw(rowFn(kind), (pass) => rowArgs(rows, C, seed + pass), [...rows, C], range(rows.length), sumsRowFusion);
          // The two-output fusion is a tuple whose summed output is its second.
          if (producer !== null) {
            expect(producer.outputs !== null).toBe(kind === 'centered');
            pairedRuns++;
          } else expect(M).toBe(1);
        },
      ),
      { numRuns: 20, examples: [[{ lead: [16], M: 128, C: 128, kind: 'layerNorm', seed: 3 }], [{ lead: [], M: 7, C: 5, kind: 'softmax', seed: 2 }], [{ lead: [2], M: 9, C: 6, kind: 'centered', seed: 4 }], [{ lead: [2], M: 1, C: 2, kind: 'layerNorm', seed: 1 }]] },
    );
    expect(pairedRuns).toBeGreaterThan(0);
  });

  it('sums over a prefix of the leading axes or over a middle axis: paired where the fused kernel computes that sum, else left to their own kernel', () => {
    const shape = [3, 4, 6];
    // An epilogue's fused kernel is the column reduction itself over the epilogue's values: a sum
    // over any leading axes. A row fusion's adds each row into one sum per column: all rows only.
    // A sum over a middle axis is no column reduction of one parameter (a plain reduce): unpaired.
    for (const [axes, epiPaired, rowPaired] of [
      [[0], true, false],
      [[1], false, false],
      [[0, 1], true, true],
    ] as const) {
      checkLaw(epilogueFn('geluGrad', [...axes]), (pass) => epilogueArgs(shape.slice(0, 2), 5, shape[2], 7 + pass), shape, [...axes], epiPaired);
      for (const kind of ['layerNorm', 'centered'] as const) {
        checkLaw(rowFn(kind, [...axes]), (pass) => rowArgs(shape.slice(0, 2), shape[2], 5 + pass), shape, [...axes], rowPaired);
      }
    }
  });

  it('a sum the epilogue computed in one call is computed by its own kernel in the next, on threads', () => {
    // (epilogues from PARALLEL_WORK on run on threads: this one, 128 x 96 with tanh, does)
    setParallelWork(PARALLEL_WORK);
    const args = epilogueArgs([128], 8, 96, 1);
    const fused = compile(epilogueFn('geluGrad'), args, true);
    const separate = compile(epilogueFn('geluGrad'), args, false);
    const args2 = epilogueArgs([128], 8, 96, 2);
    const want = [args, args2].map((a) => bits((withBackend('systolic', () => separate.call(a)) as Array[])[1]));
    const steps = pairedSteps();
    withBackend('systolic', () => fused.call(args));
    const step = steps.find((s) => s.withSum !== null)!;
    expect(step).toBeDefined();
    let onThreads = 0;
    for (const [t1, t2] of [[1, 2], [2, 1], [1, 1], [2, 2]]) {
      for (const [t, a, w] of [[t1, args, want[0]], [t2, args2, want[1]]] as const) {
        setKernelThreads(t);
        const before = step.withSum!.ran;
        expect(bits((withBackend('systolic', () => fused.call(a)) as Array[])[1])).toEqual(w);
        // On one thread the epilogue computed the sum; on threads it ran its loop kernel (the sum its own).
        if (t === 1) expect(step.withSum!.ran).not.toBe(before);
        else if (step.parallel) {
          expect(step.withSum!.ran).toBe(before);
          onThreads++;
        }
      }
    }
    if (onThreads === 0) expect(step.parallel).toBe(false); // (no worker threads here)
  });

  it('law: the layer norms\' gamma/beta sums (of a row fusion\'s operands, or of two of its outputs) computed by the backward row kernel: fused == separate, 1-3 threads', () => {
    fc.assert(
      fc.property(
        fc.record({ lead: fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 0, maxLength: 2 }), M: fc.integer({ min: 2, max: 40 }), C: fc.oneof(fc.integer({ min: 2, max: 70 }), fc.constant(128)), kind: fc.constantFrom<LnGrad>('operands', 'outputs'), seed: fc.integer({ min: 1, max: 1000 }) }),
        ({ lead, M, C, kind, seed }) => lnGradLaw(kind, [...lead, M], C, seed, true),
      ),
      { numRuns: 16, examples: [[{ lead: [16], M: 128, C: 128, kind: 'operands', seed: 3 }], [{ lead: [], M: 7, C: 5, kind: 'outputs', seed: 2 }], [{ lead: [2], M: 9, C: 6, kind: 'operands', seed: 4 }]] },
    );
  });

  it('setRowOperandSums(false) leaves sums of a row fusion\'s operands to their own kernel (those of its outputs still pair)', () => {
    setRowOperandSums(false);
    lnGradLaw('operands', [3, 5], 12, 1, false);
    lnGradLaw('outputs', [3, 5], 12, 1, true);
    expect(() => setRowOperandSums('no' as unknown as boolean)).toThrow(/setRowOperandSums: on must be a boolean; got no/);
  });

  /** `g` fused and separate: the same bits on 1, 2 and 1 thread(s) with new arguments each pass; returns whether a producer paired with a sum. */
  const fusedEqualsSeparate = (g: Fn, argsAt: (pass: number) => Array[]): boolean => {
    const seen = pairedSteps();
    try {
      const fused = compile(g, argsAt(0), true);
      const separate = compile(g, argsAt(0), false);
      withBackend('systolic', () => fused.call(argsAt(0)));
      [1, 2, 1].forEach((t, pass) => {
        setNumThreads(t);
        setKernelThreads(t);
        const got = withBackend('systolic', () => fused.call(argsAt(pass + 1))) as Array[];
        const want = withBackend('systolic', () => separate.call(argsAt(pass + 1))) as Array[];
        got.forEach((x, q) => expect(bits(x), `output ${q} at ${t} thread(s)`).toEqual(bits(want[q])));
      });
      return seen.some((s) => s.withSum !== null);
    } finally {
      vi.restoreAllMocks();
    }
  };
  const layerNorm = (x: Array, g: Array): Array => rowFns.layerNorm(x, g).summed;

  it('a sum of values with an iota (along either axis) next to a layer norm compiles, stays in its own kernel and gives the same bits', () => {
    for (const dim of [0, 1]) {
      const g: Fn = (x: Array, gamma: Array) => [layerNorm(x, gamma), np.sum(np.multiply(x, lax.broadcastedIota('float32', [6, 10], dim)), { axis: 0 })];
      const argsAt = (pass: number): Array[] => [seq([6, 10], 0.3 + pass * 0.01), seq([10], 0.7 + pass * 0.02)];
      expect(fusedEqualsSeparate(g, argsAt), `iota along ${dim}`).toBe(false);
    }
  });

  it('a sum over the rows of a row fusion\'s operand times its [C] operand broadcast along the row (x * gamma, dy * gamma) pairs with it: the same bits', () => {
    const argsAt = (pass: number): Array[] => [seq([3, 7, 12], 0.3 + pass * 0.01), seq([12], 0.7 + pass * 0.02), seq([3, 7, 12], 0.5 + pass * 0.03)];
    const xg: Fn = (x: Array, gamma: Array) => [layerNorm(x, gamma), np.sum(np.multiply(x, gamma), { axis: [0, 1] })];
    expect(fusedEqualsSeparate(xg, argsAt), 'x * gamma').toBe(true);
    // dy * gamma: the layer norm's input gradient reads dy * gamma; its sum over the rows rides along.
    const dyg: Fn = (x: Array, gamma: Array, dy: Array) => {
      const xc = np.subtract(x, np.mean(x, { axis: -1, keepdims: true }));
      const inv = np.divide(1, np.sqrt(np.add(np.mean(np.square(xc), { axis: -1, keepdims: true }), 1e-5)));
      const gy = np.multiply(dy, gamma);
      const dx = np.multiply(inv, np.subtract(gy, np.mean(gy, { axis: -1, keepdims: true })));
      return [dx, np.sum(np.multiply(dy, gamma), { axis: [0, 1] })];
    };
    expect(fusedEqualsSeparate(dyg, argsAt), 'dy * gamma').toBe(true);
  });

  it("a sum of two of a row fusion's outputs that different stages of its row kernel compute stays in its own kernel (a sum of one stage's outputs pairs): the same bits", () => {
    // The layer norm's row fusion: s = (x - mean(x))^2 from the walk of its first stage, y = (x -
    // mean(x)) / sqrt(mean(s) + eps) from the second's (after the mean of s). y is read by a
    // product traced before the sum, so the sum's product of outputs stays in the sum's kernel.
    const withSumOf = (pick: (s: Array, y: Array) => Array): Fn => (x: Array, w: Array) => {
      const z = np.subtract(x, np.mean(x, { axis: -1, keepdims: true }));
      const s = np.square(z);
      const y = np.divide(z, np.sqrt(np.add(np.mean(s, { axis: -1, keepdims: true }), 1e-5)));
      const p = np.matmul(y, w);
      return [p, np.sum(pick(s, y), { axis: [0, 1] })];
    };
    const argsAt = (pass: number): Array[] => [seq([3, 7, 12], 0.3 + pass * 0.01), seq([12, 3], 0.6 + pass * 0.02)];
    const across = withSumOf((s, y) => np.multiply(s, y));
    // (the sum reads both outputs of the row fusion, which computes both)
    const e = compile(across, argsAt(0), true).module.entry;
    const sum = e.instructions.find((i) => kindOf(i) === 'kInput')!;
    expect(sum.operands.length).toBe(2);
    const row = sum.operands.map((o) => (o.opcode === 'get-tuple-element' ? o.operands[0] : o));
    expect(kindOf(row[0])).toBe('kRow');
    expect(row[1]).toBe(row[0]);
    expect(fusedEqualsSeparate(across, argsAt), 's * y (stages 1 and 2)').toBe(false);
    expect(fusedEqualsSeparate(withSumOf((_s, y) => np.multiply(y, y)), argsAt), 'y * y (stage 2)').toBe(true);
    expect(fusedEqualsSeparate(withSumOf((s) => np.multiply(s, s)), argsAt), 's * s (stage 1)').toBe(true);
  });

  it('a row fusion that reads every operand of a sum but runs after it (it reads the sum) is not paired with it', () => {
    // s = the column sum of x * y; the row fusion normalizes x * y + s: it reads x, y and s.
    const g: Fn = (x: Array, y: Array) => {
      const s = np.sum(np.multiply(x, y), { axis: [0, 1] });
      const h = np.add(np.multiply(x, y), s);
      const c = np.subtract(h, np.mean(h, { axis: -1, keepdims: true }));
      return [s, np.divide(c, np.sqrt(np.add(np.mean(np.square(c), { axis: -1, keepdims: true }), 1e-5)))];
    };
    const argsAt = (pass: number): Array[] => [seq([3, 5, 12], 0.3 + pass * 0.01), seq([3, 5, 12], 0.5 + pass * 0.02)];
    const seen = pairedSteps();
    const fused = compile(g, argsAt(0), true);
    const separate = compile(g, argsAt(0), false);
    expect(fused.module.entry.instructions.some((i) => kindOf(i) === 'kRow' && i.operands.length >= 3)).toBe(true);
    for (const pass of [1, 2]) {
      const got = withBackend('systolic', () => fused.call(argsAt(pass))) as Array[];
      const want = withBackend('systolic', () => separate.call(argsAt(pass))) as Array[];
      got.forEach((x, q) => expect(bits(x)).toEqual(bits(want[q])));
    }
    expect(seen.some((s) => s.withSum !== null)).toBe(false);
  });

  it('setRowSumsOneThread: on threads a row fusion whose sums are a large part of its work runs its kernel with them on one thread (on), or on threads with the sums after it (off)', () => {
    // (row kernels from PARALLEL_WORK on run on threads: this layer-norm backward, 256 rows of 128, does)
    setParallelWork(PARALLEL_WORK);
    const args = (seed: number): Array[] => lnGradArgs('operands', [4, 64], 128, seed);
    const g = lnGradFn('operands');
    const separate = compile(g, args(0), false);
    for (const on of [true, false]) {
      setRowSumsOneThread(on);
      const fused = compile(g, args(0), true);
      const seen = pairedSteps();
      withBackend('systolic', () => fused.call(args(0)));
      const step = seen.find((s) => s.withSum !== null)!;
      vi.restoreAllMocks();
      expect(step.withSum!.always).toBe(on);
      expect(step.parallel || !kernelThreadsAvailable()).toBe(true);
      let onThreads = 0;
      for (const [t, seed] of [[2, 1], [1, 2], [2, 3]]) {
        setKernelThreads(t);
        const before = step.withSum!.ran;
        const got = withBackend('systolic', () => fused.call(args(seed))) as Array[];
        const want = withBackend('systolic', () => separate.call(args(seed))) as Array[];
        got.forEach((x, q) => expect(bits(x)).toEqual(bits(want[q])));
        if (t === 1 || on) expect(step.withSum!.ran).not.toBe(before);
        else if (step.parallel) {
          expect(step.withSum!.ran).toBe(before);
          onThreads++;
        }
      }
      if (!on && onThreads === 0) expect(step.parallel).toBe(false); // (no worker threads here)
    }
    expect(() => setRowSumsOneThread(0 as unknown as boolean)).toThrow(/setRowSumsOneThread: on must be a boolean; got 0/);
  });

  it('setRowSumsOneThread leaves a row fusion on threads when its sums are under a quarter of its work, or its work is ROW_SUMS_ONE_THREAD_MAX times the parallel threshold', () => {
    setRowSumsOneThread(true);
    setParallelWork(PARALLEL_WORK);
    /** The paired producer's `always` for `g` at `args`. */
    const alwaysOf = (g: Fn, args: Array[]): boolean => {
      const fused = compile(g, args, true);
      const seen = pairedSteps();
      try {
        withBackend('systolic', () => fused.call(args));
        const step = seen.find((s) => s.withSum !== null);
        expect(step, 'paired').toBeDefined();
        return step!.withSum!.always;
      } finally {
        vi.restoreAllMocks();
      }
    };
    // The layer-norm backward with its gamma/beta sums (1/3 of its work): serial below the cap, on threads from it on.
    // (its work is 384 per row of 128: 1.5 PARALLEL_WORK at 256 rows, above 32 from 5462 rows)
    expect(ROW_SUMS_ONE_THREAD_MAX).toBe(32);
    expect(alwaysOf(lnGradFn('operands'), lnGradArgs('operands', [4, 64], 128, 1))).toBe(true);
    expect(alwaysOf(lnGradFn('operands'), lnGradArgs('operands', [40, 128], 128, 1))).toBe(true);
    expect(alwaysOf(lnGradFn('operands'), lnGradArgs('operands', [43, 128], 128, 1))).toBe(false);
    // A layer norm forward with a heavy epilogue and the plain sum of its input over the rows: a small part of its work.
    const g: Fn = (x: Array, gamma: Array) => [np.exp(rowFns.layerNorm(x, gamma).summed), np.sum(x, { axis: [0, 1] })];
    expect(alwaysOf(g, [seq([4, 64, 128], 0.3), seq([128], 0.7)])).toBe(false);
  });

  it('setEpilogueColumnSums rejects a non-boolean', () => {
    expect(() => setEpilogueColumnSums(1 as unknown as boolean)).toThrow(/setEpilogueColumnSums: on must be a boolean; got 1/);
  });
});
