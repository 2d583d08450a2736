/**
 * Reductions other than reduce_sum (which is in structural.ts): reduce_max / min / prod / and /
 * or over a set of axes, argmax / argmin along one axis, and cumulative sum / max / min / prod
 * along one axis, each with its rules and its lax op. The shape rules and kernels are the
 * factories of reduceKernels.ts.
 */
import type { Array } from '../array';
import { type ArrayLike, asArray } from '../convert';
import { type DType, isInteger } from '../dtype';
import { type BatchRule, NON_LINEAR, NOT_DIFFERENTIABLE, type Primitive } from '../primitive';
import { normalizeAxis } from '../shape';
import { bind1 } from '../trace';
import { bitwiseAnd, convertElementType, div, eq, ge, le, mul, select } from './elementwise';
import { argReduction, cumulative, maxInit, minInit, nanMax, nanMin, reduction } from './reduceKernels';
import { jvpFrom, lin1, linearJvp, p1, shift } from './ruleKit';
import { broadcastInDim, broadcastedIota, front, fullLike, reduceSum, reductionOp, reshape, transpose } from './structural';

/** Batching of a reduction over `axes`: the batch dim goes first, the axes shift past it. */
const axesBatch = (self: Primitive): BatchRule => front((x, p) => p1(self, [x], { ...p, axes: shift(p.axes) }));
/** Batching of an op along one `axis`. */
const axisBatch = (self: Primitive): BatchRule => front((x, p) => p1(self, [x], { ...p, axis: p.axis + 1 }));

export const reduceProdP = reduction('reduce_prod', () => 1, (a, v, d) => (isInteger(d) ? (d === 'uint32' ? Math.imul(a, v) >>> 0 : Math.imul(a, v)) : a * v), 'num', (self) => ({
  jvp: jvpFrom(self, ([x], [t], _y, { axes }) => prodTangent(x, t!, axes)),
  transpose: NON_LINEAR,
  batch: axesBatch(self),
}));
const extremum = (self: Primitive) => ({
  jvp: jvpFrom(self, ([x], [t], y, { axes }) => extremumTangent(x, t!, y, axes)),
  transpose: NON_LINEAR,
  batch: axesBatch(self),
});
export const reduceMaxP = reduction('reduce_max', maxInit, nanMax, 'num', extremum);
export const reduceMinP = reduction('reduce_min', minInit, nanMin, 'num', extremum);
const logical = (self: Primitive) => ({ jvp: NOT_DIFFERENTIABLE, transpose: NON_LINEAR, batch: axesBatch(self) });
export const reduceAndP = reduction('reduce_and', (d) => (d === 'bool' ? 1 : -1), (a, v) => a & v, 'bool', logical);
export const reduceOrP = reduction('reduce_or', () => 0, (a, v) => a | v, 'bool', logical);

const argRules = (self: Primitive) => ({ jvp: NOT_DIFFERENTIABLE, transpose: NON_LINEAR, batch: axisBatch(self) });
export const argmaxP = argReduction('argmax', (v, b) => v > b, argRules);
export const argminP = argReduction('argmin', (v, b) => v < b, argRules);

export const cumsumP = cumulative('cumsum', (a, v, d) => (isInteger(d) ? (d === 'uint32' ? (a + v) >>> 0 : (a + v) | 0) : a + v), (self) => ({
  jvp: linearJvp(self),
  transpose: lin1((ct, _x, { axis, reverse }) => cumsum(ct, axis, !reverse)),
  batch: axisBatch(self),
}));
export const cumprodP = cumulative('cumprod', (a, v, d) => (isInteger(d) ? Math.imul(a, v) : a * v), (self) => ({
  jvp: jvpFrom(self, ([x], [t], _y, { axis, reverse }) => cumprodTangent(x, t!, axis, reverse)),
  transpose: NON_LINEAR,
  batch: axisBatch(self),
}));
const cumExtremum = (self: Primitive) => ({
  jvp: jvpFrom(self, ([x], [t], y, { axis, reverse }) => cumExtremumTangent(x, t!, y, axis, reverse)),
  transpose: NON_LINEAR,
  batch: axisBatch(self),
});
export const cummaxP = cumulative('cummax', nanMax, cumExtremum);
export const cumminP = cumulative('cummin', nanMin, cumExtremum);

// ---------------------------------------------------------------------------------------------
// Tangents

/** Tangent of reduce_max/min: the tangents at the extremal positions, averaged over ties. */
function extremumTangent(x: Array, t: Array, y: Array, axes: readonly number[]): Array {
  const keep = x.shape.map((_, i) => i).filter((i) => !axes.includes(i));
  const yb = broadcastInDim(y, x.shape, keep);
  const mask = convertElementType(eq(x, yb), x.dtype);
  const count = reduceSum(mask, axes);
  return div(reduceSum(mul(t, mask), axes), count);
}

/**
 * Tangent of reduce_prod that is right when some factors are zero: sum_i t_i * prod_{j != i} x_j,
 * with the products of the others formed by reducing an [n, n] table with ones on the diagonal.
 */
