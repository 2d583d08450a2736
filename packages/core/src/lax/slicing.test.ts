// lax slicing primitives: slice / dynamic_slice / dynamic_update_slice / concatenate / pad against
// naive index loops, the pad-then-slice and concatenate-then-split laws, and shape-rule errors.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Array as TArray, lax, np } from '../index';
import { prod, unravel } from '../../test/indexMath';

const strides = (s: readonly number[]): number[] => s.map((_, i) => prod(s.slice(i + 1)));
const arange = (shape: number[]): TArray => np.arange(prod(shape)).reshape(shape);
const shapeArb = fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 4 });

describe('slice', () => {
  it('matches a naive strided read', () => {
    const arb = shapeArb.chain((shape) =>
      fc.tuple(
        fc.constant(shape),
        fc.tuple(...shape.map((n) => fc.tuple(fc.integer({ min: 0, max: n }), fc.integer({ min: 0, max: n }), fc.integer({ min: 1, max: 3 })))),
      ),
    );
    fc.assert(
      fc.property(arb, ([shape, spec]) => {
        const start = spec.map(([a, b]) => Math.min(a, b));
        const limit = spec.map(([a, b]) => Math.max(a, b));
        const st = spec.map((t) => t[2]);
        const y = lax.slice(arange(shape), start, limit, st);
        const outShape = start.map((s, d) => Math.ceil((limit[d] - s) / st[d]));
        expect(y.shape).toEqual(outShape);
        const xs = strides(shape);
        const expected = Array.from({ length: prod(outShape) }, (_, f) => unravel(f, outShape).reduce((o, i, d) => o + (start[d] + i * st[d]) * xs[d], 0));
        expect(Array.from(y.dataSync())).toEqual(expected);
      }),
      { numRuns: 100 },
    );
  });

  it('rejects bad bounds with the values', () => {
    const x = arange([3, 4]);
    expect(() => lax.slice(x, [0, 0], [4, 4])).toThrow(/slice: dimension 0 needs 0 <= start <= limit <= 3; got start 0, limit 4/);
    expect(() => lax.slice(x, [0], [3])).toThrow(/one entry per operand dimension \(rank 2\)/);
    expect(() => lax.slice(x, [0, 0], [3, 4], [1, 0])).toThrow(/strides must be positive/);
  });
});

