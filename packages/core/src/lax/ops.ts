/**
 * The `lax` operations: thin typed wrappers that bind primitives (the public `lax` namespace,
 * index.ts, adds the control-flow primitives of transforms/). Unlike `np`, lax does not
 * broadcast or promote: operands must agree (a JS scalar is converted to the other operand's
 * dtype, as a Python scalar is in jax.lax).
 */
import { Array } from '../array';
import { type ArrayLike, asArray } from '../convert';
import type { DType } from '../dtype';
import { normalizeAxis } from '../shape';
import { bind, bind1 } from '../trace';
import type { Primitive } from '../primitive';
import { convertElementType } from './elementwise';
import { expandDims, operands, squeeze } from './structural';
import { type DotDimensionNumbers, dotGeneral as dotGeneralP } from './dot';
import { type PrecisionLike, canonicalizePrecision } from './precision';
import { dynamicSliceP, dynamicUpdateSliceP, ints, padP, sliceInDim } from './slicing';
export { concatenate, slice, sliceInDim } from './slicing';
import type { GatherDimensionNumbers, GatherScatterMode } from './gather';
import * as gs from './gatherScatter';
import type { ScatterDimensionNumbers } from './scatter';
import { sort as sortP, topK as topKP } from './sort';

export type { DotDimensionNumbers } from './dot';
export {
  type CanonicalPrecision,
  Precision,
  type PrecisionLike,
  defaultMatmulPrecision,
  getDefaultMatmulPrecision,
  setDefaultMatmulPrecision,
} from './precision';
export type { GatherDimensionNumbers, GatherScatterMode } from './gather';
export type { ScatterDimensionNumbers } from './scatter';
export type { PaddingConfig } from './slicing';

export {
  neg, sign, abs, floor, ceil, round, isFinite, exp, exp2, log, log1p, expm1, tanh, logistic, sin, cos, tan, asin, acos, atan,
  sinh, cosh, asinh, acosh, atanh, sqrt, rsqrt, cbrt, erf, erfc, erfInv, lgamma, digamma, square, bitwiseNot, integerPow,
  add, sub, mul, div, rem, pow, max, min, atan2, nextafter, bitwiseAnd, bitwiseOr, bitwiseXor, shiftLeft, shiftRightArithmetic,
  shiftRightLogical, eq, ne, lt, le, gt, ge, select, selectN, clamp, convertElementType, bitcastConvertType,
} from './elementwise';
export { broadcastInDim, broadcast, reshape, transpose, rev, squeeze, expandDims, iota, broadcastedIota, reduceSum } from './structural';

export { reduceProd, reduceMax, reduceMin, reduceAnd, reduceOr, argmax, argmin, cumsum, cumprod, cummax, cummin } from './reduce';

export function dotGeneral(
  lhs: ArrayLike,
  rhs: ArrayLike,
  dimensionNumbers: DotDimensionNumbers,
  opts: { precision?: PrecisionLike; preferredElementType?: DType | null } = {},
): Array {
  const [l, r] = operands('dot_general', [lhs, rhs]);
  return bind1(dotGeneralP, [l, r], {
    dimensionNumbers,
    precision: canonicalizePrecision(opts.precision, 'dot_general'),
    preferredElementType: opts.preferredElementType ?? null,
  });
}

/** `lax.dot`: matrix/vector product contracting lhs's last and rhs's first dimension. */
export function dot(lhs: ArrayLike, rhs: ArrayLike, opts: { precision?: PrecisionLike; preferredElementType?: DType | null } = {}): Array {
  const [l, r] = operands('dot', [lhs, rhs]);
  return dotGeneral(l, r, [[[l.ndim - 1], [0]], [[], []]], opts);
}


// ---------------------------------------------------------------------------------------------
// Slicing, gather/scatter and sorting (slicing.ts, gather.ts, scatter.ts, sort.ts).

