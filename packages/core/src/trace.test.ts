// evalPrimitiveInto(All) with a memo (one per call site, as compiled programs keep): the memo
// skips the shape rule while the argument avals repeat and must never hand out a stale result
// shape when they change; fromStorage's checks without per-call allocation.
import { describe, expect, it } from 'vitest';
import { fromStorage, np, withBackend } from './index';
import { evalPrimitiveInto, getPrimitive, intoMemo } from './internal';
import type { Array } from './array';

const dot = getPrimitive('dot_general');
const params = { dimensionNumbers: [[[1], [0]], [[], []]], precision: null, preferredElementType: null };
const mat = (r: number, c: number, s: number): Array => np.array(Float32Array.from({ length: r * c }, (_, i) => ((i * 7 + s) % 11) - 5)).reshape([r, c]);

describe('evalPrimitiveInto with a memo', () => {
  it('recomputes the result shape when the arguments change shape or dtype, and agrees with matmul on both backends', () => {
    const memo = intoMemo();
    const cases: [number, number, number][] = [[2, 3, 4], [2, 3, 4], [5, 3, 2], [5, 3, 2], [1, 7, 1], [2, 3, 4]];
    for (const backend of ['systolic', 'reference'] as const) {
      withBackend(backend, () => {
        cases.forEach(([m, k, n], j) => {
          const a = mat(m, k, j);
          const b = mat(k, n, j + 1);
          const out = new Float32Array(m * n);
          const r = evalPrimitiveInto(dot, [a, b], params, out, memo);
          if (r === null) return; // (a backend without executeInto)
          expect(r.shape).toEqual([m, n]);
          expect(globalThis.Array.from(r.dataSync() as Float32Array)).toEqual(globalThis.Array.from(np.matmul(a, b).dataSync() as Float32Array));
        });
      });
    }
    // A different dtype on the same call site: the memo's float32 result aval must not be reused.
    withBackend('systolic', () => {
      const a = mat(2, 3, 0);
      const b = mat(3, 4, 1);
      evalPrimitiveInto(dot, [a, b], params, new Float32Array(8), memo);
      const r = evalPrimitiveInto(dot, [a.astype('bfloat16'), b.astype('bfloat16')], params, new Uint16Array(8), memo);
      if (r !== null) expect(r.dtype).toBe('bfloat16');
    });
  });

  it('checks the destination on every call, memo hit or not, naming the primitive and the sizes', () => {
    withBackend('systolic', () => {
      const memo = intoMemo();
      const a = mat(2, 3, 0);
      const b = mat(3, 4, 1);
      expect(evalPrimitiveInto(dot, [a, b], params, new Float32Array(8), memo)).not.toBeNull();
      expect(() => evalPrimitiveInto(dot, [a, b], params, new Float32Array(9), memo)).toThrow(/evalPrimitiveInto\(dot_general\): the result has 8 elements \(float32\[2,4\]\) but the destination holds 9/);
      // The memo kept no argument buffers alive after the call.
      expect(memo.bufs.every((x) => x === null)).toBe(true);
    });
  });
});

describe('fromStorage', () => {
  it('rejects a wrong storage type or a bad shape with the operation and values named', () => {
    expect(() => fromStorage(new Float32Array(4), [2, 2], 'bfloat16')).toThrow(/fromStorage: bfloat16 is stored as Uint16Array; got Float32Array/);
    expect(() => fromStorage(new Float32Array(4), [2, -2], 'float32')).toThrow(/fromStorage: shape .*-2.* must hold non-negative integers/);
    expect(() => fromStorage(new Float32Array(4), [2, 1.5], 'float32')).toThrow(/must hold non-negative integers/);
    expect(() => fromStorage(new Float32Array(5), [2, 2], 'float32')).toThrow(/fromStorage: shape .* has 4 elements; got 5 values of float32/);
    expect(globalThis.Array.from(fromStorage(Int32Array.from([1, 2, 3]), [3], 'int32').dataSync() as Int32Array)).toEqual([1, 2, 3]);
  });
});
