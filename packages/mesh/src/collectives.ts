/**
 * Collectives over named mesh axes (jax.lax.psum & co.), as core primitives with jvp, transpose
 * and batching rules. Inside `shardMap` every mesh axis is a named vmap axis: a value that
 * differs between the devices along axis 'x' is batched along the 'x' vmap, and a value that is
 * the same on all of them is not (JAX's "varying manual axes", checked for the outputs by
 * `checkVma`). A collective's batching rule, run by the trace of its own axis, does the
 * communication as array ops over the batch dimension; the trace of any other axis (or of a
 * user's vmap) maps it through. Every collective also takes the device's index along its axis
 * as a second operand: that index is batched along the axis, so the axis' own trace always runs
 * the rule, also for an operand that does not vary (it is then broadcast first: pvary). The
 * user-facing functions insert an explicit `pvary` for such an operand, as JAX does, so that
 * transposition sees it.
 *
 * Transposes: psum <-> pvary, allGather <-> psumScatter, ppermute <-> ppermute with the inverse
 * permutation, allToAll <-> allToAll with split and concat axes swapped; pmean transposes to
 * pvary / size; pmax and pmin are not linear.
 */
import { type Array, lax, np } from '@tpukit/core';
import { type BatchRule, type BDim, type JvpRule, NON_LINEAR, NOT_DIFFERENTIABLE, type Primitive, type ShapedArray, type TransposeRule, asArray, bind, definePrimitive, moveBdim } from '@tpukit/core/internal';
import { type BoundAxis, boundAxis } from './axisContext';

interface AxisParams {
  readonly axis: string;
  readonly size: number;
}
interface GatherParams extends AxisParams {
  readonly dim: number;
  readonly tiled: boolean;
}
interface PermuteParams extends AxisParams {
  readonly perm: readonly (readonly [number, number])[];
}
interface AllToAllParams extends AxisParams {
  readonly splitAxis: number;
  readonly concatAxis: number;
  readonly tiled: boolean;
}

const fmt = (s: readonly number[]) => `[${s.join(',')}]`;

function outside(name: string) {
  return (_: unknown, p: AxisParams): never => {
    throw new Error(`${name}: axis '${p.axis}' is not bound; collectives run inside shardMap`);
  };
}

/** Batching rule: `own` when the trace is the collective's axis, else mapped through (batch dim first, data-dim params shifted). */
function collectiveBatch<P extends AxisParams>(name: string, own: (vals: Array[], dims: BDim[], p: P) => [Array[], BDim[]], shift: (p: P) => P = (p) => p): BatchRule {
  return (vals, dims, params: P, n, axisName) => {
    if (axisName === params.axis) {
      if (n !== params.size) throw new Error(`${name}: axis '${params.axis}' has size ${n} here but ${params.size} when the collective was traced`);
      return own(vals, dims, params);
    }
    const [x, ...rest] = vals;
    if (dims.slice(1).some((d) => d !== null)) throw new Error(`${name}: the index of axis '${params.axis}' varies along '${axisName ?? 'an unnamed vmap axis'}'`);
    return [[bind(prims[name], [moveBdim(x, dims[0], 0, n), ...rest], shift(params))[0]], [0]];
  };
}

const bumpDim = <P extends GatherParams>(p: P): P => ({ ...p, dim: p.dim + 1 });

function primitive<P extends AxisParams>(name: string, abstractEval: (a: ShapedArray[], p: P) => ShapedArray[]) {
  const p = definePrimitive<P>({ name, abstractEval, impl: outside(name) });
  prims[name] = p;
  return p;
}
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyPrim = Primitive<any>;
const prims: Record<string, AnyPrim> = {};
const bind1 = (p: AnyPrim, xs: Array[], params: unknown): Array => bind(p, xs, params)[0];
/** The operand with its batch dim first (broadcast along the axis when it does not vary). */
const b0 = (x: Array, d: BDim, n: number): Array => moveBdim(x, d, 0, n);

// ---------------------------------------------------------------------------------------------
// pvary: the value is now seen as (possibly) different on every device along the axis.

const pvaryP = primitive<AxisParams>('pvary', ([x]) => [x]);
pvaryP.rules.batch = collectiveBatch<AxisParams>('pvary', ([x], [d], p) => [[moveBdim(x, d, 0, p.size)], [0]]);
pvaryP.rules.jvp = linearJvp(pvaryP);
pvaryP.rules.transpose = (([ct], [, idx], p: AxisParams) => [ct === null ? null : bind1(psumP, [ct, idx as Array], p), null]) satisfies TransposeRule;