describe('dynamic_slice / dynamic_update_slice', () => {
  it('clamp start indices so the window fits, as XLA does', () => {
    const arb = shapeArb.chain((shape) =>
      fc.tuple(fc.constant(shape), fc.tuple(...shape.map((n) => fc.tuple(fc.integer({ min: -6, max: 6 }), fc.integer({ min: 0, max: n }))))),
    );
    fc.assert(
      fc.property(arb, ([shape, spec]) => {
        const x = arange(shape);
        const starts = spec.map((t) => t[0]);
        const sizes = spec.map((t) => t[1]);
        const clamped = starts.map((s, d) => Math.min(Math.max(s, 0), shape[d] - sizes[d]));
        const y = lax.dynamicSlice(x, starts.map((s, d) => (d % 2 ? np.array(s) : s)), sizes);
        const ref = lax.slice(x, clamped, clamped.map((c, d) => c + sizes[d]));
        expect(y.shape).toEqual(sizes);
        expect(y.dataSync()).toEqual(ref.dataSync());
        // Writing the slice back (negated) and reading it again round-trips; the rest is untouched.
        const upd = lax.neg(y);
        const z = lax.dynamicUpdateSlice(x, upd, starts);
        expect(lax.dynamicSlice(z, starts, sizes).dataSync()).toEqual(upd.dataSync());
        const expected = Array.from(x.dataSync());
        const xs = strides(shape);
        for (let f = 0; f < prod(sizes); f++) {
          const off = unravel(f, sizes).reduce((o, i, d) => o + (clamped[d] + i) * xs[d], 0);
          expected[off] = -expected[off];
        }
        expect(Array.from(z.dataSync())).toEqual(expected.map((v) => v + 0));
      }),
      { numRuns: 100 },
    );
  });

  it('in-dim helpers', () => {
    const x = arange([3, 4]);
    expect(lax.indexInDim(x, -1, 0).toArray()).toEqual([[8, 9, 10, 11]]);
    expect(lax.indexInDim(x, 1, 1, false).toArray()).toEqual([1, 5, 9]);
    expect(lax.dynamicIndexInDim(x, np.array(7), 0, false).toArray()).toEqual([8, 9, 10, 11]);
    expect(lax.dynamicSliceInDim(x, 3, 2, 1).toArray()).toEqual([
      [2, 3],
      [6, 7],
      [10, 11],
    ]);
    expect(lax.dynamicUpdateIndexInDim(x, np.array([0, 0, 0], 'int32'), 1, 1).get(':', 1).toArray()).toEqual([0, 0, 0]);
    expect(lax.dynamicUpdateSliceInDim(x, np.zeros([1, 4], 'int32'), 9, 0).get(2).toArray()).toEqual([0, 0, 0, 0]);
    expect(lax.sliceInDim(x, -2, null, 1, 1).toArray()).toEqual([
      [2, 3],
      [6, 7],
      [10, 11],
    ]);
    expect(() => lax.indexInDim(x, 3)).toThrow(/index 3 is out of bounds for axis 0 with size 3/);
  });

  it('rejects bad inputs', () => {
    const x = arange([3, 4]);
    expect(() => lax.dynamicSlice(x, [0], [1, 1])).toThrow(/one start index per operand dimension; got 1/);
    expect(() => lax.dynamicSlice(x, [0, 0], [4, 1])).toThrow(/slice_sizes \[4,1\] must lie within operand \[3,4\]/);
    expect(() => lax.dynamicSlice(x, [np.array([0, 1]), 0], [1, 1])).toThrow(/start index 0 must be an integer or an integer scalar Array/);
    expect(() => lax.dynamicUpdateSlice(x, np.ones([4, 1], 'int32'), [0, 0])).toThrow(/must have the operand's rank and fit/);
    expect(() => lax.dynamicUpdateSlice(x, np.ones([1, 1]), [0, 0])).toThrow(/update dtype float32 must equal operand dtype int32/);
  });
});

describe('concatenate and split', () => {
  it('split inverts concatenate and concatenate inverts split', () => {
    const arb = shapeArb.chain((shape) => fc.tuple(fc.constant(shape), fc.nat(shape.length - 1), fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 4 })));
    fc.assert(
      fc.property(arb, ([shape, axis, sizes]) => {
        const parts = sizes.map((n, i) => np.add(np.zeros(shape.map((d, k) => (k === axis ? n : d))), i * 100 + 1));
        const joined = np.concatenate(parts, axis);
        expect(joined.shape[axis]).toBe(sizes.reduce((a, b) => a + b, 0));
        const bounds: number[] = [];
        sizes.slice(0, -1).reduce((acc, n) => (bounds.push(acc + n), acc + n), 0);
        const back = np.split(joined, bounds, axis);
        back.forEach((b, i) => {
          expect(b.shape).toEqual(parts[i].shape);
          expect(b.dataSync()).toEqual(parts[i].dataSync());
        });
        expect(np.concatenate(back, axis).dataSync()).toEqual(joined.dataSync());
      }),
      { numRuns: 60 },
    );
  });

  it('promotes dtypes and checks shapes', () => {
    expect(np.concatenate([np.array([1, 2]), np.array([0.5])]).dtype).toBe('float32');
    expect(np.concatenate([np.ones([2, 2]), np.zeros([2, 2])], null).shape).toEqual([8]);
    expect(() => lax.concatenate([np.ones([2, 3]), np.ones([3, 2])], 0)).toThrow(/must agree in every dimension but 0; got \[2,3\], \[3,2\]/);
    expect(() => np.concatenate([np.ones([2, 3]), np.ones([2])])).toThrow(/same rank/);
    expect(() => np.concatenate([np.ones([2])], 1)).toThrow(/axis 1 is out of range/);
    expect(() => np.split(np.arange(5), 2)).toThrow(/does not result in an equal division: axis 0 of size 5 into 2 sections/);
    expect(np.arraySplit(np.arange(5), 3).map((a) => a.toArray())).toEqual([[0, 1], [2, 3], [4]]);
    expect(np.stack([np.arange(2), np.arange(2)], 1).toArray()).toEqual([
      [0, 0],
      [1, 1],
    ]);
    expect(np.hstack([np.arange(2), np.arange(1)]).toArray()).toEqual([0, 1, 0]);
    expect(np.vstack([np.arange(2), np.arange(2)]).shape).toEqual([2, 2]);
    expect(() => np.stack([np.ones([2]), np.ones([3])])).toThrow(/same shape/);
  });
});

