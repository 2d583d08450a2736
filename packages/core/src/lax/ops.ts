/**
 * The `lax` operations: thin typed wrappers that bind primitives (the public `lax` namespace,
 * index.ts, adds the control-flow primitives of transforms/). Unlike `np`, lax does not
 * broadcast or promote: operands must agree (a JS scalar is converted to the other operand's
 * dtype, as a Python scalar is in jax.lax).
 */
import { Array } from '../array';
import { type ArrayLike, asArray } from '../convert';
import { type DType, checkDType, isFloat } from '../dtype';
import { normalizeAxis } from '../shape';
import { bind, bind1 } from '../trace';
import type { Primitive } from '../primitive';
import * as ew from './elementwise';
import * as st from './structural';
import * as rd from './reduce';
import { type DotDimensionNumbers, dotGeneral as dotGeneralP } from './dot';
import { type PrecisionLike, canonicalizePrecision } from './precision';
import * as sl from './slicing';
import { type GatherDimensionNumbers, type GatherScatterMode, gather as gatherP } from './gather';
import * as sc from './scatter';
import type { ScatterDimensionNumbers } from './scatter';
import { sort as sortP, topK as topKP } from './sort';
import { showValue } from '../describe';

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

const NO_PARAMS = {};

/** Operands of a lax op: Arrays stay as they are; JS scalars take the dtype of the first Array. */
function operands(op: string, xs: ArrayLike[]): Array[] {
  const first = xs.find((x): x is Array => x instanceof Array);
  return xs.map((x) => (x instanceof Array ? x : first && (typeof x === 'number' || typeof x === 'boolean') ? fullLike(x, first, op) : asArray(x, { op })));
}

/** A JS scalar as an operand like `like`. lax does not promote, so a value the dtype cannot hold
 * exactly (1.5 as int32, 2 as bool, NaN as uint8) is an error instead of a silent conversion. */
function fullLike(v: number | boolean, like: Array, op: string): Array {
  const n = Number(v);
  const exact = isFloat(like.dtype) || (like.dtype === 'bool' ? n === 0 || n === 1 : Number.isInteger(n));
  if (!exact) {
    throw new TypeError(`${op}: JS value ${v} cannot be a ${like.dtype} operand (lax does not promote); use the np function or convert the array first`);
  }
  const s = asArray(v, { dtype: like.dtype, op });
  if (like.ndim === 0) return s;
  return bind1(st.broadcastInDim, [s], { shape: like.shape, broadcastDimensions: [] });
}

const u = (p: Primitive) => (x: ArrayLike): Array => bind1(p, operands(p.name, [x]), NO_PARAMS);
const b = (p: Primitive) => (x: ArrayLike, y: ArrayLike): Array => bind1(p, operands(p.name, [x, y]), NO_PARAMS);

export const neg = u(ew.neg);
export const sign = u(ew.sign);
export const abs = u(ew.abs);
export const floor = u(ew.floor);
export const ceil = u(ew.ceil);
/** `lax.round`; `roundingMethod` 0 = away from zero (default), 1 = to nearest even. */
export const round = (x: ArrayLike, roundingMethod: 0 | 1 = 0): Array => (roundingMethod === 1 ? u(ew.roundEven)(x) : u(ew.roundAway)(x));
export const isFinite = u(ew.isFinite);
export const exp = u(ew.exp);
export const exp2 = u(ew.exp2);
export const log = u(ew.log);
export const log1p = u(ew.log1p);
export const expm1 = u(ew.expm1);
export const tanh = u(ew.tanh);
export const logistic = u(ew.logistic);
export const sin = u(ew.sin);
export const cos = u(ew.cos);
export const tan = u(ew.tan);
export const asin = u(ew.asin);
export const acos = u(ew.acos);
export const atan = u(ew.atan);
export const sinh = u(ew.sinh);
export const cosh = u(ew.cosh);
export const asinh = u(ew.asinh);
export const acosh = u(ew.acosh);
export const atanh = u(ew.atanh);
export const sqrt = u(ew.sqrt);
export const rsqrt = u(ew.rsqrt);
export const cbrt = u(ew.cbrt);
export const erf = u(ew.erf);
export const erfc = u(ew.erfc);
export const erfInv = u(ew.erfInv);
export const lgamma = u(ew.lgamma);
export const digamma = u(ew.digamma);
export const square = u(ew.square);
export const bitwiseNot = u(ew.not);
export const integerPow = (x: ArrayLike, y: number): Array => bind1(ew.integerPow, operands('integer_pow', [x]), { y });

