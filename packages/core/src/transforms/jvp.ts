/**
 * Forward-mode differentiation (jax.jvp). A `JVPTracer` carries a primal value and its tangent
 * (`null` for a symbolic zero); the `JVPTrace` applies each primitive's jvp rule, which
 * computes the primal output with the same primitive and the tangent with ops that are linear
 * in the input tangents (that linearity is what partial evaluation and transposition rely on
 * to get reverse mode). The jvp rules of the first-order primitives live in the table below;
 * higher-order primitives (jit, control flow, custom rules) attach their own next to their
 * definition. `NOT_DIFFERENTIABLE` marks primitives whose outputs have zero derivative
 * (comparisons, rounding, integer ops, random bits).
 */
// The primitive modules whose rules this file attaches (imported so they are registered first).
import '../lax/elementwise';
import '../lax/structural';
import '../lax/reduce';
import '../lax/dot';
import '../lax/slicing';
import '../lax/gather';
import '../lax/scatter';
import '../lax/sort';
import '../random/threefry';
import type { Array } from '../array';
import * as lax from '../lax/ops';
import type { Primitive } from '../primitive';
import { getPrimitive } from '../primitive';
import { bind } from '../trace';
import { type MainTrace, Trace, Tracer, withMain } from './core';
import { evalJaxpr } from './eval';
import type { ClosedJaxpr } from './jaxpr';
import { traceFlat } from './tracing';
import { addAny, fullLike, instantiate, isDifferentiable } from './zeros';

/** A jvp rule: primal outputs and tangent outputs (null = zero) from primals and tangents. */
export type JvpRule = (primals: Array[], tangents: (Array | null)[], params: any) => [Array[], (Array | null)[]];

/** Marker rule: every output has a zero tangent. */
export const NOT_DIFFERENTIABLE = Object.freeze({ notDifferentiable: true as const });

export class JVPTracer extends Tracer {
  constructor(
    trace: JVPTrace,
    readonly primal: Array,
    readonly tangent: Array | null,
  ) {
    super(trace, primal.aval);
  }
}

export class JVPTrace extends Trace {
  constructor(main: MainTrace) {
    super(main);
  }

  pure(x: Array): Tracer {
    return new JVPTracer(this, x, null);
  }

  protected process(prim: Primitive, tracers: Tracer[], params: any): Array[] {
    const ts = tracers as JVPTracer[];
    const primals = ts.map((t) => t.primal);
    const tangents = ts.map((t) => t.tangent);
    // All tangents zero: the outputs are plain (lower-level) values.
    if (tangents.every((t) => t === null)) return bind(prim, primals, params);
    const rule = prim.rules.jvp as JvpRule | typeof NOT_DIFFERENTIABLE | undefined;
    if (rule === undefined) {
      throw new Error(`jvp: primitive ${prim.name} has no jvp rule, so it cannot be differentiated (wrap the computation in stopGradient if its derivative is not needed)`);
    }
    if (typeof rule !== 'function') return bind(prim, primals, params);
    const [pOut, tOut] = rule(primals, tangents, params);
    return pOut.map((p, i) => {
      const t = tOut[i];
      return t !== null && isDifferentiable(p.aval) ? new JVPTracer(this, p, t) : p;
    });
  }
}

/** jvp of a flat function; tangents may be null (zero). */
export function jvpFlat(f: (...xs: Array[]) => Array[], primals: readonly Array[], tangents: readonly (Array | null)[]): [Array[], (Array | null)[]] {
  return withMain(
    'jvp',
    (m) => new JVPTrace(m),
    (trace) => {
      const ins = primals.map((p, i) => {
        const t = tangents[i];
        return t !== null && isDifferentiable(p.aval) ? new JVPTracer(trace, p, t) : p;
      });
      const outs = f(...ins);
      const po: Array[] = [];
      const to: (Array | null)[] = [];
      for (const o of outs) {
        const r = trace.fullRaise(o) as JVPTracer;
        po.push(r.primal);
        to.push(r.tangent);
      }
      return [po, to];
    },
  );
}

const jvpJaxprCache = new WeakMap<ClosedJaxpr, Map<string, { jaxpr: ClosedJaxpr; outNonzero: boolean[] }>>();

/**
 * The jvp of a closed jaxpr as a new closed jaxpr: inputs are the primals then the tangents of
 * the inputs marked in `nonzero`; outputs are the primals then tangents of outputs marked in
 * the returned `outNonzero` (or of all float outputs when `instantiate` is true). Cached.
 */
