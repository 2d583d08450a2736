/**
 * The GEMM engine's one-thread packing paths for operands read in place: A packed MC rows at a
 * time right before the kernel multiplies them (`rowBlocks`), and the sweep of in-place sources
 * before packing (`touchInPlace`), give the bits of the whole-operand path that host operands
 * (staged, not blocked) take.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { type Array as TArray, fromStorage, lax, registerBackend, setNumThreads, toStorage, withBackend } from '../../index';
import { SystolicBackend } from './backend';
import { gemmPhases, resetGemmPhases } from './phases';

const backend = new SystolicBackend('systolic-engine-test');
registerBackend(backend);
afterAll(() => setNumThreads(null));

function data(n: number, seed: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.613 + seed) * (1 + (i % 5)));
}
const bits = (a: TArray): number[] => Array.from(new Uint32Array((toStorage(a) as Float32Array).slice().buffer));

describe('GemmEngine one-thread packing of in-place operands', () => {
  it.runIf(backend.engine.shared)('row-blocked packing of A and the source sweep give the host path\'s bits (both A layouts, K past a K block)', () => {
    setNumThreads(1);
    const engine = backend.engine;
    fc.assert(
      fc.property(
        fc.constantFrom(132, 256, 260, 388), // M: several MC = 128 row blocks, a short last one
        fc.constantFrom(8, 100, 600), // K (600: two K blocks of the kernel)
        fc.integer({ min: 1, max: 40 }), // N
        fc.boolean(), // A stored [K, M] (rows contiguous, 'rc') instead of [M, K] ('kc')
        fc.boolean(), // sweep in-place sources
        fc.boolean(), // pack A by row blocks
        (M, K, N, transA, touch, blockRows) => {
          const ha = data(M * K, M + K);
          const hb = data(K * N, N);
          const aShape = transA ? [K, M] : [M, K];
          const dn: [[number[], number[]], [number[], number[]]] = [[[transA ? 0 : 1], [0]], [[], []]];
          const host = withBackend('systolic-engine-test', () => lax.dotGeneral(fromStorage(ha, aShape, 'float32'), fromStorage(hb, [K, N], 'float32'), dn));
          const addr = engine.reserve(ha.byteLength);
          try {
            const view = new Float32Array(engine.buffer(), addr, ha.length);
            view.set(ha);
            engine.touchInPlace = touch;
            engine.blockRows = blockRows;
            // No packed panels left over from the host product: the scratch is poisoned.
            engine.f32.fill(Number.NaN, engine.floor / 4);
            resetGemmPhases();
            gemmPhases.enabled = true;
            const inPlace = withBackend('systolic-engine-test', () => lax.dotGeneral(fromStorage(view, aShape, 'float32'), fromStorage(hb, [K, N], 'float32'), dn));
            gemmPhases.enabled = false;
            expect(bits(inPlace)).toEqual(bits(host));
            // (the in-place product did go through the engine on this thread)
            expect([...gemmPhases.byShape.values()].reduce((n, p) => n + p.products, 0)).toBe(1);
          } finally {
            engine.touchInPlace = true;
            engine.blockRows = true;
            gemmPhases.enabled = false;
            engine.release(addr);
          }
        },
      ),
      { numRuns: 24 },
    );
  });
});
