/** Products (matmul with batch broadcasting, dot, vdot, inner) against naive loops, and shape manipulation laws. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Array, lax, np } from '../index';
import { ravel, unravel } from '../../test/indexMath';
import { expectAllclose } from '../../test/matchers';

const RUNS = { numRuns: 30 };

function filled(shape: number[], seed: number, dtype: 'float32' | 'int32' | 'int8' = 'float32'): Array {
  const n = shape.reduce((a, b) => a * b, 1);
  const v = globalThis.Array.from({ length: n }, (_, i) => (((i + 1) * 2654435761 + seed * 97) >>> 0) % 11 - 5);
  return np.reshape(np.array(v, dtype), shape);
}

/** Naive batched matmul on nested arrays after broadcasting the batch dims by hand. */
function naiveMatmul(a: Array, b: Array): number[] {
  const av = a.dataSync();
  const bv = b.dataSync();
  const [m, k] = a.shape.slice(-2);
  const n = b.shape[b.ndim - 1];
  const ab = a.shape.slice(0, -2);
  const bb = b.shape.slice(0, -2);
  const rank = Math.max(ab.length, bb.length);
  const pa = [...new globalThis.Array<number>(rank - ab.length).fill(1), ...ab];
  const pb = [...new globalThis.Array<number>(rank - bb.length).fill(1), ...bb];
  const batch = pa.map((d, i) => Math.max(d, pb[i]));
  const nb = batch.reduce((x, y) => x * y, 1);
  const out: number[] = [];
  for (let t = 0; t < nb; t++) {
    const idx = unravel(t, batch);
    const oa = ravel(idx.map((i, d) => (pa[d] === 1 ? 0 : i)), pa);
    const ob = ravel(idx.map((i, d) => (pb[d] === 1 ? 0 : i)), pb);
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let q = 0; q < k; q++) s += av[oa * m * k + i * k + q] * bv[ob * k * n + q * n + j];
        out.push(s);
      }
    }
  }
  return out;
}

describe('matmul', () => {
  it('equals a naive loop with broadcast batch dimensions', () => {
    const dim = fc.integer({ min: 1, max: 3 });
    fc.assert(
      fc.property(fc.array(dim, { maxLength: 2 }), fc.array(dim, { maxLength: 2 }), dim, dim, dim, fc.array(fc.boolean(), { minLength: 2, maxLength: 2 }), (ba, bb, m, k, n, ones) => {
        // Make the batch shapes broadcast-compatible: align right, set one side to 1 where they differ.
        const r = Math.min(ba.length, bb.length);
        const bbFixed = bb.map((d, i) => {
          const j = i - (bb.length - r);
          if (j < 0) return d;
          const da = ba[ba.length - r + j];
          return d === da ? d : ones[j % 2] ? 1 : da;
        });
        const baFixed = ba.map((d, i) => {
          const j = i - (ba.length - r);
          if (j < 0) return d;
          const db = bbFixed[bbFixed.length - r + j];
          return d === db || db === 1 ? d : 1;
        });
        const a = filled([...baFixed, m, k], 1);
        const b = filled([...bbFixed, k, n], 2);
        const c = np.matmul(a, b);
        expectAllclose(c, naiveMatmul(a, b), { rtol: 0, atol: 0 });
      }),
      RUNS,
    );
  });

  it('1-D operands, integer wrap-around, and the contracting-dim error', () => {
    const v = np.array([1, 2, 3], 'float32');
    const m = np.reshape(np.arange(6, undefined, 1, 'float32'), [3, 2]);
    expect(np.matmul(v, m).toArray()).toEqual([16, 22]);
    expect(np.matmul(np.transpose(m), v).toArray()).toEqual([16, 22]);
    expect(np.matmul(v, v).toArray()).toBe(14);
    const big = np.array([[100, 100]], 'int8');
    expect(np.matmul(big, np.array([[2], [1]], 'int8')).toArray()).toEqual([[44]]); // 300 wraps in int8
    expect(() => np.matmul(np.zeros([8, 128]), np.zeros([64, 32]))).toThrow('matmul: contracting dims differ: lhs [8,128] (k=128) vs rhs [64,32] (k=64)');
    expect(() => np.matmul(np.zeros([2, 2, 3]), np.zeros([3, 3, 1]))).toThrow('matmul: shapes [2] and [3] cannot broadcast');
  });

  it('preferredElementType accumulates int8 into int32; bf16 into float32', () => {
    const big = np.array([[100, 100]], 'int8');
    const r = np.matmul(big, np.array([[2], [1]], 'int8'), { preferredElementType: 'int32' });
    expect([r.dtype, r.toArray()]).toEqual(['int32', [[300]]]);
    const h = np.matmul(np.array([[1, 2 ** -9]], 'bfloat16'), np.array([[1], [1]], 'bfloat16'), { preferredElementType: 'float32' });
    expect([h.dtype, h.item()]).toEqual(['float32', 1 + 2 ** -9]);
  });
});