export function jvpJaxpr(closed: ClosedJaxpr, nonzero: readonly boolean[], instantiateOut: boolean | readonly boolean[]): { jaxpr: ClosedJaxpr; outNonzero: boolean[] } {
  const key = nonzero.map((b) => (b ? 1 : 0)).join('') + '|' + (typeof instantiateOut === 'boolean' ? String(instantiateOut) : instantiateOut.map((b) => (b ? 1 : 0)).join(''));
  let m = jvpJaxprCache.get(closed);
  if (!m) jvpJaxprCache.set(closed, (m = new Map()));
  const hit = m.get(key);
  if (hit) return hit;
  const inAvals = closed.inAvals;
  const tanAvals = inAvals.filter((_, i) => nonzero[i]);
  const outAvals = closed.outAvals;
  const inst = (i: number): boolean => isDifferentiable(outAvals[i]) && (typeof instantiateOut === 'boolean' ? instantiateOut : instantiateOut[i]);
  let outNonzero: boolean[] = [];
  const jaxpr = traceFlat((...args) => {
    const primals = args.slice(0, inAvals.length);
    let k = inAvals.length;
    const tangents = inAvals.map((_, i) => (nonzero[i] ? args[k++] : null));
    const [po, to] = jvpFlat((...xs) => evalJaxpr(closed.jaxpr, closed.consts, xs), primals, tangents);
    outNonzero = to.map((t, i) => t !== null || inst(i));
    const tOut = to.map((t, i) => (outNonzero[i] ? instantiate(t, outAvals[i]) : null)).filter((t): t is Array => t !== null);
    return [...po, ...tOut];
  }, [...inAvals, ...tanAvals], 'jvp');
  const res = { jaxpr, outNonzero };
  m.set(key, res);
  return res;
}

// ---------------------------------------------------------------------------------------------
// Rules for first-order primitives

const p1 = (prim: Primitive, xs: Array[], params: any): Array => bind(prim, xs, params)[0];

/** Builds a rule for a one-output primitive from a tangent formula. */
function rule(f: (x: Array[], t: (Array | null)[], y: Array, params: any) => Array | null): (prim: Primitive) => JvpRule {
  return (prim) => (xs, ts, params) => {
    const y = p1(prim, xs, params);
    return [[y], [f(xs, ts, y, params)]];
  };
}

const unary = (d: (x: Array, y: Array) => Array) => rule(([x], [t], y) => lax.mul(t!, d(x, y)));

const sq = (x: Array) => lax.mul(x, x);
const TWO_OVER_SQRT_PI = 2 / Math.sqrt(Math.PI);

