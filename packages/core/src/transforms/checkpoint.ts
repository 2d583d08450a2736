/**
 * Rematerialisation (jax.checkpoint / jax.remat). `checkpoint(f, { policy })` wraps `f` in a
 * `remat` primitive. It evaluates, batches and differentiates forward like `f`; what changes is
 * partial evaluation (the heart of reverse mode): instead of keeping every intermediate the
 * backward pass needs, the forward part saves only the inputs plus the intermediates the policy
 * names saveable, and the staged backward part recomputes the rest from them. Policies:
 * `nothing_saveable` (save only inputs), `everything_saveable` (no recomputation), and
 * `dots_saveable` (keep matmul outputs, recompute the cheap elementwise work), or any
 * `(primitive, params) => boolean`. A `debug.print` / `debug.callback` inside runs in the
 * forward pass and, like the rest of the forward work, again when the backward pass
 * recomputes it (JAX's rule; see `savedEquations`).
 */
import type { Array } from '../array';
import { definePrimitive, type Primitive } from '../primitive';
import { bind } from '../trace';
import * as tree from '../tree';
import { type BatchRule, moveBdim, vmapJaxpr } from './batching';
import { evalClosed } from './eval';
import { arrayLeaves } from './leaves';
import { type Atom, ClosedJaxpr, Jaxpr, type JaxprEqn, Lit, type Var } from './jaxpr';
import { jvpJaxpr, type JvpRule } from './jvp';
import { partialEvalCall, partialEvalJaxpr, type PartialEvalRule, type PETracer } from './partialEval';
import { backwardPass, isUndef, type TransposeRule } from './transpose';
import { traceFlat } from './tracing';
import { showValue } from '../describe';

/**
 * `optimization_barrier` (jax.lax.optimization_barrier): the identity on its operands, which a
 * compiler may not look through. Under jit, xla-lite's common-subexpression elimination leaves
 * it and what reads it alone, so a computation fed by a barrier is not merged with the same
 * computation on the barrier's operands; it is how `checkpoint` keeps its recomputation in
 * the backward pass (below). Outside a compiled function it does nothing.
 */
export const optimizationBarrierP = definePrimitive<Record<string, never>>({
  name: 'optimization_barrier',
  hlo: 'opt-barrier',
  stablehlo: 'optimization_barrier',
  abstractEval: (avals) => avals,
  impl() {
    throw new Error('optimization_barrier: runs through its eval rule');
  },
});
optimizationBarrierP.rules.eval = (args: Array[]) => args;
/** The barrier over the non-null entries of `xs` (one bind), nulls kept. */
const barrierOfPresent = (xs: (Array | null)[]): (Array | null)[] => {
  const present = xs.filter((x): x is Array => x !== null);
  if (present.length === 0) return xs;
  const outs = bind(optimizationBarrierP, present, {});
  let k = 0;
  return xs.map((x) => (x === null ? null : outs[k++]));
};
optimizationBarrierP.rules.jvp = ((primals, tangents) => [bind(optimizationBarrierP, primals, {}), barrierOfPresent(tangents)]) satisfies JvpRule;
optimizationBarrierP.rules.transpose = ((cts, args) => {
  const through = barrierOfPresent(cts);
  return args.map((a, i) => (isUndef(a) ? through[i] : null));
}) satisfies TransposeRule;
optimizationBarrierP.rules.batch = ((vals, dims) => [bind(optimizationBarrierP, vals, {}), dims]) satisfies BatchRule;

/**
 * `jax.lax.optimization_barrier`: returns `operand` (a pytree of arrays) unchanged, as values a
 * compiler may not merge with or compute from what it was given (see `optimizationBarrierP`).
 * JS number and boolean leaves come back as arrays (numbers weakly typed), as JAX turns Python
 * scalars into arrays.
 */
export function optimizationBarrier<T>(operand: T): T {
  const [leaves, def] = arrayLeaves([operand], 'optimizationBarrier');
  if (leaves.length === 0) return operand;
  return (tree.unflatten(def, bind(optimizationBarrierP, leaves, {})) as [T])[0];
}

export type SaveablePolicy = (prim: Primitive, params: any) => boolean;

/** Named policies (jax.checkpoint_policies). */
export const checkpointPolicies = {
  nothingSaveable: (() => false) as SaveablePolicy,
  everythingSaveable: (() => true) as SaveablePolicy,
  dotsSaveable: ((prim) => prim.name === 'dot_general') as SaveablePolicy,
} as const;

const byName: Record<string, SaveablePolicy> = {
  nothing_saveable: checkpointPolicies.nothingSaveable,
  everything_saveable: checkpointPolicies.everythingSaveable,
  dots_saveable: checkpointPolicies.dotsSaveable,
};

