/**
 * Partial evaluation and `linearize`. A `PartialEvalTrace` runs a function on a mix of known
 * values and unknown (abstract) inputs: every primitive whose inputs are all known runs right
 * away (on the enclosing trace or eagerly), and every primitive that touches an unknown is
 * recorded, so the unknown part comes out as a jaxpr whose constants (the residuals) are known
 * values. `linearize` runs jvp under it with the primals known and the tangents unknown: the
 * primal computation (and every coefficient of the tangent map) runs now, and the tangent map
 * comes out as a linear jaxpr, ready to evaluate (jvp) or to transpose (vjp, grad).
 * Higher-order primitives that mix known and unknown parts supply `rules.partialEval`.
 */
import type { Array } from '../array';
import type { PartialEvalRuleOf, Primitive, ShapedArray } from '../primitive';
import { bind } from '../trace';
import { type MainTrace, Trace, Tracer, withMain } from './core';
import { ClosedJaxpr, Jaxpr, type JaxprEqn, Var } from './jaxpr';
import { evalJaxpr } from './eval';
import { jvpFlat } from './jvp';
import { traceFlat } from './tracing';
import { instantiate } from './zeros';
import { checkArrayBytes } from '../sizeGuard';

export type Recipe =
  | { readonly kind: 'lambda' }
  | { readonly kind: 'const'; readonly val: Array }
  | { readonly kind: 'eqn'; readonly prim: Primitive; readonly ins: PETracer[]; readonly params: any; outs: PETracer[] };

export class PETracer extends Tracer {
  constructor(
    trace: PartialEvalTrace,
    aval: ShapedArray,
    /** The value when known (a const recipe), null when unknown. */
    readonly known: Array | null,
    readonly recipe: Recipe,
  ) {
    super(trace, aval);
  }
}

/** A rule that splits a higher-order primitive into a part run now and a part staged. */
export type PartialEvalRule = PartialEvalRuleOf<PartialEvalTrace, PETracer>;

export class PartialEvalTrace extends Trace {
  /** Staged effectful equations (debug callbacks on unknown values): kept though nothing uses them. */
  readonly effects: Recipe[] = [];

  constructor(main: MainTrace) {
    super(main);
  }

  newArg(aval: ShapedArray): PETracer {
    return new PETracer(this, aval, null, { kind: 'lambda' });
  }

  pure(x: Array): Tracer {
    return new PETracer(this, x.aval, x, { kind: 'const', val: x });
  }

  /** Records `prim` as a staged equation on these tracers (known ones become residuals). */
  stage(prim: Primitive, tracers: PETracer[], params: any, outAvals: ShapedArray[]): PETracer[] {
    const recipe: Recipe = { kind: 'eqn', prim, ins: tracers, params, outs: [] };
    const outs = outAvals.map((a) => new PETracer(this, a, null, recipe));
    recipe.outs = outs;
    if (prim.rules.effect === true) this.effects.push(recipe);
    return outs;
  }

  protected process(prim: Primitive, tracers: Tracer[], params: any): Array[] {
    const ts = tracers as PETracer[];
    if (ts.every((t) => t.known !== null)) return bind(prim, ts.map((t) => t.known!), params);
    const rule = prim.rules.partialEval as PartialEvalRule | undefined;
    if (rule) return rule(this, ts, params);
    const outAvals = prim.abstractEval(ts.map((t) => t.aval), params);
    for (const a of outAvals) checkArrayBytes(prim.name, a.shape, a.dtype);
    return this.stage(prim, ts, params, outAvals);
  }
}

/**
 * Builds the jaxpr of the unknown part: inputs `ins`, outputs `outs`, residuals as constvars.
 * Only what the outputs need is kept, plus the staged `effects` (which have no outputs).
 */