const table: Record<string, ((prim: Primitive) => JvpRule) | typeof NOT_DIFFERENTIABLE> = {
  neg: rule(([_x], [t]) => lax.neg(t!)),
  abs: unary((x) => lax.sign(x)),
  exp: unary((_x, y) => y),
  exp2: unary((_x, y) => lax.mul(y, Math.LN2)),
  log: rule(([x], [t]) => lax.div(t!, x)),
  log1p: rule(([x], [t]) => lax.div(t!, lax.add(x, 1))),
  expm1: unary((_x, y) => lax.add(y, 1)),
  tanh: unary((_x, y) => lax.sub(1, sq(y))),
  logistic: unary((_x, y) => lax.mul(y, lax.sub(1, y))),
  sin: unary((x) => lax.cos(x)),
  cos: unary((x) => lax.neg(lax.sin(x))),
  tan: unary((_x, y) => lax.add(1, sq(y))),
  asin: unary((x) => lax.rsqrt(lax.sub(1, sq(x)))),
  acos: unary((x) => lax.neg(lax.rsqrt(lax.sub(1, sq(x))))),
  atan: rule(([x], [t]) => lax.div(t!, lax.add(1, sq(x)))),
  sinh: unary((x) => lax.cosh(x)),
  cosh: unary((x) => lax.sinh(x)),
  asinh: unary((x) => lax.rsqrt(lax.add(sq(x), 1))),
  acosh: unary((x) => lax.rsqrt(lax.mul(lax.sub(x, 1), lax.add(x, 1)))),
  atanh: rule(([x], [t]) => lax.div(t!, lax.sub(1, sq(x)))),
  sqrt: rule(([_x], [t], y) => lax.div(t!, lax.mul(y, 2))),
  rsqrt: unary((x, y) => lax.mul(lax.div(y, x), -0.5)),
  cbrt: unary((x, y) => lax.div(y, lax.mul(x, 3))),
  erf: unary((x) => lax.mul(lax.exp(lax.neg(sq(x))), TWO_OVER_SQRT_PI)),
  erfc: unary((x) => lax.mul(lax.exp(lax.neg(sq(x))), -TWO_OVER_SQRT_PI)),
  erf_inv: unary((_x, y) => lax.mul(lax.exp(sq(y)), 1 / TWO_OVER_SQRT_PI)),
  lgamma: unary((x) => lax.digamma(x)),
  square: unary((x) => lax.mul(x, 2)),
  integer_pow: rule(([x], [t], _y, { y: n }) => (n === 0 ? null : lax.mul(t!, n === 1 ? lax.convertElementType(1, x.dtype) : lax.mul(lax.integerPow(x, n - 1), n)))),

  sign: NOT_DIFFERENTIABLE,
  floor: NOT_DIFFERENTIABLE,
  ceil: NOT_DIFFERENTIABLE,
  round: NOT_DIFFERENTIABLE,
  round_nearest_even: NOT_DIFFERENTIABLE,
  is_finite: NOT_DIFFERENTIABLE,
  not: NOT_DIFFERENTIABLE,
  nextafter: NOT_DIFFERENTIABLE,
  and: NOT_DIFFERENTIABLE,
  or: NOT_DIFFERENTIABLE,
  xor: NOT_DIFFERENTIABLE,
  shift_left: NOT_DIFFERENTIABLE,
  shift_right_arithmetic: NOT_DIFFERENTIABLE,
  shift_right_logical: NOT_DIFFERENTIABLE,
  eq: NOT_DIFFERENTIABLE,
  ne: NOT_DIFFERENTIABLE,
  lt: NOT_DIFFERENTIABLE,
  le: NOT_DIFFERENTIABLE,
  gt: NOT_DIFFERENTIABLE,
  ge: NOT_DIFFERENTIABLE,
  bitcast_convert_type: NOT_DIFFERENTIABLE,
  iota: NOT_DIFFERENTIABLE,
  argmax: NOT_DIFFERENTIABLE,
  argmin: NOT_DIFFERENTIABLE,
  reduce_and: NOT_DIFFERENTIABLE,
  reduce_or: NOT_DIFFERENTIABLE,

  add: rule((_x, [ta, tb]) => addAny(ta, tb)),
  sub: rule((_x, [ta, tb]) => addAny(ta, tb === null ? null : lax.neg(tb))),
  mul: rule(([a, b], [ta, tb]) => addAny(ta && lax.mul(ta, b), tb && lax.mul(a, tb))),
  div: rule(([_a, b], [ta, tb], y) => {
    const num = addAny(ta, tb && lax.neg(lax.mul(tb, y)));
    return num && lax.div(num, b);
  }),
  rem: rule(([a, b], [ta, tb]) => {
    if (tb === null) return ta;
    const q = lax.div(a, b);
    const trunc = lax.select(lax.lt(q, 0), lax.ceil(q), lax.floor(q));
    return addAny(ta, lax.neg(lax.mul(tb, trunc)));
  }),
  pow: rule(([a, b], [ta, tb], y) => {
    // d/da = b * a^(b-1) (0 where b == 0); d/db = log(a) * y (0 where a == 0).
    const da = ta && lax.mul(ta, lax.select(lax.eq(b, 0), fullLike(0, b), lax.mul(b, lax.pow(a, lax.sub(b, 1)))));
    const safeLog = lax.select(lax.eq(a, 0), fullLike(0, a), lax.log(lax.select(lax.eq(a, 0), fullLike(1, a), a)));
    const db = tb && lax.mul(tb, lax.mul(safeLog, y));
    return addAny(da, db);
  }),
  max: rule(([a, b], [ta, tb]) => minMaxTangent(lax.gt(a, b), lax.eq(a, b), a, ta, tb)),
  min: rule(([a, b], [ta, tb]) => minMaxTangent(lax.lt(a, b), lax.eq(a, b), a, ta, tb)),
  atan2: rule(([a, b], [ta, tb]) => {
    const den = lax.add(sq(a), sq(b));
    return addAny(ta && lax.div(lax.mul(ta, b), den), tb && lax.neg(lax.div(lax.mul(tb, a), den)));
  }),
  select_n: rule(([which, ...cases], [_tw, ...tcs]) => lax.selectN(which, ...tcs.map((t, i) => instantiate(t, cases[i].aval)))),
  convert_element_type: rule(([x], [t], y, params) => (isDifferentiable(x.aval) && isDifferentiable(y.aval) ? p1(getPrimitive('convert_element_type'), [t!], params) : null)),

  broadcast_in_dim: (prim) => linearRule(prim),
  reshape: (prim) => linearRule(prim),
  transpose: (prim) => linearRule(prim),
  rev: (prim) => linearRule(prim),
  squeeze: (prim) => linearRule(prim),
  reduce_sum: (prim) => linearRule(prim),
  cumsum: (prim) => linearRule(prim),
  reduce_max: rule(([x], [t], y, { axes }) => extremumTangent(x, t!, y, axes)),
  reduce_min: rule(([x], [t], y, { axes }) => extremumTangent(x, t!, y, axes)),
  reduce_prod: rule(([x], [t], _y, { axes }) => prodTangent(x, t!, axes)),
  dot_general: (prim) => (xs, ts, params) => {
    const [a, b] = xs;
    const [ta, tb] = ts;
    const y = p1(prim, [a, b], params);
    return [[y], [addAny(ta && p1(prim, [ta, b], params), tb && p1(prim, [a, tb], params))]];
  },
};


