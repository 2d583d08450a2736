/**
 * The GEMM's micro-kernel shape changes speed only: the 5 x 8 kernel (A rows broadcast from one
 * vector load by shuffles, partial last row panels) gives, bit for bit, the results of the
 * default 4 x 8 kernel over shapes, layouts, dtypes, precisions and subnormal flushing, because
 * every output element still adds its products in k order into one f32 accumulator.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { aval } from '../../aval';
import { bf16 } from '../../index';
import { wasmFeatures } from '../../wasm/features';
import { GemmEngine, gemmKernelChoice } from './gemmEngine';
import { SystolicBackend } from './backend';
import { applyThreads } from './threads';
import { getNumThreads, setNumThreads } from '../../threads';
import { MIN_GAIN, measureGain } from './gemmTune';
import { GEMM_SHAPE_4X8, GEMM_SHAPE_5X8, buildGemmModule } from './gemmModule';
import { mxuDotGeneral } from './mxuDot';
import { data, engineMemory } from '../../../test/systolicEngines';


describe('systolic GEMM micro-kernel shapes', () => {
  const relaxedModes = wasmFeatures().relaxedSimd ? [true, false] : [false];
  const engines = relaxedModes.map((relaxed) => ({
    relaxed,
    five: new GemmEngine({ relaxed, shape: GEMM_SHAPE_5X8 }),
    four: new GemmEngine({ relaxed, shape: GEMM_SHAPE_4X8 }),
  }));

  it('without TPUKIT_GEMM_KERNEL the kernel is measured: 5 x 8 where it runs MIN_GAIN faster, once per process; a bad blocking is refused by name', () => {
    const before = process.env.TPUKIT_GEMM_KERNEL;
    try {
      delete process.env.TPUKIT_GEMM_KERNEL;
      const choice = gemmKernelChoice(false);
      expect(choice.by).toBe('tuned');
      expect(choice.gain).toBeGreaterThan(0);
      expect(choice.shape).toBe(choice.gain! >= MIN_GAIN ? GEMM_SHAPE_5X8 : GEMM_SHAPE_4X8);
      expect(gemmKernelChoice(false)).toBe(choice);
      expect(new GemmEngine({ relaxed: false }).shape).toBe(choice.shape);
      process.env.TPUKIT_GEMM_KERNEL = 'auto';
      expect(gemmKernelChoice(false)).toBe(choice);
      // (the measurement itself: a positive, finite rate ratio)
      const g = measureGain(false, 1, 3);
      expect(Number.isFinite(g) && g > 0).toBe(true);
    } finally {
      if (before === undefined) delete process.env.TPUKIT_GEMM_KERNEL;
      else process.env.TPUKIT_GEMM_KERNEL = before;
    }
    expect([GEMM_SHAPE_5X8.mr, GEMM_SHAPE_5X8.nv, GEMM_SHAPE_5X8.aLoad]).toEqual([5, 2, 'vector']);
    expect(() => buildGemmModule({ shape: { ...GEMM_SHAPE_5X8, mc: 128 }, relaxed: false, shared: false, maxPages: 16 })).toThrow(/buildGemmModule: mc 128 must be a multiple of mr 5/);
  });

  it('configure({ gemmKernel }) pins a backend\'s kernel over TPUKIT_GEMM_KERNEL, a change makes a new engine, and a bad value is refused by name', () => {
    const before = process.env.TPUKIT_GEMM_KERNEL;
    try {
      process.env.TPUKIT_GEMM_KERNEL = '4x8';
      const b = new SystolicBackend('systolic-gemm-kernel-option', { gemmKernel: '5x8' });
      const e5 = b.engine;
      expect(e5.shape).toBe(GEMM_SHAPE_5X8);
      b.configure({ gemmKernel: '5x8' });
      expect(b.engine, 'the same kernel keeps the engine').toBe(e5);
      b.configure({ gemmKernel: '4x8' });
      expect(b.engine.shape).toBe(GEMM_SHAPE_4X8);
      process.env.TPUKIT_GEMM_KERNEL = '5x8';
      b.configure({ gemmKernel: 'auto' });
      expect(b.engine.shape, "'auto' takes the environment's").toBe(GEMM_SHAPE_5X8);
      expect(() => b.configure({ gemmKernel: '8x8' as '4x8' })).toThrow(/systolic\.configure: gemmKernel must be 'auto', '4x8' or '5x8'; got "8x8"/);
      expect(b.engine.shape, 'a refused value changes nothing').toBe(GEMM_SHAPE_5X8);
    } finally {
      if (before === undefined) delete process.env.TPUKIT_GEMM_KERNEL;
      else process.env.TPUKIT_GEMM_KERNEL = before;
    }
  });

  it('TPUKIT_GEMM_KERNEL picks the kernel of engines made without a shape, and a bad value is refused by name', () => {
    const before = process.env.TPUKIT_GEMM_KERNEL;
    try {
      process.env.TPUKIT_GEMM_KERNEL = '5x8';
      expect(new GemmEngine({ relaxed: false }).shape).toBe(GEMM_SHAPE_5X8);
      process.env.TPUKIT_GEMM_KERNEL = '4x8';
      expect(new GemmEngine({ relaxed: false }).shape).toBe(GEMM_SHAPE_4X8);
      process.env.TPUKIT_GEMM_KERNEL = '8x8';
      expect(() => new GemmEngine({ relaxed: false })).toThrow(/systolic: TPUKIT_GEMM_KERNEL must be 4x8, 5x8 or auto; got "8x8"/);
    } finally {
      if (before === undefined) delete process.env.TPUKIT_GEMM_KERNEL;
      else process.env.TPUKIT_GEMM_KERNEL = before;
    }
  });

  it('5 x 8 equals 4 x 8 bit for bit (any M, layouts, dtypes, precisions, flushing)', () => {
    fc.assert(
      fc.property(
        fc.record({
          b: fc.integer({ min: 1, max: 3 }),
          m: fc.integer({ min: 1, max: 140 }),
          k: fc.integer({ min: 1, max: 600 }),
          n: fc.integer({ min: 1, max: 40 }),
          lhsT: fc.boolean(),
          rhsT: fc.boolean(),
          dtype: fc.constantFrom('float32' as const, 'bfloat16' as const),
          precision: fc.constantFrom('default' as const, 'highest' as const),
          flush: fc.boolean(),
          mode: fc.integer({ min: 0, max: relaxedModes.length - 1 }),
          seed: fc.integer({ min: 0, max: 1000 }),
        }),
        ({ b: B, m: M, k: K, n: N, lhsT, rhsT, dtype, precision, flush, mode, seed }) => {
          const av = data(B * M * K, seed);
          const bv = data(B * K * N, seed + 1);
          const store = (x: Float32Array): Float32Array | Uint16Array => (dtype === 'bfloat16' ? bf16.encode(x) : x);
          // lhs [B, M, K] or [B, K, M]; rhs [B, K, N] or [B, N, K] (the values are arbitrary, so the layout is just the shape).
          const lhs = { data: store(av), shape: lhsT ? [B, K, M] : [B, M, K], dtype };
          const rhs = { data: store(bv), shape: rhsT ? [B, N, K] : [B, K, N], dtype };
          const params = { dimensionNumbers: [[[lhsT ? 1 : 2], [rhsT ? 2 : 1]], [[0], [0]]] as [[number[], number[]], [number[], number[]]], precision, preferredElementType: null };
          const out = aval([B, M, N], 'float32');
          const { five, four } = engines[mode];
          five.f32.fill(Number.NaN); // poisoned scratch: padding rows must not reach a result
          const x = mxuDotGeneral(five, lhs, rhs, params, out, { flushSubnormals: flush }) as Float32Array;
          const y = mxuDotGeneral(four, lhs, rhs, params, out, { flushSubnormals: flush }) as Float32Array;
          expect(new Uint32Array(x.buffer, x.byteOffset, x.length)).toEqual(new Uint32Array(y.buffer, y.byteOffset, y.length));
        },
      ),
      { numRuns: 60 },
    );
  });

  // (Operands in the engine's memory need a shared memory.)
  it.runIf(engines[0].five.shared)('packs the partial last row panel of an operand read in place with the SIMD kernel (reading the rows past it, then zeroing them in the panel): the bits of the TypeScript packing, whatever lies past the operand, on 1 and 2 threads', () => {
    const threadsBefore = getNumThreads();
    for (const { relaxed, five } of engines) {
      const { inMemory, releaseAll } = engineMemory(five);
      try {
        // M not a multiple of 5 (A) or N not of 8 (B); A stored [M, K] ('kc') or [K, M] ('rc'); K a
        // multiple of 4; one K block and one row block (the one-thread K-blocked and row-blocked
        // paths pack their partial panel in TypeScript); the last case is big enough for the pool.
        const cases = [
          [13, 64, 16, false, 'float32', false, 1], [128, 256, 20, true, 'float32', false, 1], [7, 8, 8, false, 'bfloat16', true, 1],
          [33, 200, 8, true, 'bfloat16', false, 1], [123, 128, 44, false, 'float32', true, 1], [2, 44, 8, true, 'float32', false, 1],
          [123, 256, 128, false, 'float32', false, 2],
        ] as const;
        for (const [M, K, N, lhsT, dtype, flush, threads] of cases) {
          setNumThreads(threads);
          applyThreads(five);
          const store = (x: Float32Array): Float32Array | Uint16Array => (dtype === 'bfloat16' ? bf16.encode(x) : x);
          const a = store(data(M * K, M + K));
          const b = store(data(K * N, N));
          const params = { dimensionNumbers: [[[lhsT ? 0 : 1], [0]], [[], []]] as [[number[], number[]], [number[], number[]]], precision: null, preferredElementType: null };
          const out = aval([M, N], 'float32');
          const lhsShape = lhsT ? [K, M] : [M, K];
          const opts = { flushSubnormals: flush };
          const want = mxuDotGeneral(five, { data: a, shape: lhsShape, dtype }, { data: b, shape: [K, N], dtype }, params, out, opts) as Float32Array;
          const partials = (M % 5 ? 1 : 0) + (N % 8 ? 1 : 0);
          for (const poison of [Number.NaN, 1e-40, -3.5e38]) {
            const lhs = { data: inMemory(a), shape: lhsShape, dtype };
            inMemory(new Float32Array(4 * K + 16).fill(poison)); // what the rows past A read
            const rhs = { data: inMemory(b), shape: [K, N], dtype };
            inMemory(new Float32Array(8 * K + 16).fill(poison)); // what the rows past B read
            // (both operands in place: A is packed at the scratch floor; poisoned, so the test sees the zeroing)
            five.f32.fill(poison, five.floor / 4);
            const before = five.traffic.simdPartialPanels;
            const got = mxuDotGeneral(five, lhs, rhs, params, out, opts) as Float32Array;
            const at = `M ${M} K ${K} N ${N}, ${lhsT ? 'rc' : 'kc'} ${dtype}, flush ${flush}, ${threads} thread(s), relaxed ${relaxed}, poison ${poison}`;
            expect(five.traffic.simdPartialPanels - before, at).toBe(partials);
            expect(new Uint32Array(got.slice().buffer), at).toEqual(new Uint32Array(want.slice().buffer));
            if (M % 5 !== 0) {
              // The panel's missing rows are zeros, as the TypeScript packing pads them (no garbage, no subnormals, in the FMAs).
              const panel = five.floor / 4 + Math.floor(M / 5) * 5 * K;
              const u32 = new Uint32Array(five.buffer());
              const pad: number[] = [];
              for (let k = 0; k < K; k++) for (let r = M % 5; r < 5; r++) pad.push(u32[panel + k * 5 + r]);
              expect(pad.every((x) => x === 0), at).toBe(true);
            }
            releaseAll();
          }
        }
        // An operand that ends where the reserved memory ends (the scratch floor): the rows past
        // it are not read (they would be scratch), its partial panel is packed in TypeScript.
        setNumThreads(1);
        applyThreads(five);
        const [M, K, N] = [13, 64, 16];
        const a = data(M * K, 5);
        const b = data(K * N, 6);
        const params = { dimensionNumbers: [[[1], [0]], [[], []]] as [[number[], number[]], [number[], number[]]], precision: null, preferredElementType: null };
        const want = mxuDotGeneral(five, { data: a, shape: [M, K], dtype: 'float32' }, { data: b, shape: [K, N], dtype: 'float32' }, params, aval([M, N], 'float32'), { flushSubnormals: false }) as Float32Array;
        const rhs = { data: inMemory(b), shape: [K, N], dtype: 'float32' as const };
        const lhs = { data: inMemory(a), shape: [M, K], dtype: 'float32' as const };
        expect(lhs.data.byteOffset + lhs.data.byteLength).toBe(five.floor);
        const before = five.traffic.simdPartialPanels;
        const got = mxuDotGeneral(five, lhs, rhs, params, aval([M, N], 'float32'), { flushSubnormals: false }) as Float32Array;
        expect(five.traffic.simdPartialPanels - before).toBe(0);
        expect(new Uint32Array(got.slice().buffer)).toEqual(new Uint32Array(want.slice().buffer));
      } finally {
        releaseAll();
        setNumThreads(threadsBefore);
        applyThreads(five);
      }
    }
  });

  // (A destination in the engine's memory needs a shared memory.)
  it.runIf(engines[0].five.shared)('writes exactly the M rows of a destination in its memory (no padding rows past it); never a destination over an operand', () => {
    const { five, four } = engines[0];
    for (const [M, K, N] of [[1, 20, 8], [7, 600, 16], [33, 70, 24], [132, 9, 8], [30, 40, 16]]) {
      const lhs = { data: data(M * K, M), shape: [M, K], dtype: 'float32' as const };
      const rhs = { data: data(K * N, N), shape: [K, N], dtype: 'float32' as const };
      const params = { dimensionNumbers: [[[1], [0]], [[], []]] as [[number[], number[]], [number[], number[]]], precision: null, preferredElementType: null };
      const out = aval([M, N], 'float32');
      const want = mxuDotGeneral(four, lhs, rhs, params, out, { flushSubnormals: false }) as Float32Array;
      // The destination, then a canary of 5 rows that must stay untouched.
      const addr = five.reserve((M + 5) * N * 4);
      const region = new Float32Array(five.buffer(), addr, (M + 5) * N).fill(-7);
      const into = region.subarray(0, M * N);
      expect(five.resultTarget(into, 1, M, N)).toBe(addr);
      expect(five.resultTarget(into, 1, M, N, region.subarray(M * N))).toBe(addr);
      expect(five.resultTarget(into, 1, M, N, region.subarray(M * N - 1))).toBe(-1);
      expect(five.resultTarget(into, 1, M, N, new Float32Array(five.buffer(), addr + 4 * (M * N - 1), 1))).toBe(-1);
      mxuDotGeneral(five, lhs, rhs, params, out, { flushSubnormals: false }, into);
      expect(new Uint32Array(region.slice(0, M * N).buffer)).toEqual(new Uint32Array(want.slice().buffer));
      expect(Array.from(region.subarray(M * N)).every((v) => v === -7)).toBe(true);
      five.release(addr);
    }
  });
});
