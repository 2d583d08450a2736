/**
 * `gather`: XLA's general gather with JAX's GatherDimensionNumbers (offset_dims,
 * collapsed_slice_dims, start_index_map, operand_batching_dims, start_indices_batching_dims)
 * and `slice_sizes`. As in JAX, the index vector is always the last dimension of `indices`.
 * Advanced NumPy indexing, `take` and `take_along_axis` all lower to it.
 *
 * Modes (JAX's GatherScatterMode): 'clip' and 'promise_in_bounds' clamp each start index so
 * the slice fits (XLA's native behaviour); 'fill' returns `fillValue` for every element of a
 * slice whose start is out of bounds (default NaN for floats, the most negative value for signed
 * integers, the largest value for unsigned integers, true for bool, as JAX does).
 * The dimension-number helpers here are shared with scatter.ts; the primitive itself is defined
 * with its rules in gatherScatter.ts (gather and scatter-add are each other's transpose).
 */
import { numbersToStorage } from '../array';
import { type DType, allocStorage, intRange, isFloat, isInteger } from '../dtype';
import type { PrimitiveDef, ShapedArray } from '../primitive';
import { fmt, sizeOf, stridesOf } from '../shape';
import { walkWindows } from './windowWalk';
import { showValue } from '../describe';

export type GatherScatterMode = 'clip' | 'fill' | 'promise_in_bounds';

export interface GatherDimensionNumbers {
  readonly offsetDims: readonly number[];
  readonly collapsedSliceDims: readonly number[];
  readonly startIndexMap: readonly number[];
  readonly operandBatchingDims: readonly number[];
  readonly startIndicesBatchingDims: readonly number[];
}

export interface GatherParams {
  dimensionNumbers: GatherDimensionNumbers;
  sliceSizes: readonly number[];
  mode: GatherScatterMode;
  /** Used in 'fill' mode; null means the dtype's default fill. */
  fillValue: number | null;
  indicesAreSorted: boolean;
  uniqueIndices: boolean;
}

export const MODES: readonly GatherScatterMode[] = ['clip', 'fill', 'promise_in_bounds'];

/** Checks a list of dimension numbers: integers in [0, bound), unique, optionally sorted. */
export function checkDimList(op: string, arg: string, dims: readonly number[], bound: number, what: string, sorted: boolean): void {
  if (!globalThis.Array.isArray(dims)) throw new TypeError(`${op}: ${arg} must be a list of integers; got ${showValue(dims)}`);
  dims.forEach((d, i) => {
    if (!Number.isInteger(d) || d < 0 || d >= bound) {
      throw new RangeError(`${op}: ${arg} ${fmt(dims)} has ${d}, out of range for ${what} (valid 0..${bound - 1})`);
    }
    if (sorted && i > 0 && d <= dims[i - 1]) throw new Error(`${op}: ${arg} ${fmt(dims)} must be sorted and unique`);
  });
  if (new Set(dims).size !== dims.length) throw new Error(`${op}: ${arg} ${fmt(dims)} has repeated entries`);
}

/** Checks the indices operand: an integer array whose last dimension is the index vector. */
export function checkIndices(op: string, indices: ShapedArray, vectorLen: number, mapArg: string): void {
  if (!isInteger(indices.dtype)) throw new TypeError(`${op}: indices must have an integer dtype; got ${indices.dtype}`);
  if (indices.shape.length === 0) throw new Error(`${op}: indices must have rank >= 1 (the last dimension is the index vector); got a scalar`);
  const k = indices.shape[indices.shape.length - 1];
  if (k !== vectorLen) {
    throw new Error(`${op}: the index vector (last dimension of indices ${fmt(indices.shape)}) has ${k} entries but ${mapArg} has ${vectorLen}`);
  }
}

/** Checks operand batching dims against index batching dims (sizes must agree). */
export function checkBatching(op: string, operand: ShapedArray, indices: ShapedArray, opDims: readonly number[], idxDims: readonly number[], idxArg: string): void {
  if (opDims.length !== idxDims.length) {
    throw new Error(`${op}: operand_batching_dims ${fmt(opDims)} and ${idxArg} ${fmt(idxDims)} must have the same length`);
  }
  checkDimList(op, idxArg, idxDims, indices.shape.length - 1, `indices ${fmt(indices.shape)} without its index vector dimension`, false);
  opDims.forEach((d, i) => {
    if (operand.shape[d] !== indices.shape[idxDims[i]]) {
      throw new Error(`${op}: operand batching dimension ${d} (size ${operand.shape[d]}) and indices batching dimension ${idxDims[i]} (size ${indices.shape[idxDims[i]]}) differ`);
    }
  });
}

export function checkMode(op: string, mode: unknown): GatherScatterMode {
  if (!MODES.includes(mode as GatherScatterMode)) throw new Error(`${op}: mode must be one of ${MODES.join(', ')}; got ${showValue(mode)}`);
  return mode as GatherScatterMode;
}

/** JAX's default fill for gather's 'fill' mode. */
export function defaultFill(dtype: DType): number {
  if (isFloat(dtype)) return NaN;
  if (dtype === 'bool') return 1;
  const [lo, hi] = intRange(dtype);
  return dtype.startsWith('u') ? hi : lo;
}

