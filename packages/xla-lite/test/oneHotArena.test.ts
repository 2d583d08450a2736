// The one-hot primitives in the executable's arena (js/oneHotKernels.ts `setOneHotInArena`,
// wasm/oneHotKernel.ts `arenaKernels`): where the result storage lies in the backend's arena
// memory, the kernels run as WebAssembly over it, reading operands in place. They must give the
// bits of the path over host arrays (itself pinned against the replaced dots, oneHotDot.test.ts)
// for every index (in range, negative, past the classes, non-integer), precision, flush setting,
// operand dtype and placement; and the executable must hand them its arena values without copies.
import { type Array, bf16, grad, nn, np, systolic, withBackend } from '@tpukit/core';
import { arenaHost, type HostArray, type ShapedArray } from '@tpukit/core/internal';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { arenaTraffic, jit } from '../src/index';
import { oneHotGatherP, oneHotInArenaEnabled, oneHotSegmentSumP, type OneHotParams, setOneHotInArena } from '../src/internal';
import { arenaKernels } from '../src/wasm/oneHotKernel';

afterEach(() => {
  setOneHotInArena(true);
  systolic.configure({ flushSubnormals: false });
});

const bitsOf = (x: Float32Array): Uint32Array => new Uint32Array(Float32Array.from(x).buffer);
/**
 * The bits, every NaN as one NaN: a sum of inf and -inf is NaN with the sign and payload of the
 * hardware's default NaN, which SIMD lanes (negative) and V8's float64 arithmetic stored into a
 * Float32Array (positive) spell differently; the dot does not specify it either.
 */
const bitsNaN = (x: Float32Array): Uint32Array => bitsOf(x).map((b) => ((b & 0x7fffffff) > 0x7f800000 ? 0x7fc00000 : b));

/** A region of the arena memory for `n` float32 values, filled with `fill`; released by `done`. */
function region(n: number, fill: number): { view: Float32Array; done: () => void } {
  const host = arenaHost()!;
  const at = host.reserve(Math.max(4 * n, 16));
  expect(at).toBeGreaterThanOrEqual(0);
  const view = new Float32Array(host.buffer(), at, n).fill(fill);
  return { view, done: () => host.release(at) };
}

/** `prim` into `out` as the executable calls it (`implInto`). */
function runInto(prim: typeof oneHotGatherP, args: HostArray[], p: OneHotParams, shape: number[], out: Float32Array): Float32Array {
  prim.implInto!(args, p, { shape, dtype: 'float32', weakType: false } as ShapedArray, out);
  return out;
}

/** `prim` into a result in the arena gives its bits into a host array (every NaN as one NaN). */
function expectArenaBits(prim: typeof oneHotGatherP, args: HostArray[], p: OneHotParams, shape: number[]): void {
  const n = shape[0] * shape[1];
  const want = runInto(prim, args, p, shape, new Float32Array(n).fill(7));
  const out = region(n, 7);
  runInto(prim, args, p, shape, out.view);
  expect(bitsNaN(out.view)).toEqual(bitsNaN(want));
  out.done();
}

const specials = [0, -0, 1e-40, -1e-40, 1.1754942e-38, Infinity, -Infinity, NaN, 3.0000002, -1.00390625, 65504.5, 3.4e38];