interface RematParams {
  readonly jaxpr: ClosedJaxpr;
  readonly policy: SaveablePolicy;
  readonly policyName: string;
  /** Whether the backward pass's recomputation reads its inputs through an optimization barrier. */
  readonly preventCse: boolean;
}

export const rematP = definePrimitive<RematParams>({
  name: 'remat',
  abstractEval: (_avals, { jaxpr }) => jaxpr.outAvals,
  impl() {
    throw new Error('remat: runs through its eval rule');
  },
});

rematP.rules.eval = (args: Array[], { jaxpr }: RematParams) => evalClosed(jaxpr, args);

rematP.rules.jvp = ((primals, tangents, params: RematParams) => {
  const nz = tangents.map((t) => t !== null);
  const { jaxpr, outNonzero } = jvpJaxpr(params.jaxpr, nz, false);
  const outs = bind(rematP, [...primals, ...(tangents.filter((t) => t !== null) as Array[])], { ...params, jaxpr });
  const n = params.jaxpr.outAvals.length;
  let k = n;
  return [outs.slice(0, n), outNonzero.map((z) => (z ? outs[k++] : null))];
}) satisfies JvpRule;

rematP.rules.batch = ((vals, dims, params: RematParams, n) => {
  const { jaxpr, outBatched } = vmapJaxpr(params.jaxpr, dims.map((d) => d !== null), n, false);
  const outs = bind(rematP, vals.map((v, i) => (dims[i] === null ? v : moveBdim(v, dims[i], 0, n))), { ...params, jaxpr });
  return [outs, outBatched.map((b) => (b ? 0 : null))];
}) satisfies BatchRule;

/** Transposing a staged remat: recompute its non-linear part (backwardPass does), then transpose. */
rematP.rules.transpose = ((cts, args, { jaxpr }: RematParams) => {
  const linear = args.map(isUndef);
  return backwardPass(jaxpr.jaxpr, jaxpr.consts, linear, args.map((a) => (isUndef(a) ? null : a)), cts);
}) satisfies TransposeRule;

/** Evaluates a jaxpr, taking the outputs of the equations in `saved` from `values` instead of recomputing them. */
function evalWithSaved(j: Jaxpr, consts: readonly Array[], args: readonly Array[], saved: Map<JaxprEqn, Array[]>): Array[] {
  const env = new Map<Var, Array>();
  j.constvars.forEach((v, i) => env.set(v, consts[i]));
  j.invars.forEach((v, i) => env.set(v, args[i]));
  const read = (a: Atom): Array => (a instanceof Lit ? a.val : env.get(a)!);
  for (const e of j.eqns) {
    const outs = saved.get(e) ?? bind(e.prim, e.inputs.map(read), e.params);
    e.outBinders.forEach((v, i) => env.set(v, outs[i]));
  }
  return j.outs.map(read);
}

const isEffect = (e: JaxprEqn): boolean => e.prim.rules.effect === true;

/**
 * The equations of the forward (known) part whose outputs are saved as residuals: those the
 * policy calls saveable. An effect (a debug callback) has no outputs to save; "saving" it means
 * running it only in the forward pass. As in JAX, the staged (backward) part runs it again
 * unless the policy saves it and it reads a saved value (when everything it reads is recomputed
 * in the backward pass anyway, it prints there too); so under the default policy a print in a
 * checkpointed function prints in the forward pass and again when the backward pass
 * rematerialises it.
 */
function savedEquations(known: Jaxpr, policy: SaveablePolicy): JaxprEqn[] {
  const saveable = known.eqns.filter((e) => policy(e.prim, e.params));
  const savedVars = new Set<Var>(saveable.filter((e) => !isEffect(e)).flatMap((e) => e.outBinders));
  return saveable.filter((e) => !isEffect(e) || e.inputs.some((a) => !(a instanceof Lit) && savedVars.has(a)));
}

