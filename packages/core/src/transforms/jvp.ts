/**
 * Forward-mode differentiation (jax.jvp). A `JVPTracer` carries a primal value and its tangent
 * (`null` for a symbolic zero); the `JVPTrace` applies each primitive's jvp rule, which
 * computes the primal output with the same primitive and the tangent with ops that are linear
 * in the input tangents (that linearity is what partial evaluation and transposition rely on
 * to get reverse mode). This module is only the machinery: every primitive carries its own jvp
 * rule (`prim.rules.jvp`), given where it is defined (lax/*.ts for first-order primitives,
 * transforms/ for higher-order ones). `NOT_DIFFERENTIABLE` marks primitives whose outputs have
 * zero derivative (comparisons, rounding, integer ops, random bits).
 */
import type { Array } from '../array';
import { type JvpRule, NOT_DIFFERENTIABLE, type Primitive } from '../primitive';
import { bind } from '../trace';
import { type MainTrace, Trace, Tracer, withMain } from './core';
import { evalJaxpr } from './eval';
import type { ClosedJaxpr } from './jaxpr';
import { traceFlat } from './tracing';
import { instantiate, isDifferentiable } from './zeros';

export { type JvpRule, NOT_DIFFERENTIABLE } from '../primitive';

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

/** `take_along_axis` with in-range indices (a gather; see lax/gatherScatter.ts). */
export { takeAlong } from '../lax/gatherScatter';
