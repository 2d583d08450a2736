/**
 * Transposition: turns a linear jaxpr (the tangent map from `linearize`) into its transpose,
 * the map from output cotangents to input cotangents; this is reverse-mode differentiation.
 * `backwardPass` first evaluates the equations that do not touch the linear inputs (residual
 * arithmetic, and effects such as a rematerialised `debug.print`), then walks the rest
 * backwards, calling each primitive's transpose rule (`prim.rules.transpose`, given where the
 * primitive is defined) and summing cotangents (null = zero). `NON_LINEAR` marks primitives
 * that never appear applied to a linear input (a jvp rule only uses them on primals), so
 * transposing one is a bug, reported by name.
 */
import type { Array } from '../array';
import { add } from '../lax/elementwise';
import { NON_LINEAR, type TransposeRule, UndefPrimal } from '../primitive';
import { bind } from '../trace';
import { type Atom, type ClosedJaxpr, type Jaxpr, type JaxprEqn, Lit, type Var } from './jaxpr';
import { traceFlat } from './tracing';
import { isDifferentiable, zerosOf } from './zeros';

export { isUndef, NON_LINEAR, type TransposeRule, UndefPrimal } from '../primitive';

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
    ctEnv.set(v, prev === undefined ? ct : add(prev, ct));
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