/** Marks `x` as varying along `axisName` (JAX's `pvary`); the identity on each device's value. */
export function pvary(x: Array, axisName: string | readonly string[]): Array {
  let y = asArray(x, { op: 'pvary' });
  for (const a of names(axisName, 'pvary')) {
    const ax = boundAxis(a, 'pvary');
    y = bind1(pvaryP, [y, ax.index], { axis: a, size: ax.size });
  }
  return y;
}

function names(axisName: string | readonly string[], op: string): readonly string[] {
  const list = typeof axisName === 'string' ? [axisName] : axisName;
  if (!globalThis.Array.isArray(list) || list.length === 0 || list.some((a) => typeof a !== 'string')) {
    throw new TypeError(`${op}: axisName must be an axis name or a non-empty list of them; got ${JSON.stringify(axisName)}`);
  }
  if (new Set(list).size !== list.length) throw new Error(`${op}: axis names ${JSON.stringify(list)} repeat an axis`);
  return list;
}

// ---------------------------------------------------------------------------------------------
// Whether a value varies along an axis: a probe whose batching rule, run by the axis' own trace
// (always, since the axis index it also takes is batched there), reports the value's batch dim.
// Under a jit trace inside the body the probe is staged instead of run, and the answer is unknown.

interface ProbeParams extends AxisParams {
  readonly report: { varying?: boolean };
}
const probeP = primitive<ProbeParams>('vma_probe', ([x]) => [x]);
probeP.rules.batch = collectiveBatch<ProbeParams>('vma_probe', ([x], [d], p) => {
  p.report.varying = d !== null;
  return [[x], [d]];
});
probeP.rules.jvp = NOT_DIFFERENTIABLE;
probeP.rules.transpose = NON_LINEAR;

function varyingAlong(x: Array, ax: BoundAxis): boolean | undefined {
  const report: { varying?: boolean } = {};
  bind(probeP, [x, ax.index], { axis: ax.name, size: ax.size, report });
  return report.varying;
}

/**
 * The operand, made to vary along `axis` when it does not (JAX inserts the same `pvary`), and the
 * params for a single-axis collective. The pvary is left out for an operand that already varies,
 * so that transposing never turns it into a spurious psum.
 */
function prep(x: Array | number, axis: string, op: string): [Array[], AxisParams] {
  const ax = boundAxis(axis, op);
  let a = asArray(x, { op });
  const params = { axis, size: ax.size };
  if (varyingAlong(a, ax) !== true) a = bind1(pvaryP, [a, ax.index], params);
  return [[a, ax.index], params];
}

// ---------------------------------------------------------------------------------------------
// psum / pmax / pmin: reduce over the axis; the result is the same on every device.

/** A reduction over the axis; `same` is its value for an operand that does not vary (x for max, n*x for sum). */
function reduction(name: string, reduce: (x: Array, d: number) => Array, same: (x: Array, n: number) => Array) {
  const p = primitive<AxisParams>(name, ([x]) => [x]);
  p.rules.batch = collectiveBatch<AxisParams>(name, ([x], [d], pp) => [[d === null ? same(x, pp.size) : reduce(x, d)], [null]]);
  return p;
}
const psumP = reduction('psum', (x, d) => lax.reduceSum(x, [d]), (x, n) => lax.mul(x, lax.convertElementType(n, x.dtype)));
const pmaxP = reduction('pmax', (x, d) => lax.reduceMax(x, [d]), (x) => x);
const pminP = reduction('pmin', (x, d) => lax.reduceMin(x, [d]), (x) => x);

psumP.rules.jvp = linearJvp(psumP);
psumP.rules.transpose = (([ct], [, idx], p: AxisParams) => [ct === null ? null : bind1(pvaryP, [ct, idx as Array], p), null]) satisfies TransposeRule;
for (const prim of [pmaxP, pminP]) {
  // The tangent of the extremum: the mean of the tangents of the devices that attain it.
  prim.rules.jvp = (([x, idx], [t], p: AxisParams) => {
    const y = bind1(prim, [x, idx], p);
    if (t === null) return [[y], [null]];
    const hit = lax.convertElementType(lax.eq(x, y), t.dtype);
    return [[y], [lax.div(bind1(psumP, [lax.mul(t, hit), idx], p), bind1(psumP, [hit, idx], p))]];
  }) satisfies JvpRule;
  prim.rules.transpose = NON_LINEAR;
}

