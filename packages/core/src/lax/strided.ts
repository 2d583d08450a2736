/**
 * Index arithmetic for the reference kernels: walking an output array in row-major order while
 * tracking the matching offset in an input with arbitrary strides (transposes, broadcasts,
 * slices and reversals are all such walks).
 */
import { type Shape, sizeOf } from '../shape';

/** Any indexable numeric buffer (typed arrays of every kind). */
export interface NumBuf {
  readonly length: number;
  [i: number]: number;
}

/**
 * Copies `src` into a new array of `outShape`, where output element `idx` reads
 * `src[base + sum(idx[d] * inStrides[d])]`. Strides may be 0 (broadcast) or negative (reverse).
 */
export function stridedCopy<T extends NumBuf>(src: ArrayLike<number>, out: T, outShape: Shape, inStrides: readonly number[], base = 0): T {
  const rank = outShape.length;
  const n = sizeOf(outShape);
  if (n === 0) return out;
  if (rank === 0) {
    out[0] = src[base];
    return out;
  }
  const idx = new Int32Array(rank);
  const last = rank - 1;
  const lastDim = outShape[last];
  const lastStride = inStrides[last];
  let off = base;
  let o = 0;
  while (o < n) {
    // Innermost dimension as a tight loop.
    let p = off;
    for (let i = 0; i < lastDim; i++, p += lastStride) out[o++] = src[p];
    // Carry into outer dimensions.
    let d = last - 1;
    for (; d >= 0; d--) {
      idx[d]++;
      off += inStrides[d];
      if (idx[d] < outShape[d]) break;
      off -= inStrides[d] * outShape[d];
      idx[d] = 0;
    }
    if (d < 0) break;
  }
  return out;
}