describe('dot / vdot / inner', () => {
  it('dot of N-D and M-D contracts the last axis of x with the second-to-last of y', () => {
    const x = filled([2, 3, 4], 3);
    const y = filled([5, 4, 2], 4);
    const r = np.dot(x, y);
    expect(r.shape).toEqual([2, 3, 5, 2]);
    const xv = x.dataSync();
    const yv = y.dataSync();
    const want: number[] = [];
    for (let i = 0; i < 6; i++) for (let p = 0; p < 5; p++) for (let j = 0; j < 2; j++) {
      let s = 0;
      for (let q = 0; q < 4; q++) s += xv[i * 4 + q] * yv[p * 8 + q * 2 + j];
      want.push(s);
    }
    expectAllclose(r, want, { rtol: 0, atol: 0 });
    expect(np.dot(np.array([1, 2]), np.array([3, 4])).item()).toBe(11);
    expect(np.dot(2, np.array([3, 4])).toArray()).toEqual([6, 8]);
    expect(np.vdot(np.array([[1, 2], [3, 4]]), np.array([[1, 1], [1, 1]])).item()).toBe(10);
    expect(np.inner(np.array([[1, 2], [3, 4]]), np.array([[1, 0], [0, 1], [1, 1]])).toArray()).toEqual([[1, 2, 3], [3, 4, 7]]);
    expect(() => np.dot(np.zeros([2, 3]), np.zeros([4, 2]))).toThrow('dot: contracting dims differ: lhs [2,3] (k=3) vs rhs [4,2] (k=4)');
  });

  it('dot_general with batch dims and mixed dtypes is an error without promotion', () => {
    const a = filled([2, 3, 4], 5);
    const b = filled([2, 4, 5], 6);
    const r = lax.dotGeneral(a, b, [[[2], [1]], [[0], [0]]]);
    expect(r.shape).toEqual([2, 3, 5]);
    expectAllclose(r, naiveMatmul(a, b), { rtol: 0, atol: 0 });
    expect(() => lax.dotGeneral(a, np.astype(b, 'int32'), [[[2], [1]], [[0], [0]]])).toThrow('dot_general: operand dtypes differ: float32 and int32');
  });
});

describe('shape manipulation', () => {
  const shapeArb = fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 4 });

  it('transpose moves each element to the permuted index; twice with the inverse is identity', () => {
    fc.assert(
      fc.property(shapeArb.chain((s) => fc.tuple(fc.constant(s), fc.shuffledSubarray(s.map((_, i) => i), { minLength: s.length, maxLength: s.length }))), ([shape, perm]) => {
        const x = filled(shape, 7);
        const t = np.transpose(x, perm);
        expect(t.shape).toEqual(perm.map((p) => shape[p]));
        const inv = perm.map((_, i) => perm.indexOf(i));
        expect(np.transpose(t, inv).toArray()).toEqual(x.toArray());
        // Element check: t[idx] == x[idx permuted back].
        const xv = x.toArray();
        const tv = t.dataSync();
        const tshape = t.shape;
        for (let f = 0; f < tv.length; f++) {
          let rem = f;
          const idx = new globalThis.Array<number>(tshape.length);
          for (let d = tshape.length - 1; d >= 0; d--) {
            idx[d] = rem % tshape[d];
            rem = Math.floor(rem / tshape[d]);
          }
          const src = new globalThis.Array<number>(shape.length);
          perm.forEach((p, i) => (src[p] = idx[i]));
          let v: unknown = xv;
          for (const i of src) v = (v as unknown[])[i];
          if (v !== tv[f]) expect.fail(`transpose ${JSON.stringify(perm)} at ${JSON.stringify(idx)}`);
        }
      }),
      RUNS,
    );
  });

  it('moveaxis agrees with NumPy\'s insertion definition; swapaxes is a transpose', () => {
    fc.assert(
      fc.property(shapeArb, fc.nat(), fc.nat(), (shape, s, d) => {
        const src = s % shape.length;
        const dst = d % shape.length;
        const order = shape.map((_, i) => i).filter((i) => i !== src);
        order.splice(dst, 0, src);
        const x = filled(shape, 3);
        expect(np.moveaxis(x, src, dst).toArray()).toEqual(np.transpose(x, order).toArray());
        const sw = shape.map((_, i) => i);
        [sw[src], sw[dst]] = [sw[dst], sw[src]];
        expect(np.swapaxes(x, src, dst).toArray()).toEqual(np.transpose(x, sw).toArray());
      }),
      RUNS,
    );
  });

  it('reshape / squeeze / expandDims / ravel / atleast', () => {
    const x = filled([2, 3, 4], 1);
    expect(np.reshape(x, [4, -1]).shape).toEqual([4, 6]);
    expect(np.ravel(x).toArray()).toEqual([...x.dataSync()]);
    expect(np.expandDims(x, [0, -1]).shape).toEqual([1, 2, 3, 4, 1]);
    expect(np.squeeze(np.zeros([1, 3, 1])).shape).toEqual([3]);
    expect(np.squeeze(np.zeros([1, 3, 1]), -1).shape).toEqual([1, 3]);
    expect(np.atleast2d(np.array(5)).shape).toEqual([1, 1]);
    expect(np.atleast1d(np.array([1, 2])).shape).toEqual([2]);
    expect(() => np.reshape(x, [5, -1])).toThrow('reshape: cannot reshape [2,3,4] (size 24) to [5,-1]');
    expect(() => np.reshape(x, [-1, -1])).toThrow('reshape: can only specify one unknown dimension; got [-1,-1]');
    expect(() => np.reshape(x, [7])).toThrow('reshape: cannot reshape [2,3,4] (size 24) to [7] (size 7)');
    expect(() => np.squeeze(x, 1)).toThrow('squeeze: cannot squeeze dimension 1 of size 3 (shape [2,3,4])');
    expect(() => np.transpose(x, [0, 1])).toThrow('transpose: axes [0,1] do not match an array of rank 3');
    expect(() => np.transpose(x, [0, 1, 1])).toThrow('transpose: axes [0,1,1] is not a permutation of 3 axes');
    expect(() => np.swapaxes(x, 0, 3)).toThrow('swapaxes: axis2 3 is out of range for an array of rank 3 (valid: -3..2)');
  });
});