describe('one-hot primitives in the arena', () => {
  it('law: the arena kernels equal the path over host arrays bit for bit (indices, precisions, flush, dtypes, operands in or out of the arena)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 9 }),
        fc.constantFrom(4, 8, 12, 3, 6),
        fc.integer({ min: 1, max: 40 }),
        fc.constantFrom(null, 'default', 'high', 'highest'),
        fc.constantFrom('float32', 'bfloat16'),
        fc.constantFrom('int32', 'float32'),
        fc.boolean(),
        fc.boolean(),
        fc.integer({ min: 0, max: 1 << 30 }),
        (V, N, M, precision, xDtype, idxDtype, flush, operandInArena, seed) => {
          let s = seed;
          const rnd = (): number => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32);
          const value = (): number => (rnd() < 0.3 ? specials[Math.floor(rnd() * specials.length)] : (rnd() - 0.5) * 2 ** Math.floor(rnd() * 40 - 20));
          // Indices in range, negative, past the classes, and (float) non-integer.
          const idxVals = Float64Array.from({ length: M }, () => {
            const r = rnd();
            return r < 0.1 ? -1 - Math.floor(rnd() * 3) : r < 0.2 ? V + Math.floor(rnd() * 3) : r < 0.25 && idxDtype === 'float32' ? Math.floor(rnd() * V) + 0.5 : Math.floor(rnd() * V);
          });
          const index: HostArray = { data: idxDtype === 'int32' ? Int32Array.from(idxVals) : Float32Array.from(idxVals), shape: [M], dtype: idxDtype };
          const host = (vals: Float32Array, shape: number[], inArena: boolean): { x: HostArray; done: () => void } => {
            if (xDtype === 'bfloat16') return { x: { data: bf16.encode(vals), shape, dtype: 'bfloat16' }, done: () => {} };
            if (!inArena) return { x: { data: vals, shape, dtype: 'float32' }, done: () => {} };
            const r = region(vals.length, 0);
            r.view.set(vals);
            return { x: { data: r.view, shape, dtype: 'float32' }, done: r.done };
          };
          const p: OneHotParams = { classes: V, precision, dtype: 'float32', nominalFlops: 0 };
          systolic.configure({ flushSubnormals: flush });
          withBackend('systolic', () => {
            // Gather (M >= V: the whole table rounded once, the path the arena kernels take).
            const Mg = M + V;
            const gIdx: HostArray = { data: index.data instanceof Int32Array ? Int32Array.from({ length: Mg }, (_, m) => (m < M ? index.data[m] : m - M)) : Float32Array.from({ length: Mg }, (_, m) => (m < M ? index.data[m] : m - M)), shape: [Mg], dtype: idxDtype };
            const t = host(Float32Array.from({ length: V * N }, value), [V, N], operandInArena);
            expectArenaBits(oneHotGatherP, [t.x, gIdx], p, [Mg, N]);
            t.done();
            // Segment sum.
            const v = host(Float32Array.from({ length: M * N }, value), [M, N], operandInArena);
            expectArenaBits(oneHotSegmentSumP, [v.x, index], p, [V, N]);
            v.done();
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it('every row in its place: each gathered row and each summed token, at the GPT embedding size', () => {
    const [V, N, M] = [256, 128, 2048];
    withBackend('systolic', () => {
      // Values exact in bf16 (8 significant bits): row v, column n holds (v + 1) * 2^(n % 16 - 8);
      // token m's value row holds 1 + (m + n) % 8, so every sum is an exact float32 integer.
      const cell = (v: number, n: number): number => (v + 1) * 2 ** ((n % 16) - 8);
      const table = region(V * N, 0);
      for (let v = 0; v < V; v++) for (let n = 0; n < N; n++) table.view[v * N + n] = cell(v, n);
      const idx = Int32Array.from({ length: M }, (_, m) => (m % 11 === 0 ? -1 : m % 13 === 0 ? V + m : (m * 7919) % V));
      const p: OneHotParams = { classes: V, precision: null, dtype: 'float32', nominalFlops: 0 };
      const out = region(M * N, 7);
      runInto(oneHotGatherP, [{ data: table.view, shape: [V, N], dtype: 'float32' }, { data: idx, shape: [M], dtype: 'int32' }], p, [M, N], out.view);
      for (let m = 0; m < M; m++) {
        const v = idx[m];
        const want = v >= 0 && v < V ? Float32Array.from({ length: N }, (_, n) => cell(v, n)) : new Float32Array(N);
        expect(out.view.subarray(m * N, m * N + N), `row ${m} (index ${v})`).toEqual(want);
      }
      const token = (m: number, n: number): number => 1 + ((m + n) % 8);
      const values = region(M * N, 0);
      for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) values.view[m * N + n] = token(m, n);
      const sums = region(V * N, 7);
      runInto(oneHotSegmentSumP, [{ data: values.view, shape: [M, N], dtype: 'float32' }, { data: idx, shape: [M], dtype: 'int32' }], p, [V, N], sums.view);
      const want = new Float32Array(V * N);
      for (let m = 0; m < M; m++) if (idx[m] >= 0 && idx[m] < V) for (let n = 0; n < N; n++) want[idx[m] * N + n] += token(m, n);
      for (let v = 0; v < V; v++) expect(sums.view.subarray(v * N, v * N + N), `row ${v}`).toEqual(want.subarray(v * N, v * N + N));
      for (const r of [table, out, values, sums]) r.done();
    });
  });

  it('a scratch region the arena memory cannot hold: the path over host arrays, same bits', () => {
    withBackend('systolic', () => {
      const host = arenaHost()!;
      const k = arenaKernels(host)!;
      k.releaseScratch();
      const reserve = host.reserve.bind(host);
      const [V, N, M] = [5, 8, 12];
      const table = Float32Array.from({ length: V * N }, (_, i) => Math.sin(i) * 3);
      const idx = Int32Array.from({ length: M }, (_, m) => (m % (V + 2)) - 1);
      const p: OneHotParams = { classes: V, precision: null, dtype: 'float32', nominalFlops: 0 };
      const want = runInto(oneHotGatherP, [{ data: table, shape: [V, N], dtype: 'float32' }, { data: idx, shape: [M], dtype: 'int32' }], p, [M, N], new Float32Array(M * N));
      const out = region(M * N, 7);
      (host as { reserve: (b: number) => number }).reserve = () => -1;
      try {
        runInto(oneHotGatherP, [{ data: table, shape: [V, N], dtype: 'float32' }, { data: idx, shape: [M], dtype: 'int32' }], p, [M, N], out.view);
      } finally {
        (host as { reserve: (b: number) => number }).reserve = reserve;
      }
      expect(bitsOf(out.view)).toEqual(bitsOf(want));
      out.done();
    });
  });

  it('the executable hands the one-hot primitives its arena values: no copies, the same bits as without (TPUKIT_ONEHOT_ARENA=0) and as the dots', () => {
    const [V, N, B, T] = [16, 8, 4, 32];
    const w = np.array(Float32Array.from({ length: V * N }, (_, i) => Math.sin(i * 1.7) * 0.9)).reshape([V, N]);
    const x = np.array(Int32Array.from({ length: B * T }, (_, i) => ((i * 5) % (V + 3)) - 1), 'int32').reshape([B, T]);
    const g = np.array(Float32Array.from({ length: B * T * N }, (_, i) => Math.cos(i * 0.37))).reshape([B, T, N]);
    // The gather's result read by a loop fusion (tanh), the segment sum's values written by one
    // (the tanh's gradient) and its result read by one (the update).
    const loss = (w: Array, x: Array, g: Array): Array => np.sum(np.multiply(np.tanh(np.matmul(nn.oneHot(x, V), w)), g));
    const step = (w: Array, x: Array, g: Array): Array => np.subtract(w, np.multiply(grad(loss)(w, x, g), 0.25));
    const compile = (arena: boolean, oneHot = true) => {
      setOneHotInArena(arena);
      try {
        return withBackend('systolic', () => jit(step).lower(w, x, g).compile({ oneHot }));
      } finally {
        setOneHotInArena(true);
      }
    };
    expect(oneHotInArenaEnabled()).toBe(true);
    const on = compile(true);
    const off = compile(false);
    const dots = compile(true, false);
    expect(on.passStats.oneHot).toBe(2);
    const traffic = (c: typeof on): { out: Uint32Array; copied: number } => {
      withBackend('systolic', () => c.call([w, x, g])); // (first call: results pooled from now on)
      const t0 = arenaTraffic();
      const r = withBackend('systolic', () => c.call([w, x, g]))[0] as Array;
      const t1 = arenaTraffic();
      return { out: bitsOf(r.dataSync() as Float32Array), copied: t1.copiedInBytes - t0.copiedInBytes + t1.copiedOutBytes - t0.copiedOutBytes };
    };
    const a = traffic(on);
    const b = traffic(off);
    const d = traffic(dots);
    expect(a.out).toEqual(b.out);
    expect(a.out).toEqual(d.out);
    // Without: the gathered rows copied in, the tanh's gradient copied out, the sums copied in.
    expect(b.copied - a.copied).toBe(4 * (B * T * N + B * T * N + V * N));
  });
});
