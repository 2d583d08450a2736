/**
 * Transposition: turns a linear jaxpr (the tangent map from `linearize`) into its transpose,
 * the map from output cotangents to input cotangents; this is reverse-mode differentiation.
 * `backwardPass` first evaluates the equations that do not touch the linear inputs (residual
 * arithmetic), then walks the rest backwards, calling each primitive's transpose rule and
 * summing cotangents (null = zero). Rules for the first-order linear primitives are in the table
 * below; `NON_LINEAR` marks primitives that never appear applied to a linear input (a jvp rule
 * only uses them on primals), so transposing one is a bug, reported by name.
 */
import type { Array } from '../array';
import * as lax from '../lax/index';
import { freeDims } from '../lax/dot';
import { getPrimitive, type Primitive, type ShapedArray } from '../primitive';
import { bind } from '../trace';
import { type Atom, type ClosedJaxpr, type Jaxpr, Lit, type Var } from './jaxpr';
import { traceFlat } from './tracing';
import { isDifferentiable, zerosOf } from './zeros';

/** A linear input of an equation being transposed: only its type is known. */
export class UndefPrimal {
  constructor(readonly aval: ShapedArray) {}
}

export type TransposeRule = (cts: (Array | null)[], args: (Array | UndefPrimal)[], params: any) => (Array | null)[];

export const NON_LINEAR = Object.freeze({ nonLinear: true as const });

export const isUndef = (x: unknown): x is UndefPrimal => x instanceof UndefPrimal;

/**
 * Cotangents of `jaxpr`'s inputs marked `linear` given cotangents of its outputs. Non-linear
 * inputs take their values from `args` (entries for linear inputs are ignored).
 */
export function backwardPass(jaxpr: Jaxpr, consts: readonly Array[], linear: readonly boolean[], args: readonly (Array | null)[], cts: readonly (Array | null)[]): (Array | null)[] {
  const primal = new Map<Var, Array>();
  jaxpr.constvars.forEach((v, i) => primal.set(v, consts[i]));
  jaxpr.invars.forEach((v, i) => {
    if (!linear[i]) primal.set(v, args[i]!);
  });
  const read = (a: Atom): Array | UndefPrimal => (a instanceof Lit ? a.val : primal.get(a) ?? new UndefPrimal(a.aval));
  const isKnown = (a: Atom): boolean => a instanceof Lit || primal.has(a);
  // Forward: non-linear equations (all inputs known).
  const linEqns = [];
  for (const e of jaxpr.eqns) {
    if (e.inputs.every(isKnown)) {
      const outs = bind(e.prim, e.inputs.map((a) => read(a) as Array), e.params);
      e.outBinders.forEach((v, i) => primal.set(v, outs[i]));
    } else linEqns.push(e);
  }
  const ctEnv = new Map<Var, Array>();
  const addCt = (v: Atom, ct: Array | null): void => {
    if (ct === null || v instanceof Lit || primal.has(v) || !isDifferentiable(v.aval)) return;
    const prev = ctEnv.get(v);
    ctEnv.set(v, prev === undefined ? ct : lax.add(prev, ct));
  };
  jaxpr.outs.forEach((o, i) => addCt(o, cts[i]));
  for (let k = linEqns.length - 1; k >= 0; k--) {
    const e = linEqns[k];
    const ctsOut = e.outBinders.map((v) => ctEnv.get(v) ?? null);
    if (ctsOut.every((c) => c === null)) continue;
    e.outBinders.forEach((v) => ctEnv.delete(v));
    const rule = e.prim.rules.transpose as TransposeRule | typeof NON_LINEAR | undefined;
    if (typeof rule !== 'function') {
      throw new Error(
        rule === undefined
          ? `transpose: primitive ${e.prim.name} has no transpose rule, so reverse-mode differentiation through it is not supported`
          : `transpose: primitive ${e.prim.name} is not linear but was applied to a linear (tangent) value; its jvp rule must only use it on primals`,
      );
    }
    const ctsIn = rule(ctsOut, e.inputs.map(read), e.params);
    e.inputs.forEach((a, i) => addCt(a, ctsIn[i]));
  }
  return jaxpr.invars.map((v, i) => (linear[i] ? ctEnv.get(v) ?? null : null));
}