/** Start indices as int32 scalars (JS integers or integer scalar Arrays). */
function startScalars(op: string, startIndices: readonly (number | Array)[]): Array[] {
  return startIndices.map((s, i) => {
    if (typeof s === 'number') {
      if (!Number.isInteger(s)) throw new TypeError(`${op}: start index ${i} must be an integer; got ${s}`);
      return asArray(s, { dtype: 'int32', op });
    }
    if (!(s instanceof Array) || s.ndim !== 0) throw new TypeError(`${op}: start index ${i} must be an integer or an integer scalar Array; got ${String(s)}`);
    return s.dtype === 'int32' ? s : convertElementType(s, 'int32');
  });
}

/** `lax.dynamic_slice`: starts may be traced scalars; they are clamped so the slice fits. */
export function dynamicSlice(x: ArrayLike, startIndices: readonly (number | Array)[], sliceSizes: readonly number[]): Array {
  const a = asArray(x, { op: 'dynamic_slice' });
  return bind1(dynamicSliceP, [a, ...startScalars('dynamic_slice', startIndices)], { sliceSizes: ints('dynamic_slice', 'slice_sizes', sliceSizes) });
}

/** `lax.dynamic_slice_in_dim`. */
export function dynamicSliceInDim(x: ArrayLike, startIndex: number | Array, sliceSize: number, axis = 0): Array {
  const a = asArray(x, { op: 'dynamic_slice_in_dim' });
  const ax = normalizeAxis(axis, a.ndim, 'dynamic_slice_in_dim');
  const starts = a.shape.map((_, d) => (d === ax ? startIndex : 0));
  return dynamicSlice(a, starts, a.shape.map((m, d) => (d === ax ? sliceSize : m)));
}

/** `lax.index_in_dim`: one static position along `axis` (negative counts from the end), kept as a size-1 dim unless `keepdims` is false. */
export function indexInDim(x: ArrayLike, index: number, axis = 0, keepdims = true): Array {
  const a = asArray(x, { op: 'index_in_dim' });
  const ax = normalizeAxis(axis, a.ndim, 'index_in_dim');
  const n = a.shape[ax];
  const i = index < 0 ? index + n : index;
  if (!Number.isInteger(index) || i < 0 || i >= n) throw new RangeError(`index_in_dim: index ${index} is out of bounds for axis ${ax} with size ${n}`);
  const out = sliceInDim(a, i, i + 1, 1, ax);
  return keepdims ? out : squeeze(out, [ax]);
}

/** `lax.dynamic_index_in_dim`: like index_in_dim with a (possibly traced) start, clamped. */
export function dynamicIndexInDim(x: ArrayLike, index: number | Array, axis = 0, keepdims = true): Array {
  const a = asArray(x, { op: 'dynamic_index_in_dim' });
  const ax = normalizeAxis(axis, a.ndim, 'dynamic_index_in_dim');
  const out = dynamicSliceInDim(a, index, 1, ax);
  return keepdims ? out : squeeze(out, [ax]);
}

/** `lax.dynamic_update_slice_in_dim`: writes `update` at `startIndex` along `axis` (clamped). */
export function dynamicUpdateSliceInDim(x: ArrayLike, update: ArrayLike, startIndex: number | Array, axis: number): Array {
  const a = asArray(x, { op: 'dynamic_update_slice_in_dim' });
  const ax = normalizeAxis(axis, a.ndim, 'dynamic_update_slice_in_dim');
  return dynamicUpdateSlice(a, update, a.shape.map((_, d) => (d === ax ? startIndex : 0)));
}

/** `lax.dynamic_update_index_in_dim`: writes a slab of size 1 (given with or without that dim) at `index`. */
export function dynamicUpdateIndexInDim(x: ArrayLike, update: ArrayLike, index: number | Array, axis: number): Array {
  const a = asArray(x, { op: 'dynamic_update_index_in_dim' });
  const ax = normalizeAxis(axis, a.ndim, 'dynamic_update_index_in_dim');
  let u = update instanceof Array ? update : asArray(update, { dtype: a.dtype, op: 'dynamic_update_index_in_dim' });
  if (u.ndim === a.ndim - 1) u = expandDims(u, [ax]);
  return dynamicUpdateSliceInDim(a, u, index, ax);
}