rematP.rules.partialEval = ((trace, tracers, params: RematParams) => {
  const { jaxpr, policy } = params;
  if (policy === checkpointPolicies.everythingSaveable && !jaxpr.jaxpr.eqns.some(isEffect)) return partialEvalCall(rematP, trace, tracers, jaxpr, (j) => ({ ...params, jaxpr: j }));
  const unknowns = tracers.map((t) => t.known === null);
  const split = partialEvalJaxpr(jaxpr, unknowns, false);
  const known = split.known;
  // Saveable equations of the known part: their outputs are kept as residuals.
  const savedEqns = savedEquations(known.jaxpr, policy);
  const knownIns = tracers.filter((t) => t.known !== null).map((t) => t.known!);
  const nKnownOut = known.outAvals.length - split.numRes;
  // Run the known part once, collecting the saveable values.
  const savedVals = new Map<JaxprEqn, Array[]>();
  const kOuts = (() => {
    const env = new Map<Var, Array>();
    known.jaxpr.constvars.forEach((v, i) => env.set(v, known.consts[i]));
    known.jaxpr.invars.forEach((v, i) => env.set(v, knownIns[i]));
    const read = (a: Atom): Array => (a instanceof Lit ? a.val : env.get(a)!);
    for (const e of known.jaxpr.eqns) {
      const outs = bind(e.prim, e.inputs.map(read), e.params);
      if (savedEqns.includes(e)) savedVals.set(e, outs);
      e.outBinders.forEach((v, i) => env.set(v, outs[i]));
    }
    return known.jaxpr.outs.map(read);
  })();
  const saved = savedEqns.flatMap((e) => savedVals.get(e)!);
  // The staged part: inputs are the known inputs, the saved values and the unknown inputs; it
  // recomputes the residuals from them, then runs the unknown part.
  const unkTracers = tracers.filter((t) => t.known === null);
  const nIn = knownIns.length;
  const nSaved = saved.length;
  const staged = traceFlat(
    (...xs) => {
      // As JAX lowers a differentiated remat with prevent_cse: the recomputation reads its inputs
      // through a barrier, so under jit it is not merged with the forward pass's own copy (which
      // would keep the forward intermediates alive: no memory saved).
      const recomputeIns = xs.slice(0, nIn + nSaved);
      const fed = params.preventCse && recomputeIns.length > 0 ? bind(optimizationBarrierP, recomputeIns, {}) : recomputeIns;
      const kin = fed.slice(0, nIn);
      const sv = fed.slice(nIn);
      const uin = xs.slice(nIn + nSaved);
      const m = new Map<JaxprEqn, Array[]>();
      let k = 0;
      for (const e of savedEqns) {
        m.set(e, sv.slice(k, k + e.outBinders.length));
        k += e.outBinders.length;
      }
      const res = evalWithSaved(known.jaxpr, known.consts, kin, m).slice(nKnownOut);
      return evalClosed(split.unknown, [...res, ...uin]);
    },
    [...knownIns.map((k) => k.aval), ...saved.map((s) => s.aval), ...unkTracers.map((t) => t.aval)],
    'remat',
  );
  const ins = [...knownIns, ...saved].map((v) => trace.pure(v) as PETracer);
  const uOuts = trace.stage(rematP, [...ins, ...unkTracers], { ...params, jaxpr: staged }, staged.outAvals);
  let ki = 0;
  let ui = 0;
  return split.outUnknowns.map((u) => (u ? uOuts[ui++] : kOuts[ki++]));
}) satisfies PartialEvalRule;

export interface CheckpointOptions {
  /** Which intermediates to keep for the backward pass (default: nothing_saveable). */
  policy?: SaveablePolicy | keyof typeof byName;
  /**
   * Keep a compiler from merging the backward pass's recomputation with the forward pass
   * (default true, as JAX's `prevent_cse`): the recomputation reads its inputs through an
   * `optimization_barrier`. Without it, under `jit` common-subexpression elimination turns the
   * recomputation back into the forward values, which then stay alive until the backward pass.
   * `false` where that cannot happen (JAX's advice: inside `scan`).
   */
  preventCse?: boolean;
}

/** `jax.checkpoint`: `f` with its intermediates recomputed in the backward pass per `policy`. */
export function checkpoint<F extends (...args: any[]) => any>(f: F, opts: CheckpointOptions = {}): F {
  const p = opts.policy ?? 'nothing_saveable';
  const policy = typeof p === 'string' ? byName[p] : p;
  if (!policy) throw new Error(`checkpoint: unknown policy ${showValue(p)}; use one of ${Object.keys(byName).join(', ')} or a function`);
  const policyName = typeof p === 'string' ? p : p.name || 'custom';
  const preventCse = opts.preventCse ?? true;
  if (typeof preventCse !== 'boolean') throw new Error(`checkpoint: preventCse must be a boolean, got ${showValue(preventCse)}`);
  return ((...args: unknown[]) => {
    const [leaves, inTree] = arrayLeaves(args, 'checkpoint');
    let outTree: tree.TreeDef | null = null;
    const c = traceFlat((...xs) => {
      const [o, ot] = arrayLeaves(f(...(tree.unflatten(inTree, xs) as unknown[])), 'checkpoint');
      outTree = ot;
      return o;
    }, leaves.map((l) => l.aval), 'checkpoint');
    const j = c.jaxpr;
    const hoisted = c.consts.length ? new ClosedJaxpr(new Jaxpr([], [...j.constvars, ...j.invars], j.eqns, j.outs), []) : c;
    const outs = bind(rematP, [...c.consts, ...leaves], { jaxpr: hoisted, policy, policyName, preventCse } satisfies RematParams);
    return tree.unflatten(outTree!, outs);
  }) as F;
}
export const remat = checkpoint;