function prodTangent(x: Array, t: Array, axes: readonly number[]): Array {
  const keep = x.shape.map((_, i) => i).filter((i) => !axes.includes(i));
  const perm = [...keep, ...axes];
  const outShape = keep.map((i) => x.shape[i]);
  const n = axes.reduce((acc, a) => acc * x.shape[a], 1);
  const xs = reshape(transpose(x, perm), [...outShape, n]);
  const ts = reshape(transpose(t, perm), [...outShape, n]);
  const r = outShape.length;
  const table = broadcastInDim(xs, [...outShape, n, n], [...outShape.map((_, i) => i), r + 1]);
  const diag = eq(broadcastedIota('int32', [n, n], 0), broadcastedIota('int32', [n, n], 1));
  const diagB = broadcastInDim(diag, [...outShape, n, n], [r, r + 1]);
  const others = reduceProd(select(diagB, fullLike(1, table), table), [r + 1]);
  return reduceSum(mul(ts, others), [r]);
}

/**
 * The cumulative ops' tangents through an [n, n] table over the scanned axis (moved last):
 * entry (j, i) relates input position j to output position i, masked to j <= i (j >= i when
 * reversed). O(n^2) in the axis length; right at zeros and ties, unlike division tricks.
 */
function toLast(x: Array, axis: number): Array {
  const perm = x.shape.map((_, i) => i).filter((i) => i !== axis);
  return transpose(x, [...perm, axis]);
}
function fromLast(x: Array, axis: number): Array {
  const r = x.ndim;
  const perm: number[] = [];
  for (let i = 0, k = 0; i < r; i++) perm.push(i === axis ? r - 1 : k++);
  return transpose(x, perm);
}
function prefixMask(lead: readonly number[], n: number, reverse: boolean): Array {
  const j = broadcastedIota('int32', [n, n], 0);
  const i = broadcastedIota('int32', [n, n], 1);
  const m = reverse ? ge(j, i) : le(j, i);
  return broadcastInDim(m, [...lead, n, n], [lead.length, lead.length + 1]);
}
/** cummax/cummin: the tangent at the running extremum's position (averaged over ties). */
function cumExtremumTangent(x: Array, t: Array, y: Array, axis: number, reverse: boolean): Array {
  const xl = toLast(x, axis);
  const tl = toLast(t, axis);
  const yl = toLast(y, axis);
  const lead = xl.shape.slice(0, -1);
  const n = xl.shape[xl.ndim - 1];
  const r = lead.length;
  const leadDims = lead.map((_, i) => i);
  const xj = broadcastInDim(xl, [...lead, n, n], [...leadDims, r]);
  const yi = broadcastInDim(yl, [...lead, n, n], [...leadDims, r + 1]);
  const hit = convertElementType(bitwiseAnd(prefixMask(lead, n, reverse), eq(xj, yi)), x.dtype);
  const tj = broadcastInDim(tl, [...lead, n, n], [...leadDims, r]);
  const out = div(reduceSum(mul(hit, tj), [r]), reduceSum(hit, [r]));
  return fromLast(out, axis);
}
/** cumprod: tangent_i = sum over j in the prefix of t_j * prod over the prefix without j. */
function cumprodTangent(x: Array, t: Array, axis: number, reverse: boolean): Array {
  const xl = toLast(x, axis);
  const tl = toLast(t, axis);
  const lead = xl.shape.slice(0, -1);
  const n = xl.shape[xl.ndim - 1];
  const r = lead.length;
  const leadDims = lead.map((_, i) => i);
  // table[j, k] = x_k with x_j replaced by 1; its cumprod along k at i is prod_{k<=i, k!=j} x_k.
  const xk = broadcastInDim(xl, [...lead, n, n], [...leadDims, r + 1]);
  const diag = broadcastInDim(eq(broadcastedIota('int32', [n, n], 0), broadcastedIota('int32', [n, n], 1)), [...lead, n, n], [r, r + 1]);
  const others = cumprod(select(diag, fullLike(1, xk), xk), r + 1, reverse);
  const tj = broadcastInDim(tl, [...lead, n, n], [...leadDims, r]);
  const masked = select(prefixMask(lead, n, reverse), mul(tj, others), fullLike(0, others));
  return fromLast(reduceSum(masked, [r]), axis);
}

// ---------------------------------------------------------------------------------------------
// The lax ops (re-exported by ops.ts)

export const reduceProd = reductionOp(reduceProdP);
export const reduceMax = reductionOp(reduceMaxP);
export const reduceMin = reductionOp(reduceMinP);
export const reduceAnd = reductionOp(reduceAndP);
export const reduceOr = reductionOp(reduceOrP);

const argOp = (p: Primitive) => (x: ArrayLike, axis: number, indexDtype: DType = 'int32'): Array => {
  const a = asArray(x, { op: p.name });
  return bind1(p, [a], { axis: normalizeAxis(axis, a.ndim, p.name), indexDtype });
};
export const argmax = argOp(argmaxP);
export const argmin = argOp(argminP);

const cum = (p: Primitive) => (x: ArrayLike, axis = 0, reverse = false): Array => {
  const a = asArray(x, { op: p.name });
  return bind1(p, [a], { axis: normalizeAxis(axis, a.ndim, p.name), reverse });
};
export const cumsum = cum(cumsumP);
export const cumprod = cum(cumprodP);
export const cummax = cum(cummaxP);
export const cummin = cum(cumminP);