export function gatherShape(operand: ShapedArray, indices: ShapedArray, p: GatherParams): number[] {
  const op = 'gather';
  const dn = p.dimensionNumbers;
  const r = operand.shape.length;
  checkMode(op, p.mode);
  checkIndices(op, indices, dn.startIndexMap.length, `start_index_map ${fmt(dn.startIndexMap)}`);
  checkDimList(op, 'start_index_map', dn.startIndexMap, r, `operand ${fmt(operand.shape)}`, false);
  checkDimList(op, 'collapsed_slice_dims', dn.collapsedSliceDims, r, `operand ${fmt(operand.shape)}`, true);
  checkDimList(op, 'operand_batching_dims', dn.operandBatchingDims, r, `operand ${fmt(operand.shape)}`, true);
  checkBatching(op, operand, indices, dn.operandBatchingDims, dn.startIndicesBatchingDims, 'start_indices_batching_dims');
  for (const d of dn.collapsedSliceDims) {
    if (dn.operandBatchingDims.includes(d)) throw new Error(`${op}: dimension ${d} is both in collapsed_slice_dims and operand_batching_dims`);
  }
  for (const d of dn.startIndexMap) {
    if (dn.operandBatchingDims.includes(d)) throw new Error(`${op}: dimension ${d} is both in start_index_map and operand_batching_dims`);
  }
  if (p.sliceSizes.length !== r) {
    throw new Error(`${op}: slice_sizes ${fmt(p.sliceSizes)} needs one entry per operand dimension (operand ${fmt(operand.shape)})`);
  }
  p.sliceSizes.forEach((s, d) => {
    if (!Number.isInteger(s) || s < 0 || s > operand.shape[d]) {
      throw new RangeError(`${op}: slice_sizes ${fmt(p.sliceSizes)} must lie within operand ${fmt(operand.shape)} (dimension ${d}: 0..${operand.shape[d]})`);
    }
    if ((dn.collapsedSliceDims.includes(d) || dn.operandBatchingDims.includes(d)) && s > 1) {
      throw new Error(`${op}: slice_sizes[${d}] is ${s} but dimension ${d} is collapsed or a batching dim, so its slice size must be 0 or 1`);
    }
  });
  const windowDims = operand.shape.map((_, d) => d).filter((d) => !dn.collapsedSliceDims.includes(d) && !dn.operandBatchingDims.includes(d));
  const batchShape = indices.shape.slice(0, -1);
  const outRank = batchShape.length + windowDims.length;
  if (dn.offsetDims.length !== windowDims.length) {
    throw new Error(`${op}: offset_dims ${fmt(dn.offsetDims)} must have ${windowDims.length} entries (operand rank ${r} minus collapsed_slice_dims and operand_batching_dims)`);
  }
  checkDimList(op, 'offset_dims', dn.offsetDims, outRank, `an output of rank ${outRank}`, true);
  const out = new globalThis.Array<number>(outRank);
  let b = 0;
  let w = 0;
  for (let i = 0; i < outRank; i++) out[i] = dn.offsetDims.includes(i) ? p.sliceSizes[windowDims[w++]] : batchShape[b++];
  return out;
}

/** gather's shape rule and reference kernel (the primitive: gatherScatter.ts). */
export const gatherDef: Omit<PrimitiveDef<GatherParams>, 'rules'> = {
  name: 'gather',
  abstractEval([operand, indices], p) {
    return [{ shape: gatherShape(operand, indices, p), dtype: operand.dtype, weakType: operand.weakType }];
  },
  impl([x, idx], p, [o]) {
    const dn = p.dimensionNumbers;
    const out = allocStorage(o.dtype, sizeOf(o.shape));
    if (out.length === 0) return [out];
    const batchPos = o.shape.map((_, i) => i).filter((i) => !dn.offsetDims.includes(i));
    const winDims = x.shape.map((_, d) => d).filter((d) => !dn.collapsedSliceDims.includes(d) && !dn.operandBatchingDims.includes(d));
    const ost = stridesOf(o.shape);
    const fill = p.mode === 'fill' ? numbersToStorage([p.fillValue ?? defaultFill(x.dtype)], x.dtype)[0] : 0;
    const src = x.data;
    walkWindows(
      {
        operandShape: x.shape,
        indices: idx.data,
        batchShape: idx.shape.slice(0, -1),
        startDims: dn.startIndexMap,
        windowExtent: p.sliceSizes,
        winDims,
        winSizes: winDims.map((d) => p.sliceSizes[d]),
        operandBatchingDims: dn.operandBatchingDims,
        indicesBatchingDims: dn.startIndicesBatchingDims,
        otherBatchStrides: batchPos.map((i) => ost[i]),
        otherWindowStrides: dn.offsetDims.map((i) => ost[i]),
        clamp: p.mode !== 'fill',
        visitOutOfBounds: true,
      },
      (xo, oo, oob) => {
        out[oo] = oob ? fill : src[xo];
      },
    );
    return [out];
  },
};
