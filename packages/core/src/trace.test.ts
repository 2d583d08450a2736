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
  it('recomputes the result shape when the arguments change shape or dtype, agrees with matmul on systolic, and the reference backend declines', () => {
    const memo = intoMemo();
    const cases: [number, number, number][] = [[2, 3, 4], [2, 3, 4], [5, 3, 2], [5, 3, 2], [1, 7, 1], [2, 3, 4]];
    for (const backend of ['systolic', 'reference'] as const) {
      withBackend(backend, () => {
        cases.forEach(([m, k, n], j) => {
          const a = mat(m, k, j);
          const b = mat(k, n, j + 1);
          const out = new Float32Array(m * n);
          const r = evalPrimitiveInto(dot, [a, b], params, out, memo);
          if (backend === 'reference') {
            // The reference dot has no kernel into caller storage: it declines, memo or not.
            expect(r, `${backend} ${m}x${k}x${n}`).toBeNull();
            return;
          }
          expect(r, `${backend} ${m}x${k}x${n}`).not.toBeNull();
          expect(r!.shape).toEqual([m, n]);
          expect(globalThis.Array.from(r!.dataSync() as Float32Array)).toEqual(globalThis.Array.from(np.matmul(a, b).dataSync() as Float32Array));
        });
      });
    }
    // A different dtype on the same call site: the memo's float32 result aval must not be reused.
    // (transpose has a reference kernel into caller storage for any dtype; the MXU dot writes float32 only.)
    withBackend('reference', () => {
      const transpose = getPrimitive('transpose');
      const tMemo = intoMemo();
      const perm = { permutation: [1, 0] }; // one params object: the memo keys on its identity
      const a = mat(2, 3, 0);
      const f = evalPrimitiveInto(transpose, [a], perm, new Float32Array(6), tMemo);
      expect(f!.dtype).toBe('float32');
      const r = evalPrimitiveInto(transpose, [a.astype('bfloat16')], perm, new Uint16Array(6), tMemo);
      expect(r).not.toBeNull();
      expect(r!.dtype).toBe('bfloat16');
      expect(r!.shape).toEqual([3, 2]);
    });
  });

  it("hands out results sharing one frozen shape per memo hit, without touching a shape rule's own list", () => {
    withBackend('systolic', () => {
      const memo = intoMemo();
      const a = mat(2, 3, 0);
      const b = mat(3, 4, 1);
      const r1 = evalPrimitiveInto(dot, [a, b], params, new Float32Array(8), memo)!;
      const r2 = evalPrimitiveInto(dot, [a, b], params, new Float32Array(8), memo)!;
      expect(r1.shape).toEqual([2, 4]);
      expect(r2.shape).toBe(r1.shape);
      expect(Object.isFrozen(r1.shape)).toBe(true);
      // A rule returning a list it keeps (a program's outAvals): the memo copies, the list stays as it was.
      const kept = [{ shape: [2, 4], dtype: 'float32' as const, weakType: false }];
      const keeping = { ...dot, abstractEval: () => kept } as unknown as typeof dot;
      const m2 = intoMemo();
      const r3 = evalPrimitiveInto(keeping, [a, b], params, new Float32Array(8), m2)!;
      expect(r3.shape).toEqual([2, 4]);
      expect(kept[0].shape).not.toBe(r3.shape);
      expect(Object.isFrozen(kept[0].shape)).toBe(false);
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
