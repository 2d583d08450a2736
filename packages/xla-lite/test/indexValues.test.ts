// Index values (passes/indexValues.ts): integer compares against iotas become float32 compares
// and broadcasts of iota expressions are rebuilt at the broadcast's shape, so one-hot encodings
// and causal masks are computed inside the fused kernels (wasm and JavaScript) that read them.
import { grad, lax, nn, np } from '@tpukit/core';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { type HloComputation, jit, setWasmKernels } from '../src/internal';

afterEach(() => setWasmKernels(true));

/** Entry instructions that are not fusions, parameters, constants or tuple plumbing. */
const unfused = (c: HloComputation): string[] =>
  c.instructions.filter((i) => !['parameter', 'constant', 'fusion', 'get-tuple-element', 'tuple', 'reshape'].includes(i.opcode)).map((i) => `${i.prim?.name ?? i.opcode}:${i.shapes.map((s) => s.dtype).join()}`);

const COMPARES = [
  ['eq', np.equal],
  ['ne', np.notEqual],
  ['lt', np.less],
  ['le', np.lessEqual],
  ['gt', np.greater],
  ['ge', np.greaterEqual],
] as const;

describe('index values (iota compares as float32, broadcasts sunk into iotas)', () => {
  it('one-hot runs as one fused kernel over a float32 iota, equal to eager bit for bit', () => {
    const x = np.array(Int32Array.from({ length: 24 }, (_, i) => (i * 7) % 11), 'int32').reshape([4, 6]);
    const f = (a: any) => nn.oneHot(a, 10);
    const c = jit(f).lower(x).compile();
    // Left outside kernels: only the conversion of the 24 indices.
    expect(unfused(c.module.entry)).toEqual(['convert_element_type:float32']);
    const body = c.module.entry.instructions.find((i) => i.opcode === 'fusion')!.called[0];
    expect(body.instructions.map((i) => i.prim?.name).filter((n) => n === 'iota' || n === 'eq')).toEqual(['iota', 'eq']);
    expect(body.instructions.find((i) => i.prim?.name === 'iota')!.shape.dtype).toBe('float32');
    expect(c.stats.wasmKernels).toBe(1);
    expect(c.call([x])[0].dataSync()).toEqual(f(x).dataSync());
  });

  it('a causal mask broadcast over batch and heads is computed inside the softmax row kernel', () => {
    const s = np.array(Float32Array.from({ length: 2 * 3 * 8 * 8 }, (_, i) => Math.sin(i * 0.7) * 3)).reshape([2, 3, 8, 8]);
    const f = (a: any) => nn.softmax(np.where(np.tri(8, 8, 0, 'bool'), a, -1e9), { axis: -1 });
    const c = jit(f).lower(s).compile();
    expect(unfused(c.module.entry)).toEqual([]);
    expect(c.stats.rowFusions).toBe(1);
    const body = c.module.entry.instructions.find((i) => i.opcode === 'fusion')!.called[0];
    const iotas = body.instructions.filter((i) => i.prim?.name === 'iota');
    expect(iotas.map((i) => [i.shape.shape.join(), (i.params as { dimension: number }).dimension]).sort()).toEqual([
      ['2,3,8,8', 2],
      ['2,3,8,8', 3],
    ]);
    const want = f(s).dataSync();
    expect(c.stats.wasmKernels).toBe(1);
    const wasm = c.call([s])[0].dataSync();
    setWasmKernels(false);
    const js = jit(f).lower(s).compile();
    expect(js.stats.wasmKernels).toBe(0);
    const jsOut = js.call([s])[0].dataSync();
    for (let i = 0; i < want.length; i++) {
      // Masked entries are exactly 0 in every implementation; the rest agree to exp's ulps.
      if (want[i] === 0) expect([wasm[i], jsOut[i]]).toEqual([0, 0]);
      expect(Math.abs(wasm[i] - want[i])).toBeLessThanOrEqual(1e-6);
      expect(Math.abs(jsOut[i] - want[i])).toBeLessThanOrEqual(1e-6);
    }
  });

  it('the gradient of a masked softmax recomputes the mask in its backward row kernel (no bool leaves a fusion)', () => {
    const s = np.array(Float32Array.from({ length: 2 * 3 * 8 * 8 }, (_, i) => Math.sin(i * 0.7) * 3)).reshape([2, 3, 8, 8]);
    const f = (a: any) => np.sum(np.sin(nn.softmax(np.where(np.tri(8, 8, 0, 'bool'), a, -1e9), { axis: -1 })));
    const want = grad(f)(s).dataSync();
    const c = jit(grad(f)).lower(s).compile();
    expect(unfused(c.module.entry)).toEqual([]);
    for (const i of c.module.entry.instructions) expect(i.shapes.map((sh) => sh.dtype)).not.toContain('bool');
    expect(c.stats.rowFusions).toBeGreaterThanOrEqual(1);
    expect(c.stats.wasmKernels).toBe(c.stats.fusedKernels);
    const wasm = c.call([s])[0].dataSync();
    setWasmKernels(false);
    const js = jit(grad(f)).lower(s).compile().call([s])[0].dataSync();
    for (let i = 0; i < want.length; i++) {
      if (want[i] === 0) expect([wasm[i], js[i]]).toEqual([0, 0]);
      expect(Math.abs(wasm[i] - want[i])).toBeLessThanOrEqual(1e-5);
      expect(Math.abs(js[i] - want[i])).toBeLessThanOrEqual(1e-5);
    }
  });

  it('law: any int32 compared with an iota gives the same mask through jit (wasm and JS kernels) as eagerly', () => {
    const big = fc.oneof(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), fc.integer({ min: -40, max: 40 }), fc.integer({ min: 2 ** 24 - 3, max: 2 ** 24 + 3 }), fc.integer({ min: -(2 ** 24) - 3, max: -(2 ** 24) + 3 }));
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 9 }), fc.integer({ min: 0, max: 5 }), fc.array(big, { minLength: 45, maxLength: 45 }), fc.boolean(), (rows, n, which, vals, flip) => {
        const [, cmp] = COMPARES[which];
        const x = np.array(Int32Array.from(vals.slice(0, rows)), 'int32');
        // x[:, None] against iota along dim 1 (either side), then * 2 + 1 so the kernel does float work too.
        const f = (a: any) => {
          const xs = lax.broadcastInDim(a, [rows, n], [0]);
          const io = lax.broadcastedIota('int32', [rows, n], 1);
          return np.add(np.multiply(np.astype(flip ? cmp(io, xs) : cmp(xs, io), 'float32'), 2), 1);
        };
        const want = Array.from(f(x).dataSync());
        setWasmKernels(true);
        const w = jit(f).lower(x).compile();
        expect(unfused(w.module.entry)).toEqual(['convert_element_type:float32']);
        expect(Array.from(w.call([x])[0].dataSync())).toEqual(want);
        setWasmKernels(false);
        expect(Array.from(jit(f).lower(x).compile().call([x])[0].dataSync())).toEqual(want);
        setWasmKernels(true);
      }),
      { numRuns: 40 },
    );
  });

  it('law: a broadcast iota mask (any broadcast dims) fused into a loop equals eager', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 0, max: 5 }), fc.boolean(), (a, b, lead, which, swap) => {
        const [, cmp] = COMPARES[which];
        const y = np.array(Float32Array.from({ length: lead * a * b }, (_, i) => i + 0.5)).reshape(swap ? [a, lead, b] : [lead, a, b]);
        // mask[i, j] = cmp(i, j) over [a, b], broadcast to y's shape (dims of a and b as placed in y).
        const f = (v: any) => {
          const m = cmp(lax.broadcastedIota('int32', [a, b], 0), lax.broadcastedIota('int32', [a, b], 1));
          const mb = lax.broadcastInDim(m, v.shape, swap ? [0, 2] : [1, 2]);
          return np.where(mb, v, np.negative(v));
        };
        const want = Array.from(f(y).dataSync());
        const c = jit(f).lower(y).compile();
        expect(unfused(c.module.entry)).toEqual([]);
        expect(Array.from(c.call([y])[0].dataSync())).toEqual(want);
        setWasmKernels(false);
        expect(Array.from(jit(f).lower(y).compile().call([y])[0].dataSync())).toEqual(want);
        setWasmKernels(true);
      }),
      { numRuns: 40 },
    );
  });
});