describe('pad', () => {
  it('pad then slice is the identity (lax.pad with interior padding, np.pad in every mode)', () => {
    const arb = shapeArb.chain((shape) =>
      fc.tuple(
        fc.constant(shape),
        fc.tuple(...shape.map(() => fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 2 })))),
        fc.constantFrom('constant', 'edge', 'reflect', 'symmetric', 'wrap'),
      ),
    );
    fc.assert(
      fc.property(arb, ([shape, cfg, mode]) => {
        const x = arange(shape);
        const p = lax.pad(x, -1, cfg as [number, number, number][]);
        const back = lax.slice(p, cfg.map((c) => c[0]), cfg.map((c, d) => p.shape[d] - c[1]), cfg.map((c) => c[2] + 1));
        expect(back.dataSync()).toEqual(x.dataSync());
        // Everything else is the padding value.
        const padCount = Array.from(p.dataSync()).filter((v) => v === -1).length;
        expect(padCount).toBe(p.size - x.size);
        const q = np.pad(x, cfg.map((c) => [c[0], c[1]]), { mode: mode as 'constant' });
        const inner = lax.slice(q, cfg.map((c) => c[0]), cfg.map((c, d) => q.shape[d] - c[1]));
        expect(inner.dataSync()).toEqual(x.dataSync());
      }),
      { numRuns: 80 },
    );
  });

  it('negative low/high padding crops', () => {
    expect(lax.pad(np.arange(5), 9, [[-2, 1, 0]]).toArray()).toEqual([2, 3, 4, 9]);
    expect(lax.pad(np.arange(3), 0, [[-1, 2, 1]]).toArray()).toEqual([0, 1, 0, 2, 0, 0]);
    expect(() => lax.pad(np.arange(3), 0, [[-5, 0, 0]])).toThrow(/makes dimension 0 \(size 3\) negative/);
    expect(() => lax.pad(np.arange(3), 0, [[0, 0, -1]])).toThrow(/interior >= 0/);
    expect(() => lax.pad(np.arange(3), np.array([0, 0]), [[0, 0, 0]])).toThrow(/padding_value must be a scalar/);
  });

  it('np.pad modes match NumPy values', () => {
    const x = np.array([1, 2, 3]);
    expect(np.pad(x, [2, 3], { mode: 'reflect' }).toArray()).toEqual([3, 2, 1, 2, 3, 2, 1, 2]);
    expect(np.pad(x, [2, 3], { mode: 'symmetric' }).toArray()).toEqual([2, 1, 1, 2, 3, 3, 2, 1]);
    expect(np.pad(x, [2, 3], { mode: 'wrap' }).toArray()).toEqual([2, 3, 1, 2, 3, 1, 2, 3]);
    expect(np.pad(x, [2, 3], { mode: 'edge' }).toArray()).toEqual([1, 1, 1, 2, 3, 3, 3, 3]);
    expect(np.pad(x, 1, { constantValues: [7, 8] }).toArray()).toEqual([7, 1, 2, 3, 8]);
    expect(np.pad(x, [5, 0], { mode: 'reflect' }).toArray()).toEqual([2, 1, 2, 3, 2, 1, 2, 3]); // NumPy reflects repeatedly
    expect(np.pad(np.array([[1, 2], [3, 4]]), [[1, 0], [0, 1]], { constantValues: [[5, 6], [7, 8]] }).toArray()).toEqual([
      [5, 5, 8],
      [1, 2, 8],
      [3, 4, 8],
    ]);
    expect(() => np.pad(x, -1)).toThrow(/non-negative integers/);
    expect(() => np.pad(x, 1, { mode: 'mean' as never })).toThrow(/mode must be one of constant, edge, reflect, symmetric, wrap/);
    expect(() => np.pad(np.zeros([0]), 1, { mode: 'edge' })).toThrow(/cannot pad the empty axis 0/);
  });
});