/** A primitive linear in its one operand. */
function linearRule(prim: Primitive): JvpRule {
  return ([x], [t], params) => [[p1(prim, [x], params)], [t === null ? null : p1(prim, [t], params)]];
}

/** Tangent of max/min: the winning side's tangent, the average on ties (as JAX). */
function minMaxTangent(aWins: Array, tie: Array, a: Array, ta: Array | null, tb: Array | null): Array | null {
  const one = fullLike(1, a);
  const zero = fullLike(0, a);
  const half = lax.mul(one, 0.5);
  const wa = lax.select(tie, half, lax.select(aWins, one, zero));
  const wb = lax.sub(one, wa);
  return addAny(ta && lax.mul(ta, wa), tb && lax.mul(tb, wb));
}

/** Tangent of reduce_max/min: the tangents at the extremal positions, averaged over ties. */
function extremumTangent(x: Array, t: Array, y: Array, axes: readonly number[]): Array {
  const keep = x.shape.map((_, i) => i).filter((i) => !axes.includes(i));
  const yb = lax.broadcastInDim(y, x.shape, keep);
  const mask = lax.convertElementType(lax.eq(x, yb), x.dtype);
  const count = lax.reduceSum(mask, axes);
  return lax.div(lax.reduceSum(lax.mul(t, mask), axes), count);
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
  const xs = lax.reshape(lax.transpose(x, perm), [...outShape, n]);
  const ts = lax.reshape(lax.transpose(t, perm), [...outShape, n]);
  const r = outShape.length;
  const table = lax.broadcastInDim(xs, [...outShape, n, n], [...outShape.map((_, i) => i), r + 1]);
  const diag = lax.eq(lax.broadcastedIota('int32', [n, n], 0), lax.broadcastedIota('int32', [n, n], 1));
  const diagB = lax.broadcastInDim(diag, [...outShape, n, n], [r, r + 1]);
  const others = lax.reduceProd(lax.select(diagB, fullLike(1, table), table), [r + 1]);
  return lax.reduceSum(lax.mul(ts, others), [r]);
}

// Slicing, gather/scatter, sort and random primitives (lax/slicing.ts, gather.ts, scatter.ts,
// sort.ts, random/*). Index operands never carry tangents.
const P = getPrimitive;
/** Linear in operand 0 (and optionally more leading operands); the rest are indices. */
function linearIn(nLinear: number): (prim: Primitive) => JvpRule {
  return (prim) => (xs, ts, params) => {
    const y = p1(prim, xs, params);
    const lin = ts.slice(0, nLinear);
    if (lin.every((t) => t === null)) return [[y], [null]];
    return [[y], [p1(prim, [...lin.map((t, i) => instantiate(t, xs[i].aval)), ...xs.slice(nLinear)], params)]];
  };
}
/** scatter / scatter-add: operand and updates are linear, indices (operand 1) are not. */
const scatterLinear = (prim: Primitive): JvpRule => ([x, idx, u], [tx, , tu], params) => {
  const y = p1(prim, [x, idx, u], params);
  if (tx === null && tu === null) return [[y], [null]];
  return [[y], [p1(prim, [instantiate(tx, x.aval), idx, instantiate(tu, u.aval)], params)]];
};
Object.assign(table, {
  slice: linearIn(1),
  dynamic_slice: linearIn(1),
  gather: linearIn(1),
  dynamic_update_slice: linearIn(2),
  pad: linearIn(2),
  concatenate: (prim: Primitive): JvpRule => (xs, ts, params) => [[p1(prim, xs, params)], [p1(prim, ts.map((t, i) => instantiate(t, xs[i].aval)), params)]],
  scatter: scatterLinear,
  'scatter-add': scatterLinear,
  // Sorting permutes: sort an iota along with the operands, then apply the permutation to tangents.
  sort: (prim: Primitive): JvpRule => (xs, ts, params) => {
    const { dimension } = params;
    const iota = lax.broadcastedIota('int32', xs[0].shape, dimension);
    const outs = bind(prim, [...xs, iota], params);
    const perm = outs[outs.length - 1];
    return [outs.slice(0, xs.length), ts.map((t) => (t === null ? null : takeAlong(t, perm, dimension)))];
  },
  top_k: (prim: Primitive): JvpRule => ([x], [t], params) => {
    const [v, i] = bind(prim, [x], params);
    return [[v, i], [takeAlong(t!, i, x.ndim - 1), null]];
  },
  threefry2x32: NOT_DIFFERENTIABLE,
  cummax: rule(([x], [t], y, { axis, reverse }) => cumExtremumTangent(x, t!, y, axis, reverse)),
  cummin: rule(([x], [t], y, { axis, reverse }) => cumExtremumTangent(x, t!, y, axis, reverse)),
  cumprod: rule(([x], [t], _y, { axis, reverse }) => cumprodTangent(x, t!, axis, reverse)),
});