export function tracersToJaxpr(ins: PETracer[], outs: PETracer[], effects: readonly Recipe[] = []): ClosedJaxpr {
  const vars = new Map<PETracer, Var>();
  const constvars: Var[] = [];
  const consts: Array[] = [];
  const constByVal = new Map<Array, Var>();
  const eqns: JaxprEqn[] = [];
  const done = new Set<Recipe>();
  for (const t of ins) vars.set(t, new Var(t.aval));
  const varOf = (t: PETracer): Var => {
    const v = vars.get(t);
    if (v) return v;
    if (t.recipe.kind === 'const') {
      let cv = constByVal.get(t.recipe.val);
      if (!cv) {
        cv = new Var(t.aval);
        constByVal.set(t.recipe.val, cv);
        constvars.push(cv);
        consts.push(t.recipe.val);
      }
      vars.set(t, cv);
      return cv;
    }
    throw new Error('partial eval: an unknown input was not among the declared inputs (a tracer escaped)');
  };
  // Iterative post-order walk from the outputs.
  const visit = (root: PETracer): void => {
    const stack: [PETracer, boolean][] = [[root, false]];
    while (stack.length) {
      const [t, expanded] = stack.pop()!;
      const r = t.recipe;
      if (r.kind !== 'eqn') {
        varOf(t);
        continue;
      }
      if (done.has(r)) continue;
      if (!expanded) {
        stack.push([t, true]);
        for (const i of r.ins) if (i.recipe.kind !== 'eqn' || !done.has(i.recipe)) stack.push([i, false]);
        continue;
      }
      done.add(r);
      const outBinders = r.outs.map((o) => {
        const v = new Var(o.aval);
        vars.set(o, v);
        return v;
      });
      eqns.push({ prim: r.prim, inputs: r.ins.map(varOf), params: r.params, outBinders });
    }
  };
  for (const o of outs) visit(o);
  for (const r of effects) {
    if (r.kind !== 'eqn' || done.has(r)) continue;
    for (const i of r.ins) visit(i);
    done.add(r);
    eqns.push({ prim: r.prim, inputs: r.ins.map(varOf), params: r.params, outBinders: [] });
  }
  const jaxpr = new Jaxpr(constvars, ins.map((t) => vars.get(t)!), eqns, outs.map(varOf));
  return new ClosedJaxpr(jaxpr, consts);
}

/** A linear map as a jaxpr: tangents in, tangents out; residuals are its constants. */
export interface LinearMap {
  readonly jaxpr: ClosedJaxpr;
  readonly inAvals: ShapedArray[];
  readonly outAvals: ShapedArray[];
}

/**
 * Runs jvp of `f` at `primals` with unknown tangents: returns the primal outputs (computed now)
 * and the tangent map as a linear jaxpr over the tangents of the `wrt` inputs.
 */
export function linearizeFlat(f: (...xs: Array[]) => Array[], primals: readonly Array[], wrt: readonly boolean[]): [Array[], LinearMap] {
  return withMain(
    'linearize',
    (m) => new PartialEvalTrace(m),
    (trace) => {
      const tanIns = primals.map((p, i) => (wrt[i] ? trace.newArg(p.aval) : null));
      const [po, to] = jvpFlat(f, primals, tanIns);
      const primalsOut = po.map((p) => (p instanceof PETracer && p._trace === trace ? known(p) : p));
      const tanOuts = to.map((t, i) => trace.fullRaise(instantiate(t, primalsOut[i].aval)) as PETracer);
      const ins = tanIns.filter((t): t is PETracer => t !== null);
      const jaxpr = tracersToJaxpr(ins, tanOuts, trace.effects);
      return [primalsOut, { jaxpr, inAvals: ins.map((t) => t.aval), outAvals: tanOuts.map((t) => t.aval) }];
    },
  );
}

function known(t: PETracer): Array {
  if (t.known === null) throw new Error('linearize: a primal output depends on a tangent (a jvp rule is not linear in its tangents)');
  return t.known;
}

/** A jaxpr split by partial evaluation into the part computable now and the staged part. */
export interface SplitJaxpr {
  /** Known inputs -> known outputs, then residuals. */
  readonly known: ClosedJaxpr;
  /** Residuals, then unknown inputs -> unknown outputs. */
  readonly unknown: ClosedJaxpr;
  readonly outUnknowns: boolean[];
  readonly numRes: number;
}