/** `lax.dynamic_update_slice`: writes `update` at clamped starts. */
export function dynamicUpdateSlice(x: ArrayLike, update: ArrayLike, startIndices: readonly (number | Array)[]): Array {
  const a = asArray(x, { op: 'dynamic_update_slice' });
  const u = update instanceof Array ? update : asArray(update, { dtype: a.dtype, op: 'dynamic_update_slice' });
  return bind1(dynamicUpdateSliceP, [a, u, ...startScalars('dynamic_update_slice', startIndices)], {});
}

/** `lax.pad(x, paddingValue, [[lo, hi, interior], ...])`; negative lo/hi crop. */
export function pad(x: ArrayLike, paddingValue: ArrayLike, paddingConfig: readonly (readonly [number, number, number])[]): Array {
  const a = asArray(x, { op: 'pad' });
  const v = paddingValue instanceof Array ? paddingValue : asArray(paddingValue, { dtype: a.dtype, op: 'pad' });
  return bind1(padP, [a, v], { paddingConfig: paddingConfig.map((c) => [c[0], c[1], c[2]] as [number, number, number]) });
}

export interface GatherOptions {
  /** Default 'fill' as in jax.lax.gather (mode=None); 'drop' is an alias of 'fill'; 'clip' and 'promise_in_bounds' clamp. */
  mode?: GatherScatterMode | 'drop';
  fillValue?: number | null;
  indicesAreSorted?: boolean;
  uniqueIndices?: boolean;
}

type GatherDnInput = Omit<GatherDimensionNumbers, 'operandBatchingDims' | 'startIndicesBatchingDims'> &
  Partial<Pick<GatherDimensionNumbers, 'operandBatchingDims' | 'startIndicesBatchingDims'>>;

/** `lax.gather` with GatherDimensionNumbers (batching dims may be omitted); index vector last. */
export function gather(operand: ArrayLike, indices: ArrayLike, dimensionNumbers: GatherDnInput, sliceSizes: readonly number[], opts: GatherOptions = {}): Array {
  const a = asArray(operand, { op: 'gather' });
  const i = asArray(indices, { op: 'gather' });
  const dn: GatherDimensionNumbers = {
    offsetDims: ints('gather', 'offset_dims', dimensionNumbers.offsetDims),
    collapsedSliceDims: ints('gather', 'collapsed_slice_dims', dimensionNumbers.collapsedSliceDims),
    startIndexMap: ints('gather', 'start_index_map', dimensionNumbers.startIndexMap),
    operandBatchingDims: ints('gather', 'operand_batching_dims', dimensionNumbers.operandBatchingDims ?? []),
    startIndicesBatchingDims: ints('gather', 'start_indices_batching_dims', dimensionNumbers.startIndicesBatchingDims ?? []),
  };
  return bind1(gs.gather, [a, i], {
    dimensionNumbers: dn,
    sliceSizes: ints('gather', 'slice_sizes', sliceSizes),
    mode: opts.mode === undefined || opts.mode === 'drop' ? 'fill' : opts.mode,
    fillValue: opts.fillValue ?? null,
    indicesAreSorted: opts.indicesAreSorted ?? false,
    uniqueIndices: opts.uniqueIndices ?? false,
  });
}

export interface ScatterOptions {
  /** Default 'fill' (drop out-of-bounds windows) as in jax.lax.scatter; 'drop' is an alias. */
  mode?: GatherScatterMode | 'drop';
  indicesAreSorted?: boolean;
  uniqueIndices?: boolean;
}

type ScatterDnInput = Omit<ScatterDimensionNumbers, 'operandBatchingDims' | 'scatterIndicesBatchingDims'> &
  Partial<Pick<ScatterDimensionNumbers, 'operandBatchingDims' | 'scatterIndicesBatchingDims'>>;

