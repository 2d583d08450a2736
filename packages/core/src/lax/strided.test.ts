/**
 * stridedCopy (the walk under broadcast_in_dim, transpose, rev, slice) against the definition:
 * output element idx reads src[base + sum(idx[d] * inStrides[d])]. Random shapes and strides
 * (0 for broadcasts, negative for reversals, long rows for the block-copy and fill paths), with
 * the output the same typed-array type as the source or a different one.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { stridedCopy } from './strided';

const caseArb = fc
  .array(fc.integer({ min: 1, max: 4 }), { minLength: 0, maxLength: 3 })
  .chain((outer) => fc.tuple(fc.constant(outer), fc.integer({ min: 1, max: 40 })))
  .chain(([outer, lastDim]) => {
    const shape = [...outer, lastDim];
    return fc.tuple(
      fc.constant(shape),
      fc.array(fc.constantFrom(-2, -1, 0, 0, 1, 1, 2, 3), { minLength: shape.length, maxLength: shape.length }),
      fc.boolean(),
      fc.integer({ min: -1000, max: 1000 }),
    );
  });

describe('stridedCopy', () => {
  it('reads src[base + sum(idx * strides)] for every output element', () => {
    fc.assert(
      fc.property(caseArb, ([shape, mult, sameType, seed]) => {
        // Scale unit multipliers into real strides over a source big enough for every offset.
        const strides = mult.map((m, d) => m * shape.slice(d + 1).reduce((a, b) => a * b, 1));
        const span = shape.reduce((acc, n, d) => acc + (n - 1) * Math.abs(strides[d]), 0);
        const base = shape.reduce((acc, n, d) => acc + (strides[d] < 0 ? (n - 1) * -strides[d] : 0), 0);
        const src = new Float32Array(span + 1).map((_, i) => ((i * 7919 + seed) % 1000) / 8);
        const n = shape.reduce((a, b) => a * b, 1);
        const out = sameType ? new Float32Array(n) : new Float64Array(n);
        stridedCopy(src, out, shape, strides, base);
        const want = new Float64Array(n);
        const idx = shape.map(() => 0);
        for (let k = 0; k < n; k++) {
          let off = base;
          for (let d = 0; d < shape.length; d++) off += idx[d] * strides[d];
          want[k] = src[off];
          for (let d = shape.length - 1; d >= 0; d--) {
            if (++idx[d] < shape[d]) break;
            idx[d] = 0;
          }
        }
        expect(Array.from(out)).toEqual(Array.from(want));
      }),
      { numRuns: 200 },
    );
  });
});