const peCache = new WeakMap<ClosedJaxpr, Map<string, SplitJaxpr>>();

/**
 * Partial evaluation of a closed jaxpr given which inputs are unknown: the jaxpr-to-jaxpr form
 * used by higher-order primitives (jit, cond, scan, remat). Outputs marked in `instantiate`
 * are forced unknown.
 */
export function partialEvalJaxpr(closed: ClosedJaxpr, unknowns: readonly boolean[], instantiate: boolean | readonly boolean[]): SplitJaxpr {
  const key = unknowns.map(Number).join('') + '|' + (typeof instantiate === 'boolean' ? String(instantiate) : instantiate.map(Number).join(''));
  let m = peCache.get(closed);
  if (!m) peCache.set(closed, (m = new Map()));
  const hit = m.get(key);
  if (hit) return hit;
  const inAvals = closed.inAvals;
  let unknown: ClosedJaxpr | null = null;
  let outUnknowns: boolean[] = [];
  let numRes = 0;
  const known = traceFlat((...knownIns) => {
    return withMain(
      'partialEval',
      (mm) => new PartialEvalTrace(mm),
      (trace) => {
        let k = 0;
        const unkArgs: PETracer[] = [];
        const ins = inAvals.map((a, i) => {
          if (!unknowns[i]) return knownIns[k++];
          const t = trace.newArg(a);
          unkArgs.push(t);
          return t;
        });
        const outs = evalJaxpr(closed.jaxpr, closed.consts, ins);
        const isUnknown = (o: Array): boolean => o instanceof PETracer && o._trace === trace && o.known === null;
        outUnknowns = outs.map((o, i) => isUnknown(o) || (typeof instantiate === 'boolean' ? instantiate : instantiate[i]));
        const knownOuts = outs.filter((_, i) => !outUnknowns[i]).map((o) => (o instanceof PETracer && o._trace === trace ? o.known! : o));
        const unkOuts = outs.filter((_, i) => outUnknowns[i]).map((o) => trace.fullRaise(o) as PETracer);
        const cj = tracersToJaxpr(unkArgs, unkOuts, trace.effects);
        numRes = cj.consts.length;
        const j = cj.jaxpr;
        unknown = new ClosedJaxpr(new Jaxpr([], [...j.constvars, ...j.invars], j.eqns, j.outs), []);
        return [...knownOuts, ...cj.consts];
      },
    );
  }, inAvals.filter((_, i) => !unknowns[i]), 'partialEval');
  const res: SplitJaxpr = { known, unknown: unknown!, outUnknowns, numRes };
  m.set(key, res);
  return res;
}

/**
 * Partial evaluation of a call-like primitive whose closed jaxpr runs on all its operands (jit's
 * pjit, remat): the known part runs now as one `prim` call, the unknown part is staged as
 * another taking the residuals first. `withJaxpr` rebuilds the params around a new jaxpr (it
 * is told which part, the split and the unknown inputs, for params that follow the operands).
 */
export function partialEvalCall(
  prim: Primitive,
  trace: PartialEvalTrace,
  tracers: PETracer[],
  closed: ClosedJaxpr,
  withJaxpr: (j: ClosedJaxpr, part: 'known' | 'unknown', split: SplitJaxpr, unknowns: readonly boolean[]) => any,
): Array[] {
  const unknowns = tracers.map((t) => t.known === null);
  const split = partialEvalJaxpr(closed, unknowns, false);
  const kOuts = bind(prim, tracers.filter((t) => t.known !== null).map((t) => t.known!), withJaxpr(split.known, 'known', split, unknowns));
  const nKnown = kOuts.length - split.numRes;
  const res = kOuts.slice(nKnown).map((r) => trace.pure(r) as PETracer);
  const uOuts = trace.stage(prim, [...res, ...tracers.filter((t) => t.known === null)], withJaxpr(split.unknown, 'unknown', split, unknowns), split.unknown.outAvals);
  let ki = 0;
  let ui = 0;
  return split.outUnknowns.map((u) => (u ? uOuts[ui++] : kOuts[ki++]));
}