function reduceOver(prim: AnyPrim, op: string) {
  return (x: Array | number, axisName: string | readonly string[]): Array => {
    let y = asArray(x, { op });
    for (const a of names(axisName, op)) {
      const [v, p] = prep(y, a, op);
      y = bind1(prim, v, p);
    }
    return y;
  };
}

/** Sum over the devices along `axisName` (one axis or several). */
export const psum = reduceOver(psumP, 'psum');
/** Maximum over the devices along `axisName`. */
export const pmax = reduceOver(pmaxP, 'pmax');
/** Minimum over the devices along `axisName`. */
export const pmin = reduceOver(pminP, 'pmin');

/** Mean over the devices along `axisName`. */
export function pmean(x: Array | number, axisName: string | readonly string[]): Array {
  const n = names(axisName, 'pmean').reduce((s, a) => s * boundAxis(a, 'pmean').size, 1);
  const s = psum(x, axisName);
  return np.divide(s, n);
}

// ---------------------------------------------------------------------------------------------
// allGather / psumScatter

function checkDim(op: string, x: ShapedArray, dim: number, rankPlus = 0): void {
  if (!Number.isInteger(dim) || dim < 0 || dim >= x.shape.length + rankPlus) {
    throw new RangeError(`${op}: axis ${dim} is out of range for a value of shape ${fmt(x.shape)}`);
  }
}

const allGatherP = primitive<GatherParams>('all_gather', ([x], p) => {
  checkDim('allGather', x, p.dim, p.tiled ? 0 : 1);
  const shape = x.shape.slice();
  if (p.tiled) shape[p.dim] *= p.size;
  else shape.splice(p.dim, 0, p.size);
  return [{ ...x, shape }];
});
allGatherP.rules.batch = collectiveBatch<GatherParams>('all_gather', ([x], [d], p) => {
  let g = np.moveaxis(b0(x, d, p.size), 0, p.dim);
  if (p.tiled) {
    const s = g.shape.slice();
    s.splice(p.dim, 2, s[p.dim] * s[p.dim + 1]);
    g = lax.reshape(g, s);
  }
  // Every device holds the gathered value: it stays batched (varying) so that its transpose is psumScatter.
  return [[moveBdim(g, null, 0, p.size)], [0]];
}, bumpDim);
allGatherP.rules.jvp = linearJvp(allGatherP);
allGatherP.rules.transpose = transposeTo(() => psumScatterP);

const psumScatterP = primitive<GatherParams>('psum_scatter', ([x], p) => {
  checkDim('psumScatter', x, p.dim);
  const shape = x.shape.slice();
  if (p.tiled) {
    if (shape[p.dim] % p.size !== 0) throw new Error(`psumScatter: dimension ${p.dim} of ${fmt(x.shape)} (size ${shape[p.dim]}) is not divisible by the size ${p.size} of axis '${p.axis}'`);
    shape[p.dim] /= p.size;
  } else {
    if (shape[p.dim] !== p.size) throw new Error(`psumScatter: untiled, dimension ${p.dim} of ${fmt(x.shape)} must equal the size ${p.size} of axis '${p.axis}'; got ${shape[p.dim]}`);
    shape.splice(p.dim, 1);
  }
  return [{ ...x, shape }];
});
psumScatterP.rules.batch = collectiveBatch<GatherParams>('psum_scatter', ([x], [d], p) => {
  let s = d === null ? lax.mul(x, lax.convertElementType(p.size, x.dtype)) : lax.reduceSum(x, [d]);
  if (p.tiled) {
    const shape = s.shape.slice();
    shape.splice(p.dim, 1, p.size, shape[p.dim] / p.size);
    s = lax.reshape(s, shape);
  }
  // Device i keeps block i: the block index becomes the batch dimension.
  return [[np.moveaxis(s, p.dim, 0)], [0]];
}, bumpDim);
psumScatterP.rules.jvp = linearJvp(psumScatterP);
psumScatterP.rules.transpose = transposeTo(() => allGatherP);

/** The jvp of a collective linear in its operand: the same collective on the tangent. */
function linearJvp(prim: AnyPrim): JvpRule {
  return ([x, idx], [t], p) => [[bind1(prim, [x, idx], p)], [t === null ? null : bind1(prim, [t, idx], p)]];
}

/** The transpose of a linear collective: collective `to()` with `params(p)` on the cotangent. */
function transposeTo<P>(to: () => AnyPrim, params: (p: P) => P = (p) => p): TransposeRule {
  return ([ct], [, idx], p: P) => [ct === null ? null : bind1(to(), [ct, idx as Array], params(p)), null];
}

