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

/** The typed-array methods the row fast paths use. */
interface TypedRow {
  fill(value: number, start?: number, end?: number): unknown;
  set(src: ArrayLike<number>, offset?: number): void;
  subarray(begin: number, end: number): ArrayLike<number>;
}

/** Rows at least this long are copied with `set` / `fill` instead of an element loop. */
const MIN_BLOCK_ROW = 16;

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
  const typedOut = ArrayBuffer.isView(out) ? (out as unknown as TypedRow) : null;
  if (typedOut !== null && inStrides.every((s) => s === 0)) {
    typedOut.fill(src[base]); // a scalar broadcast
    return out;
  }
  // Rows of one typed-array type with unit stride are block copies (bit-exact); stride-0 rows are fills.
  const sameType = typedOut !== null && ArrayBuffer.isView(src) && src.constructor === out.constructor;
  const idx = new Int32Array(rank);
  const last = rank - 1;
  const lastDim = outShape[last];
  const lastStride = inStrides[last];
  const rowCopy = sameType && lastStride === 1 && lastDim >= MIN_BLOCK_ROW;
  const rowFill = typedOut !== null && lastStride === 0 && lastDim >= MIN_BLOCK_ROW;
  let off = base;
  let o = 0;
  while (o < n) {
    // Innermost dimension: a block copy, a fill, or a tight loop.
    if (rowCopy) {
      typedOut!.set((src as unknown as TypedRow).subarray(off, off + lastDim), o);
      o += lastDim;
    } else if (rowFill) {
      typedOut!.fill(src[off], o, o + lastDim);
      o += lastDim;
    } else {
      let p = off;
      for (let i = 0; i < lastDim; i++, p += lastStride) out[o++] = src[p];
    }
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