const scatterOp = (p: Primitive) => (operand: ArrayLike, indices: ArrayLike, updates: ArrayLike, dimensionNumbers: ScatterDnInput, opts: ScatterOptions = {}): Array => {
  const a = asArray(operand, { op: p.name });
  const u = updates instanceof Array ? updates : asArray(updates, { dtype: a.dtype, op: p.name });
  const i = asArray(indices, { op: p.name });
  const dn: ScatterDimensionNumbers = {
    updateWindowDims: ints(p.name, 'update_window_dims', dimensionNumbers.updateWindowDims),
    insertedWindowDims: ints(p.name, 'inserted_window_dims', dimensionNumbers.insertedWindowDims),
    scatterDimsToOperandDims: ints(p.name, 'scatter_dims_to_operand_dims', dimensionNumbers.scatterDimsToOperandDims),
    operandBatchingDims: ints(p.name, 'operand_batching_dims', dimensionNumbers.operandBatchingDims ?? []),
    scatterIndicesBatchingDims: ints(p.name, 'scatter_indices_batching_dims', dimensionNumbers.scatterIndicesBatchingDims ?? []),
  };
  const mode = opts.mode === undefined || opts.mode === 'drop' ? 'fill' : opts.mode;
  return bind1(p, [a, i, u], { dimensionNumbers: dn, mode, indicesAreSorted: opts.indicesAreSorted ?? false, uniqueIndices: opts.uniqueIndices ?? false });
};

/** `lax.scatter`: replaces operand windows with updates (out-of-bounds windows dropped by default). */
export const scatter = scatterOp(gs.scatter);
export const scatterAdd = scatterOp(gs.scatterAdd);
export const scatterMul = scatterOp(gs.scatterMul);
export const scatterMin = scatterOp(gs.scatterMin);
export const scatterMax = scatterOp(gs.scatterMax);

export interface SortOptions {
  /** Default -1 (the last dimension). */
  dimension?: number;
  isStable?: boolean;
  numKeys?: number;
}

/** `lax.sort`: one operand gives one Array; a list gives a list, sorted by the first `numKeys`. */
export function sort(operand: ArrayLike, opts?: SortOptions): Array;
export function sort(operands: readonly Array[], opts?: SortOptions): Array[];
export function sort(operand: ArrayLike | readonly Array[], opts: SortOptions = {}): Array | Array[] {
  const many = globalThis.Array.isArray(operand) && operand.length > 0 && operand.every((o) => o instanceof Array);
  const xs = many ? (operand as Array[]) : [asArray(operand as ArrayLike, { op: 'sort' })];
  if (xs.length === 0) throw new Error('sort: needs at least one operand');
  const rank = xs[0].ndim;
  if (rank === 0) throw new Error('sort: operands must have rank >= 1; got a scalar');
  const dimension = normalizeAxis(opts.dimension ?? -1, rank, 'sort', 'dimension');
  const outs = bind(sortP, xs, { dimension, isStable: opts.isStable ?? true, numKeys: opts.numKeys ?? 1 });
  return many ? outs : outs[0];
}

/** `lax.sort_key_val(keys, values, dimension, isStable)`. */
export function sortKeyVal(keys: ArrayLike, values: ArrayLike, dimension = -1, isStable = true): [Array, Array] {
  const k = asArray(keys, { op: 'sort_key_val' });
  const v = asArray(values, { op: 'sort_key_val' });
  const [a, b] = sort([k, v], { dimension, isStable, numKeys: 1 });
  return [a, b];
}

/** `lax.top_k(x, k)`: the k largest entries along the last axis and their int32 indices. */
export function topK(x: ArrayLike, k: number): [Array, Array] {
  const a = asArray(x, { op: 'top_k' });
  const [v, i] = bind(topKP, [a], { k });
  return [v, i];
}
