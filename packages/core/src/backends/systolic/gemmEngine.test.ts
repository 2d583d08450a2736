/**
 * The GEMM engine's packing paths for operands read in place: A packed MC rows at a time right
 * before the kernel multiplies them (`rowBlocks`; on one thread, and with `blockRowsPool` on the
 * pool, each thread packing its own blocks), and the sweep of in-place sources before packing
 * (`touchInPlace`), give the bits of the whole-operand path that host operands (staged, not
 * blocked) take, into a fresh output and into a destination in the GEMM memory.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { type Array as TArray, fromStorage, lax, registerBackend, setNumThreads, toStorage, withBackend } from '../../index';
import { evalPrimitiveInto } from '../../internal';
import { dotGeneralP } from '../../lax/dot';
import { SystolicBackend } from './backend';
import { gemmPhases, resetGemmPhases } from './phases';

const backend = new SystolicBackend('systolic-engine-test');
registerBackend(backend);
afterAll(() => setNumThreads(null));

function data(n: number, seed: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.613 + seed) * (1 + (i % 5)));
}
const bits = (a: TArray): number[] => Array.from(new Uint32Array((toStorage(a) as Float32Array).slice().buffer));

describe('GemmEngine packing of in-place operands', () => {
  it.runIf(backend.engine.shared)('row-blocked packing of A and the source sweep give the host path\'s bits (both A layouts, K past a K block; 1, 2 and 3 threads)', () => {
    const engine = backend.engine;
    const defaults = [engine.touchInPlace, engine.blockRows, engine.blockRowsPool] as const;
    fc.assert(
      fc.property(
        fc.constantFrom(132, 256, 260, 388), // M: several MC = 128 row blocks, a short last one
        fc.constantFrom(8, 100, 600), // K (600: two K blocks of the kernel)
        fc.oneof(fc.integer({ min: 1, max: 40 }), fc.constantFrom(8, 16, 64)), // N (a multiple of 8: written straight into the destination)
        fc.boolean(), // A stored [K, M] (rows contiguous, 'rc') instead of [M, K] ('kc')
        fc.boolean(), // sweep in-place sources
        fc.boolean(), // pack A by row blocks (on one thread and on the pool)
        fc.constantFrom(1, 2, 3), // threads (the pool: each thread packs the row blocks it multiplies)
        (M, K, N, transA, touch, blockRows, threads) => {
          setNumThreads(1);
          const ha = data(M * K, M + K);
          const hb = data(K * N, N);
          const aShape = transA ? [K, M] : [M, K];
          const dn: [[number[], number[]], [number[], number[]]] = [[[transA ? 0 : 1], [0]], [[], []]];
          const host = withBackend('systolic-engine-test', () => lax.dotGeneral(fromStorage(ha, aShape, 'float32'), fromStorage(hb, [K, N], 'float32'), dn));
          const addr = engine.reserve(ha.byteLength);
          const dest = engine.reserve(M * N * 4);
          try {
            const view = new Float32Array(engine.buffer(), addr, ha.length);
            view.set(ha);
            engine.touchInPlace = touch;
            engine.blockRows = blockRows;
            engine.blockRowsPool = blockRows;
            // No packed panels left over from the host product: the scratch is poisoned.
            engine.f32.fill(Number.NaN, engine.floor / 4);
            setNumThreads(threads);
            resetGemmPhases();
            gemmPhases.enabled = true;
            const inPlace = withBackend('systolic-engine-test', () => lax.dotGeneral(fromStorage(view, aShape, 'float32'), fromStorage(hb, [K, N], 'float32'), dn));
            gemmPhases.enabled = false;
            expect(bits(inPlace)).toEqual(bits(host));
            // Into a destination in the GEMM memory too (as a compiled step's arena: the kernel writes there).
            const into = new Float32Array(engine.buffer(), dest, M * N).fill(Number.NaN);
            withBackend('systolic-engine-test', () => evalPrimitiveInto(dotGeneralP, [fromStorage(view, aShape, 'float32'), fromStorage(hb, [K, N], 'float32')], { dimensionNumbers: dn, precision: null, preferredElementType: null }, into));
            expect(Array.from(new Uint32Array(into.slice().buffer))).toEqual(bits(host));
            // (the in-place product went through the engine: on this thread, or split on the pool)
            if (threads === 1 || M * K * Math.ceil(N / 8) * 8 < 1 << 21) expect([...gemmPhases.byShape.values()].reduce((n, p) => n + p.products, 0)).toBe(1);
            else if (engine.parallel) expect(gemmPhases.pool.products).toBe(1);
          } finally {
            [engine.touchInPlace, engine.blockRows, engine.blockRowsPool] = defaults;
            gemmPhases.enabled = false;
            engine.release(addr);
            engine.release(dest);
          }
        },
      ),
      { numRuns: 40 },
    );
  });
});