const transposeCache = new WeakMap<ClosedJaxpr, Map<string, ClosedJaxpr>>();

/**
 * The transpose of a closed jaxpr as a closed jaxpr: inputs are the non-linear inputs then the
 * output cotangents; outputs are the cotangents of the linear inputs (zeros instantiated).
 */
export function transposeJaxpr(closed: ClosedJaxpr, linear: readonly boolean[]): ClosedJaxpr {
  const key = linear.map((b) => (b ? 1 : 0)).join('');
  let m = transposeCache.get(closed);
  if (!m) transposeCache.set(closed, (m = new Map()));
  const hit = m.get(key);
  if (hit) return hit;
  const inAvals = closed.inAvals;
  const nonLin = inAvals.filter((_, i) => !linear[i]);
  const res = traceFlat((...xs) => {
    let k = 0;
    const args = inAvals.map((_, i) => (linear[i] ? null : xs[k++]));
    const cts = xs.slice(k);
    const out = backwardPass(closed.jaxpr, closed.consts, linear, args, cts);
    return out.map((c, i) => c ?? zerosOf(inAvals[i])).filter((_, i) => linear[i]);
  }, [...nonLin, ...closed.outAvals], 'transpose');
  m.set(key, res);
  return res;
}

// ---------------------------------------------------------------------------------------------
// Rules for first-order primitives

const p1 = (prim: Primitive, xs: Array[], params: any): Array => bind(prim, xs, params)[0];

/** Sums `ct` (shaped like a broadcast result) back to `aval`'s shape. */
function unbroadcastTo(ct: Array, shape: readonly number[], bd: readonly number[]): Array {
  const outRank = ct.ndim;
  const sumDims: number[] = [];
  for (let d = 0; d < outRank; d++) {
    const i = bd.indexOf(d);
    if (i < 0 || (shape[i] === 1 && ct.shape[d] !== 1)) sumDims.push(d);
  }
  const s = sumDims.length ? lax.reduceSum(ct, sumDims) : ct;
  return s.shape.length === shape.length && s.shape.every((n, i) => n === shape[i]) ? s : lax.reshape(s, shape);
}

function dotTransposeLhs(g: Array, y: Array, xAval: ShapedArray, dn: readonly [readonly [readonly number[], readonly number[]], readonly [readonly number[], readonly number[]]], params: any, swapAns: boolean): Array {
  const [[xc, yc], [xb, yb]] = dn;
  const xNd = xAval.shape.length;
  const xKept = freeDims(xNd, xc, xb);
  const yKept = freeDims(y.ndim, yc, yb);
  const nb = xb.length;
  const range = (s: number, n: number) => globalThis.Array.from({ length: n }, (_, i) => s + i);
  const ansBatch = range(0, nb);
  const ansY = swapAns ? range(nb, yKept.length) : range(nb + xKept.length, yKept.length);
  const order = yc.map((_, i) => i).sort((a, b) => yc[a] - yc[b]);
  const xcSortedByY = order.map((i) => xc[i]);
  const pre = [...xb, ...xKept, ...xcSortedByY];
  const outAxes = pre.map((_, i) => i).sort((a, b) => pre[a] - pre[b]);
  const r = p1(getPrimitive('dot_general'), [g, y], { ...params, dimensionNumbers: [[ansY, yKept], [ansBatch, yb]], preferredElementType: null });
  const t = outAxes.every((a, i) => a === i) ? r : lax.transpose(r, outAxes);
  return t.dtype === xAval.dtype ? t : lax.convertElementType(t, xAval.dtype);
}

const lin1 = (f: (ct: Array, x: UndefPrimal, params: any) => Array): TransposeRule => ([ct], [x], params) => [f(ct!, x as UndefPrimal, params)];