/** Concatenation (`tiled`) or stack (default) of every device's `x` along `axis` (default 0), in device order along `axisName`. */
export function allGather(x: Array | number, axisName: string | readonly string[], opts: { axis?: number; tiled?: boolean } = {}): Array {
  const dim = opts.axis ?? 0;
  const tiled = opts.tiled ?? false;
  const list = names(axisName, 'allGather');
  // Several axes: gather the minor axis first, then merge, so the block order is row-major over the axes.
  let y = asArray(x, { op: 'allGather' });
  for (let k = list.length - 1; k >= 0; k--) {
    const [v, p] = prep(y, list[k], 'allGather');
    const firstUntiled = !tiled && k === list.length - 1;
    y = bind1(allGatherP, v, { ...p, dim, tiled: !firstUntiled });
  }
  return y;
}

/** Sums `x` over the devices along `axisName` and leaves device i with block i of dimension `scatterDimension`. */
export function psumScatter(x: Array | number, axisName: string | readonly string[], opts: { scatterDimension?: number; tiled?: boolean } = {}): Array {
  const dim = opts.scatterDimension ?? 0;
  const tiled = opts.tiled ?? false;
  const list = names(axisName, 'psumScatter');
  let y = asArray(x, { op: 'psumScatter' });
  if (!tiled && list.length > 1) {
    // Untiled over several axes: the dimension must hold one entry per device; split it row-major.
    const sizes = list.map((a) => boundAxis(a, 'psumScatter').size);
    const shape = y.shape.slice();
    shape.splice(dim, 1, ...sizes);
    y = lax.reshape(y, shape);
    for (const a of list) {
      const [v, p] = prep(y, a, 'psumScatter');
      y = bind1(psumScatterP, v, { ...p, dim, tiled: false });
    }
    return y;
  }
  for (const a of list) {
    const [v, p] = prep(y, a, 'psumScatter');
    y = bind1(psumScatterP, v, { ...p, dim, tiled });
  }
  return y;
}

// ---------------------------------------------------------------------------------------------
// ppermute

const ppermuteP = primitive<PermuteParams>('ppermute', ([x]) => [x]);
ppermuteP.rules.batch = collectiveBatch<PermuteParams>('ppermute', ([x], [d], p) => {
  const xb = moveBdim(x, d, 0, p.size);
  const src = new Int32Array(p.size).fill(-1);
  for (const [s, t] of p.perm) src[t] = s;
  const taken = np.take(xb, np.array(globalThis.Array.from(src, (s) => Math.max(s, 0)), 'int32'), { axis: 0 });
  if (src.every((s) => s >= 0)) return [[taken], [0]];
  // Devices that receive nothing get zeros.
  const mask = np.array(globalThis.Array.from(src, (s) => s >= 0)).reshape([p.size, ...xb.shape.slice(1).map(() => 1)]);
  return [[np.where(mask, taken, np.zerosLike(taken))], [0]];
});
ppermuteP.rules.jvp = linearJvp(ppermuteP);
ppermuteP.rules.transpose = transposeTo<PermuteParams>(() => ppermuteP, (p) => ({ ...p, perm: p.perm.map(([s, t]) => [t, s] as const) }));

/** Sends device s's `x` to device t for each pair [s, t] of `perm` (indices along `axisName`); devices that receive nothing get zeros. */
export function ppermute(x: Array | number, axisName: string, perm: readonly (readonly [number, number])[]): Array {
  const ax = boundAxis(axisName, 'ppermute');
  const srcs = new Set<number>();
  const dsts = new Set<number>();
  for (const pair of perm) {
    const ok = globalThis.Array.isArray(pair) && pair.length === 2 && pair.every((v) => Number.isInteger(v) && v >= 0 && v < ax.size);
    if (!ok) throw new RangeError(`ppermute: each pair must be [source, destination] with indices in [0, ${ax.size}) of axis '${axisName}'; got ${JSON.stringify(pair)}`);
    if (srcs.has(pair[0]) || dsts.has(pair[1])) throw new Error(`ppermute: perm ${JSON.stringify(perm)} is not a permutation: device ${srcs.has(pair[0]) ? `${pair[0]} sends` : `${pair[1]} receives`} twice`);
    srcs.add(pair[0]);
    dsts.add(pair[1]);
  }
  const [v, p] = prep(x, axisName, 'ppermute');
  return bind1(ppermuteP, v, { ...p, perm: perm.map(([s, t]) => [s, t] as const) });
}

// ---------------------------------------------------------------------------------------------
// allToAll