export const add = b(ew.add);
export const sub = b(ew.sub);
export const mul = b(ew.mul);
export const div = b(ew.div);
export const rem = b(ew.rem);
export const pow = b(ew.pow);
export const max = b(ew.max);
export const min = b(ew.min);
export const atan2 = b(ew.atan2);
export const nextafter = b(ew.nextafter);
export const bitwiseAnd = b(ew.and);
export const bitwiseOr = b(ew.or);
export const bitwiseXor = b(ew.xor);
export const shiftLeft = b(ew.shiftLeft);
export const shiftRightArithmetic = b(ew.shiftRightArithmetic);
export const shiftRightLogical = b(ew.shiftRightLogical);
export const eq = b(ew.eq);
export const ne = b(ew.ne);
export const lt = b(ew.lt);
export const le = b(ew.le);
export const gt = b(ew.gt);
export const ge = b(ew.ge);

/** `lax.select(pred, onTrue, onFalse)`. */
export function select(pred: ArrayLike, onTrue: ArrayLike, onFalse: ArrayLike): Array {
  const [f, t] = operands('select', [onFalse, onTrue]);
  return bind1(ew.selectN, [asArray(pred, { op: 'select' }), f, t], NO_PARAMS);
}

/** `lax.select_n(which, ...cases)`. */
export function selectN(which: ArrayLike, ...cases: ArrayLike[]): Array {
  return bind1(ew.selectN, [asArray(which, { op: 'select_n' }), ...operands('select_n', cases)], NO_PARAMS);
}

export function clamp(lo: ArrayLike, x: ArrayLike, hi: ArrayLike): Array {
  const [xx, l, h] = operands('clamp', [x, lo, hi]);
  return min(max(xx, l), h);
}

export function convertElementType(x: ArrayLike, newDtype: DType, weakType = false): Array {
  checkDType(newDtype, 'convert_element_type', 'new_dtype');
  const a = asArray(x, { op: 'convert_element_type' });
  if (a.dtype === newDtype && a.weakType === weakType) return a;
  return bind1(ew.convertElementType, [a], { newDtype, weakType });
}

export function bitcastConvertType(x: ArrayLike, newDtype: DType): Array {
  checkDType(newDtype, 'bitcast_convert_type', 'new_dtype');
  return bind1(ew.bitcastConvertType, [asArray(x, { op: 'bitcast_convert_type' })], { newDtype });
}

export function broadcastInDim(x: ArrayLike, shape: readonly number[], broadcastDimensions: readonly number[]): Array {
  return bind1(st.broadcastInDim, [asArray(x, { op: 'broadcast_in_dim' })], { shape: [...shape], broadcastDimensions: [...broadcastDimensions] });
}

/** `lax.broadcast(x, sizes)`: prepends dimensions. */
export function broadcast(x: ArrayLike, sizes: readonly number[]): Array {
  const a = asArray(x, { op: 'broadcast' });
  return broadcastInDim(a, [...sizes, ...a.shape], a.shape.map((_, i) => i + sizes.length));
}

export function reshape(x: ArrayLike, newSizes: readonly number[], dimensions?: readonly number[]): Array {
  let a = asArray(x, { op: 'reshape' });
  if (dimensions) a = transpose(a, dimensions);
  return bind1(st.reshape, [a], { newSizes: [...newSizes] });
}

export function transpose(x: ArrayLike, permutation: readonly number[]): Array {
  const a = asArray(x, { op: 'transpose' });
  const perm = permutation.map((p) => normalizeAxis(p, a.ndim, 'transpose', 'permutation'));
  if (perm.every((p, i) => p === i) && perm.length === a.ndim) return a;
  return bind1(st.transpose, [a], { permutation: perm });
}

export function rev(x: ArrayLike, dimensions: readonly number[]): Array {
  const a = asArray(x, { op: 'rev' });
  return bind1(st.rev, [a], { dimensions: dimensions.map((d) => normalizeAxis(d, a.ndim, 'rev', 'dimensions')) });
}

export function squeeze(x: ArrayLike, dimensions: readonly number[]): Array {
  const a = asArray(x, { op: 'squeeze' });
  return bind1(st.squeeze, [a], { dimensions: dimensions.map((d) => normalizeAxis(d, a.ndim, 'squeeze', 'dimensions')) });
}

export function expandDims(x: ArrayLike, dimensions: readonly number[]): Array {
  const a = asArray(x, { op: 'expand_dims' });
  const rank = a.ndim + dimensions.length;
  const dims = dimensions.map((d) => normalizeAxis(d, rank, 'expand_dims', 'dimensions')).sort((p, q) => p - q);
  const shape = a.shape.slice();
  for (const d of dims) shape.splice(d, 0, 1);
  return reshape(a, shape);
}

export function iota(dtype: DType, size: number): Array {
  return bind1(st.iota, [], { dtype, shape: [size], dimension: 0 });
}

export function broadcastedIota(dtype: DType, shape: readonly number[], dimension: number): Array {
  return bind1(st.iota, [], { dtype, shape: [...shape], dimension });
}

