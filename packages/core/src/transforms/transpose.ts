/**
 * Transposition: turns a linear jaxpr (the tangent map from `linearize`) into its transpose,
 * the map from output cotangents to input cotangents; this is reverse-mode differentiation.
 * `backwardPass` first evaluates the equations that do not touch the linear inputs (residual
 * arithmetic, and effects such as a rematerialised `debug.print`), then walks the rest
 * backwards, calling each primitive's transpose rule and summing cotangents (null = zero).
 * Rules for the first-order linear primitives are in the table below; `NON_LINEAR` marks
 * primitives that never appear applied to a linear input (a jvp rule only uses them on
 * primals), so transposing one is a bug, reported by name.
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
import { freeDims } from '../lax/dot';
import { getPrimitive, type Primitive, type ShapedArray } from '../primitive';
import { bind } from '../trace';
import { type Atom, type ClosedJaxpr, type Jaxpr, type JaxprEqn, Lit, type Var } from './jaxpr';
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
  // Classify equations: non-linear ones (all inputs known) and linear ones.
  const knownVars = new Set<Var>(primal.keys());
  const isKnown = (a: Atom): boolean => a instanceof Lit || knownVars.has(a);
  const linEqns = [];
  const nonLin = [];
  for (const e of jaxpr.eqns) {
    if (e.inputs.every(isKnown)) {
      nonLin.push(e);
      for (const v of e.outBinders) knownVars.add(v);
    } else linEqns.push(e);
  }
  // Forward: evaluate only the non-linear equations the linear ones read (dead code is skipped),
  // and every effect (a debug callback that a rematerialised forward part recomputes runs
  // again, as in JAX), with what it reads.
  const needed = new Set<Var>();
  for (const e of linEqns) for (const a of e.inputs) if (!(a instanceof Lit) && knownVars.has(a)) needed.add(a);
  const run = new Set<JaxprEqn>();
  for (let k = nonLin.length - 1; k >= 0; k--) {
    const e = nonLin[k];
    if (e.prim.rules.effect === true || e.outBinders.some((v) => needed.has(v))) {
      run.add(e);
      for (const a of e.inputs) if (!(a instanceof Lit)) needed.add(a);
    }
  }
  for (const e of nonLin) {
    if (!run.has(e)) continue;
    const outs = bind(e.prim, e.inputs.map((a) => read(a) as Array), e.params);
    e.outBinders.forEach((v, i) => primal.set(v, outs[i]));
  }
  const ctEnv = new Map<Var, Array>();
  const addCt = (v: Atom, ct: Array | null): void => {
    if (ct === null || v instanceof Lit || knownVars.has(v) || !isDifferentiable(v.aval)) return;
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
  'cumprod', 'cummax', 'cummin', 'sort', 'top_k', 'threefry2x32', 'scatter-mul', 'scatter-min', 'scatter-max',
];

// Slicing, gather/scatter.
const P = getPrimitive;
const scalar0 = (d: ShapedArray['dtype']): Array => zerosOf({ shape: [], dtype: d, weakType: false });

/** Scatter dimension numbers that undo a gather's (and the gather that reads a scatter's updates). */
function scatterDnFromGather(dn: any) {
  return {
    updateWindowDims: dn.offsetDims,
    insertedWindowDims: dn.collapsedSliceDims,
    scatterDimsToOperandDims: dn.startIndexMap,
    operandBatchingDims: dn.operandBatchingDims,
    scatterIndicesBatchingDims: dn.startIndicesBatchingDims,
  };
}
function gatherFromScatter(operand: Array, idx: Array, updatesShape: readonly number[], params: any): Array {
  const dn = params.dimensionNumbers;
  const skip = new Set<number>([...dn.insertedWindowDims, ...dn.operandBatchingDims]);
  let w = 0;
  const sliceSizes = operand.shape.map((_, d) => (skip.has(d) ? 1 : updatesShape[dn.updateWindowDims[w++]]));
  return p1(P('gather'), [operand, idx], {
    dimensionNumbers: {
      offsetDims: dn.updateWindowDims,
      collapsedSliceDims: dn.insertedWindowDims,
      startIndexMap: dn.scatterDimsToOperandDims,
      operandBatchingDims: dn.operandBatchingDims,
      startIndicesBatchingDims: dn.scatterIndicesBatchingDims,
    },
    sliceSizes,
    mode: params.mode,
    fillValue: null,
    indicesAreSorted: params.indicesAreSorted,
    uniqueIndices: params.uniqueIndices,
  });
}

