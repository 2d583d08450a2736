/**
 * The `lax` operations (re-exports only): thin typed wrappers that bind primitives, each defined
 * beside its primitive in this folder (the public `lax` namespace, index.ts, adds the
 * control-flow primitives of transforms/). Unlike `np`, lax does not broadcast or promote:
 * operands must agree (a JS scalar is converted to the other operand's dtype, as a Python
 * scalar is in jax.lax).
 */
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
export { dotGeneral, dot } from './dot';
export {
  slice, sliceInDim, concatenate, pad, dynamicSlice, dynamicSliceInDim, indexInDim, dynamicIndexInDim, dynamicUpdateSlice,
  dynamicUpdateSliceInDim, dynamicUpdateIndexInDim,
} from './slicing';
export { gather, type GatherOptions, scatter, scatterAdd, scatterMul, scatterMin, scatterMax, type ScatterOptions } from './gatherScatter';
export { sort, sortKeyVal, topK, type SortOptions } from './sort';