const table: Record<string, TransposeRule | typeof NON_LINEAR> = {
  neg: lin1((ct) => lax.neg(ct)),
  add: ([ct], [a, b]) => [isUndef(a) ? ct : null, isUndef(b) ? ct : null],
  sub: ([ct], [a, b]) => [isUndef(a) ? ct : null, isUndef(b) ? lax.neg(ct!) : null],
  mul: ([ct], [a, b]) => {
    if (isUndef(a) && isUndef(b)) throw new Error('transpose: mul of two linear values is not linear');
    return [isUndef(a) ? lax.mul(ct!, b as Array) : null, isUndef(b) ? lax.mul(a as Array, ct!) : null];
  },
  div: ([ct], [a, b]) => {
    if (isUndef(b)) throw new Error('transpose: div is linear only in its numerator');
    return [lax.div(ct!, b), null];
  },
  convert_element_type: ([ct], [x]) => [lax.convertElementType(ct!, (x as UndefPrimal).aval.dtype, (x as UndefPrimal).aval.weakType)],
  reduce_sum: lin1((ct, x, { axes }) => lax.broadcastInDim(ct, x.aval.shape, x.aval.shape.map((_, i) => i).filter((i) => !axes.includes(i)))),
  broadcast_in_dim: lin1((ct, x, { broadcastDimensions }) => unbroadcastTo(ct, x.aval.shape, broadcastDimensions)),
  reshape: lin1((ct, x) => lax.reshape(ct, x.aval.shape)),
  squeeze: lin1((ct, x) => lax.reshape(ct, x.aval.shape)),
  transpose: lin1((ct, _x, { permutation }) => {
    const inv = new globalThis.Array<number>(permutation.length);
    permutation.forEach((p: number, i: number) => (inv[p] = i));
    return lax.transpose(ct, inv);
  }),
  rev: lin1((ct, _x, { dimensions }) => lax.rev(ct, dimensions)),
  cumsum: lin1((ct, _x, { axis, reverse }) => lax.cumsum(ct, axis, !reverse)),
  select_n: ([ct], [which, ...cases]) => {
    if (isUndef(which)) throw new Error('transpose: select_n predicate cannot be linear');
    const z = zerosOf(ct!.aval);
    return [null, ...cases.map((c, i) => (isUndef(c) ? lax.selectN(which, ...cases.map((_, j) => (j === i ? ct! : z))) : null))];
  },
  dot_general: ([ct], [x, y], params) => {
    const dn = params.dimensionNumbers;
    if (isUndef(x) && isUndef(y)) throw new Error('transpose: dot_general of two linear values is not linear');
    if (isUndef(x)) return [dotTransposeLhs(ct!, y as Array, x.aval, dn, params, false), null];
    const [[xc, yc], [xb, yb]] = dn;
    return [null, dotTransposeLhs(ct!, x as Array, (y as UndefPrimal).aval, [[yc, xc], [yb, xb]], params, true)];
  },
};

const nonLinear = [
  'sign', 'abs', 'floor', 'ceil', 'round', 'round_nearest_even', 'is_finite', 'exp', 'exp2', 'log', 'log1p', 'expm1', 'tanh',
  'logistic', 'sin', 'cos', 'tan', 'asin', 'acos', 'atan', 'sinh', 'cosh', 'asinh', 'acosh', 'atanh', 'sqrt', 'rsqrt', 'cbrt',
  'erf', 'erfc', 'erf_inv', 'lgamma', 'digamma', 'square', 'not', 'integer_pow', 'rem', 'pow', 'max', 'min', 'atan2', 'nextafter',
  'and', 'or', 'xor', 'shift_left', 'shift_right_arithmetic', 'shift_right_logical', 'eq', 'ne', 'lt', 'le', 'gt', 'ge',
  'bitcast_convert_type', 'iota', 'reduce_max', 'reduce_min', 'reduce_prod', 'reduce_and', 'reduce_or', 'argmax', 'argmin',
  'cumprod', 'cummax', 'cummin',
];

for (const [name, r] of Object.entries(table)) getPrimitive(name).rules.transpose = r;
for (const name of nonLinear) getPrimitive(name).rules.transpose = NON_LINEAR;

