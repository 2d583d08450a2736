/**
 * Copying an axis-aligned box between two row-major byte buffers: the one data-movement
 * primitive that chunking a shard on save and filling a target shard on restore both need.
 * Copies the innermost contiguous run with `TypedArray.set`, so it runs at memcpy speed for
 * the common case of whole rows.
 */

export interface Box {
  /** Row-major byte buffer. */
  readonly data: Uint8Array;
  /** Element shape of the buffer. */
  readonly shape: readonly number[];
}

/**
 * Copies the box of `size` elements starting at `srcOrigin` in `src` to `dstOrigin` in `dst`
 * (all in elements; `itemsize` bytes each).
 */
export function copyBox(
  src: Box,
  srcOrigin: readonly number[],
  dst: Box,
  dstOrigin: readonly number[],
  size: readonly number[],
  itemsize: number,
): void {
  const rank = size.length;
  if (size.some((s) => s === 0)) return;
  if (rank === 0) {
    dst.data.set(src.data.subarray(0, itemsize), 0);
    return;
  }
  const sStr = strides(src.shape, itemsize);
  const dStr = strides(dst.shape, itemsize);
  // Merge trailing axes that are whole in both buffers into one contiguous run.
  let inner = rank - 1;
  let run = size[inner] * itemsize;
  while (inner > 0 && size[inner] === src.shape[inner] && size[inner] === dst.shape[inner] && srcOrigin[inner] === 0 && dstOrigin[inner] === 0) {
    inner--;
    run *= size[inner];
  }
  let sBase = 0;
  let dBase = 0;
  for (let d = 0; d < rank; d++) {
    sBase += srcOrigin[d] * sStr[d];
    dBase += dstOrigin[d] * dStr[d];
  }
  const idx = new Array<number>(inner).fill(0);
  for (;;) {
    let so = sBase;
    let dO = dBase;
    for (let d = 0; d < inner; d++) {
      so += idx[d] * sStr[d];
      dO += idx[d] * dStr[d];
    }
    dst.data.set(src.data.subarray(so, so + run), dO);
    let d = inner - 1;
    while (d >= 0 && ++idx[d] === size[d]) idx[d--] = 0;
    if (d < 0) return;
  }
}

function strides(shape: readonly number[], itemsize: number): number[] {
  const st = new Array<number>(shape.length);
  let acc = itemsize;
  for (let i = shape.length - 1; i >= 0; i--) {
    st[i] = acc;
    acc *= shape[i];
  }
  return st;
}

/** The intersection of two boxes given as per-axis [start, stop), or null when empty. */
export function intersect(a: ReadonlyArray<readonly [number, number]>, b: ReadonlyArray<readonly [number, number]>): [number, number][] | null {
  const out: [number, number][] = [];
  for (let d = 0; d < a.length; d++) {
    const s = Math.max(a[d][0], b[d][0]);
    const e = Math.min(a[d][1], b[d][1]);
    if (s >= e) return null;
    out.push([s, e]);
  }
  return out;
}