const red = (p: Primitive) => (x: ArrayLike, axes: readonly number[]): Array => {
  const a = asArray(x, { op: p.name });
  return bind1(p, [a], { axes: axes.map((d) => normalizeAxis(d, a.ndim, p.name, 'axes')) });
};
export const reduceSum = red(rd.reduceSum);
export const reduceProd = red(rd.reduceProd);
export const reduceMax = red(rd.reduceMax);
export const reduceMin = red(rd.reduceMin);
export const reduceAnd = red(rd.reduceAnd);
export const reduceOr = red(rd.reduceOr);

export function argmax(x: ArrayLike, axis: number, indexDtype: DType = 'int32'): Array {
  const a = asArray(x, { op: 'argmax' });
  return bind1(rd.argmax, [a], { axis: normalizeAxis(axis, a.ndim, 'argmax'), indexDtype });
}
export function argmin(x: ArrayLike, axis: number, indexDtype: DType = 'int32'): Array {
  const a = asArray(x, { op: 'argmin' });
  return bind1(rd.argmin, [a], { axis: normalizeAxis(axis, a.ndim, 'argmin'), indexDtype });
}

const cum = (p: Primitive) => (x: ArrayLike, axis = 0, reverse = false): Array => {
  const a = asArray(x, { op: p.name });
  return bind1(p, [a], { axis: normalizeAxis(axis, a.ndim, p.name), reverse });
};
export const cumsum = cum(rd.cumsum);
export const cumprod = cum(rd.cumprod);
export const cummax = cum(rd.cummax);
export const cummin = cum(rd.cummin);

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

const ints = (op: string, arg: string, xs: readonly number[]): number[] => {
  if (!globalThis.Array.isArray(xs) || !xs.every((v) => Number.isInteger(v))) {
    throw new TypeError(`${op}: ${arg} must be a list of integers; got ${showValue(xs)}`);
  }
  return [...xs];
};

/** `lax.slice(x, startIndices, limitIndices, strides?)`: a static strided window. */
export function slice(x: ArrayLike, startIndices: readonly number[], limitIndices: readonly number[], strides?: readonly number[] | null): Array {
  const a = asArray(x, { op: 'slice' });
  return bind1(sl.slice, [a], {
    startIndices: ints('slice', 'start_indices', startIndices),
    limitIndices: ints('slice', 'limit_indices', limitIndices),
    strides: strides ? ints('slice', 'strides', strides) : null,
  });
}

/** `lax.slice_in_dim`: slice one axis, keeping the others whole. Negative bounds count from the end. */
export function sliceInDim(x: ArrayLike, startIndex: number | null, limitIndex: number | null, stride = 1, axis = 0): Array {
  const a = asArray(x, { op: 'slice_in_dim' });
  const ax = normalizeAxis(axis, a.ndim, 'slice_in_dim');
  const n = a.shape[ax];
  const s = startIndex === null ? 0 : startIndex < 0 ? startIndex + n : startIndex;
  const l = limitIndex === null ? n : limitIndex < 0 ? limitIndex + n : limitIndex;
  const start = a.shape.map((_, d) => (d === ax ? s : 0));
  const limit = a.shape.map((m, d) => (d === ax ? l : m));
  const str = a.shape.map((_, d) => (d === ax ? stride : 1));
  return slice(a, start, limit, str);
}

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
  return bind1(sl.dynamicSlice, [a, ...startScalars('dynamic_slice', startIndices)], { sliceSizes: ints('dynamic_slice', 'slice_sizes', sliceSizes) });
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
  return bind1(sl.dynamicUpdateSlice, [a, u, ...startScalars('dynamic_update_slice', startIndices)], {});
}

/** `lax.concatenate(operands, dimension)`; operands must share dtype and all other dimensions. */
export function concatenate(xs: readonly ArrayLike[], dimension: number): Array {
  if (xs.length === 0) throw new Error('concatenate: needs at least one operand');
  const arrays = operands('concatenate', [...xs]);
  const dim = normalizeAxis(dimension, arrays[0].ndim, 'concatenate', 'dimension');
  if (arrays.length === 1) return arrays[0];
  return bind1(sl.concatenate, arrays, { dimension: dim });
}

/** `lax.pad(x, paddingValue, [[lo, hi, interior], ...])`; negative lo/hi crop. */
export function pad(x: ArrayLike, paddingValue: ArrayLike, paddingConfig: readonly (readonly [number, number, number])[]): Array {
  const a = asArray(x, { op: 'pad' });
  const v = paddingValue instanceof Array ? paddingValue : asArray(paddingValue, { dtype: a.dtype, op: 'pad' });
  return bind1(sl.pad, [a, v], { paddingConfig: paddingConfig.map((c) => [c[0], c[1], c[2]] as [number, number, number]) });
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
  return bind1(gatherP, [a, i], {
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
export const scatter = scatterOp(sc.scatter);
export const scatterAdd = scatterOp(sc.scatterAdd);
export const scatterMul = scatterOp(sc.scatterMul);
export const scatterMin = scatterOp(sc.scatterMin);
export const scatterMax = scatterOp(sc.scatterMax);

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