/**
 * The cumulative ops' tangents through an [n, n] table over the scanned axis (moved last):
 * entry (j, i) relates input position j to output position i, masked to j <= i (j >= i when
 * reversed). O(n^2) in the axis length; right at zeros and ties, unlike division tricks.
 */
function toLast(x: Array, axis: number): Array {
  const perm = x.shape.map((_, i) => i).filter((i) => i !== axis);
  return lax.transpose(x, [...perm, axis]);
}
function fromLast(x: Array, axis: number): Array {
  const r = x.ndim;
  const perm: number[] = [];
  for (let i = 0, k = 0; i < r; i++) perm.push(i === axis ? r - 1 : k++);
  return lax.transpose(x, perm);
}
function prefixMask(lead: readonly number[], n: number, reverse: boolean): Array {
  const j = lax.broadcastedIota('int32', [n, n], 0);
  const i = lax.broadcastedIota('int32', [n, n], 1);
  const m = reverse ? lax.ge(j, i) : lax.le(j, i);
  return lax.broadcastInDim(m, [...lead, n, n], [lead.length, lead.length + 1]);
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
  const xj = lax.broadcastInDim(xl, [...lead, n, n], [...leadDims, r]);
  const yi = lax.broadcastInDim(yl, [...lead, n, n], [...leadDims, r + 1]);
  const hit = lax.convertElementType(lax.bitwiseAnd(prefixMask(lead, n, reverse), lax.eq(xj, yi)), x.dtype);
  const tj = lax.broadcastInDim(tl, [...lead, n, n], [...leadDims, r]);
  const out = lax.div(lax.reduceSum(lax.mul(hit, tj), [r]), lax.reduceSum(hit, [r]));
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
  const xk = lax.broadcastInDim(xl, [...lead, n, n], [...leadDims, r + 1]);
  const diag = lax.broadcastInDim(lax.eq(lax.broadcastedIota('int32', [n, n], 0), lax.broadcastedIota('int32', [n, n], 1)), [...lead, n, n], [r, r + 1]);
  const others = lax.cumprod(lax.select(diag, fullLike(1, xk), xk), r + 1, reverse);
  const tj = lax.broadcastInDim(tl, [...lead, n, n], [...leadDims, r]);
  const masked = lax.select(prefixMask(lead, n, reverse), lax.mul(tj, others), fullLike(0, others));
  return fromLast(lax.reduceSum(masked, [r]), axis);
}

/** `take_along_axis` with in-range indices, as a gather with batching dims. */
export function takeAlong(x: Array, idx: Array, axis: number): Array {
  const others = x.shape.map((_, d) => d).filter((d) => d !== axis);
  return bind(getPrimitive('gather'), [x, lax.reshape(idx, [...idx.shape, 1])], {
    dimensionNumbers: { offsetDims: [], collapsedSliceDims: [axis], startIndexMap: [axis], operandBatchingDims: others, startIndicesBatchingDims: others },
    sliceSizes: x.shape.map(() => 1),
    mode: 'clip',
    fillValue: null,
    indicesAreSorted: false,
    uniqueIndices: false,
  })[0];
}

for (const [name, r] of Object.entries(table)) {
  const prim = P(name);
  prim.rules.jvp = typeof r === 'function' ? r(prim) : r;
}