const allToAllP = primitive<AllToAllParams>('all_to_all', ([x], p) => {
  checkDim('allToAll', x, p.splitAxis);
  const shape = x.shape.slice();
  if (p.tiled) {
    checkDim('allToAll', x, p.concatAxis);
    if (shape[p.splitAxis] % p.size !== 0) throw new Error(`allToAll: split axis ${p.splitAxis} of ${fmt(x.shape)} (size ${shape[p.splitAxis]}) is not divisible by the size ${p.size} of axis '${p.axis}'`);
    shape[p.splitAxis] /= p.size;
    shape[p.concatAxis] *= p.size;
  } else {
    if (shape[p.splitAxis] !== p.size) throw new Error(`allToAll: untiled, split axis ${p.splitAxis} of ${fmt(x.shape)} must equal the size ${p.size} of axis '${p.axis}'; got ${shape[p.splitAxis]}`);
    shape.splice(p.splitAxis, 1);
    if (!Number.isInteger(p.concatAxis) || p.concatAxis < 0 || p.concatAxis > shape.length) throw new RangeError(`allToAll: concat axis ${p.concatAxis} is out of range for a result of rank ${shape.length + 1}`);
    shape.splice(p.concatAxis, 0, p.size);
  }
  return [{ ...x, shape }];
});
allToAllP.rules.batch = collectiveBatch<AllToAllParams>('all_to_all', ([x], [d], p) => {
  // Label the dims: 'i' the sending device (batch), 'j' the receiving one (chunks of the split axis).
  let xb = moveBdim(x, d, 0, p.size);
  const r = xb.ndim - 1;
  const labels: (number | 'i' | 'j')[] = ['i'];
  if (p.tiled) {
    const shape = xb.shape.slice();
    shape.splice(p.splitAxis + 1, 1, p.size, shape[p.splitAxis + 1] / p.size);
    xb = lax.reshape(xb, shape);
    for (let k = 0; k < r; k++) labels.push(...(k === p.splitAxis ? (['j', k] as const) : [k]));
    // Output (after the batch dim 'j'): the data dims with 'i' just before the concat dim, then merged with it.
    const order: (number | 'i' | 'j')[] = ['j'];
    for (let k = 0; k < r; k++) order.push(...(k === p.concatAxis ? (['i', k] as const) : [k]));
    const y = lax.transpose(xb, order.map((l) => labels.indexOf(l)));
    const out = y.shape.slice();
    out.splice(p.concatAxis + 1, 2, out[p.concatAxis + 1] * out[p.concatAxis + 2]);
    return [[lax.reshape(y, out)], [0]];
  }
  for (let k = 0; k < r; k++) labels.push(k === p.splitAxis ? 'j' : k);
  const rest: (number | 'i' | 'j')[] = labels.filter((l) => typeof l === 'number');
  rest.splice(p.concatAxis, 0, 'i');
  const order: (number | 'i' | 'j')[] = ['j', ...rest];
  return [[lax.transpose(xb, order.map((l) => labels.indexOf(l)))], [0]];
}, (p) => ({ ...p, splitAxis: p.splitAxis + 1, concatAxis: p.concatAxis + 1 }));
allToAllP.rules.jvp = linearJvp(allToAllP);
allToAllP.rules.transpose = transposeTo<AllToAllParams>(() => allToAllP, (p) => ({ ...p, splitAxis: p.concatAxis, concatAxis: p.splitAxis }));

/**
 * Splits `x` along `splitAxis` into one chunk per device along `axisName`, sends chunk j to
 * device j, and concatenates what each device receives along `concatAxis` (in sender order).
 * Untiled (the default), the split axis must equal the axis size and is replaced by a new axis at
 * `concatAxis` (of the result).
 */
export function allToAll(x: Array | number, axisName: string, splitAxis: number, concatAxis: number, opts: { tiled?: boolean } = {}): Array {
  const [v, p] = prep(x, axisName, 'allToAll');
  return bind1(allToAllP, v, { ...p, splitAxis, concatAxis, tiled: opts.tiled ?? false });
}

// ---------------------------------------------------------------------------------------------

/** This device's index along `axisName` (an int32 scalar). */
export function axisIndex(axisName: string): Array {
  return boundAxis(axisName, 'axisIndex').index;
}

/** The number of devices along `axisName` (several axes: the product). */
export function axisSize(axisName: string | readonly string[]): number {
  return names(axisName, 'axisSize').reduce((s, a) => s * boundAxis(a, 'axisSize').size, 1);
}