Object.assign(table, {
  slice: lin1((ct, x, { startIndices, strides }) => {
    const cfg = x.aval.shape.map((n, d) => {
      const st = strides ? strides[d] : 1;
      const out = ct.shape[d];
      const used = out === 0 ? 0 : (out - 1) * st + 1;
      return [startIndices[d], n - startIndices[d] - used, out === 0 ? 0 : st - 1] as [number, number, number];
    });
    return p1(P('pad'), [ct, scalar0(ct.dtype)], { paddingConfig: cfg });
  }),
  dynamic_slice: ([ct], [x, ...idx]) => [p1(P('dynamic_update_slice'), [zerosOf((x as UndefPrimal).aval), ct!, ...(idx as Array[])], {}), ...idx.map(() => null)],
  dynamic_update_slice: ([ct], [x, u, ...idx]) => {
    const ix = idx as Array[];
    const ua = isUndef(u) ? u.aval : (u as Array).aval;
    return [
      isUndef(x) ? p1(P('dynamic_update_slice'), [ct!, zerosOf(ua), ...ix], {}) : null,
      isUndef(u) ? p1(P('dynamic_slice'), [ct!, ...ix], { sliceSizes: ua.shape }) : null,
      ...ix.map(() => null),
    ];
  },
  concatenate: ([ct], xs, { dimension }) => {
    let off = 0;
    return xs.map((x) => {
      const a = isUndef(x) ? x.aval : (x as Array).aval;
      const start = off;
      off += a.shape[dimension];
      if (!isUndef(x)) return null;
      return lax.sliceInDim(ct!, start, start + a.shape[dimension], 1, dimension);
    });
  },
  pad: ([ct], [x, v], { paddingConfig }) => {
    const c = ct!;
    let tOp: Array | null = null;
    if (isUndef(x)) {
      const unpad = paddingConfig.map(([lo, hi]: [number, number, number]) => [-lo, -hi, 0]);
      const unpadded = p1(P('pad'), [c, scalar0(c.dtype)], { paddingConfig: unpad });
      tOp = lax.slice(unpadded, unpadded.shape.map(() => 0), unpadded.shape, paddingConfig.map(([, , i]: [number, number, number]) => i + 1));
    }
    const all = (a: Array) => lax.reduceSum(a, a.shape.map((_, i) => i));
    const tV = isUndef(v) ? (tOp ? lax.sub(all(c), all(tOp)) : all(c)) : null;
    return [tOp, tV];
  },
  gather: ([ct], [x, idx], params) => {
    const a = (x as UndefPrimal).aval;
    const out = p1(P('scatter-add'), [zerosOf(a), idx as Array, ct!], {
      dimensionNumbers: scatterDnFromGather(params.dimensionNumbers),
      mode: params.mode,
      indicesAreSorted: params.indicesAreSorted,
      uniqueIndices: params.uniqueIndices,
    });
    return [out, null];
  },
  'scatter-add': ([ct], [x, idx, u], params) => {
    const ua = isUndef(u) ? u.aval : (u as Array).aval;
    return [isUndef(x) ? ct : null, null, isUndef(u) ? gatherFromScatter(ct!, idx as Array, ua.shape, params) : null];
  },
  // Overwriting scatter: transposable when indices are unique (as in JAX).
  scatter: ([ct], [x, idx, u], params) => {
    const ua = isUndef(u) ? u.aval : (u as Array).aval;
    return [
      isUndef(x) ? p1(P('scatter'), [ct!, idx as Array, zerosOf(ua)], params) : null,
      null,
      isUndef(u) ? gatherFromScatter(ct!, idx as Array, ua.shape, params) : null,
    ];
  },
} satisfies Record<string, TransposeRule>);

for (const [name, r] of Object.entries(table)) getPrimitive(name).rules.transpose = r;
for (const name of nonLinear) getPrimitive(name).rules.transpose = NON_LINEAR;

