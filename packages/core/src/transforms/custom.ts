/**
 * User-defined derivative rules and gradient stopping: `stopGradient`, `customJvp`,
 * `customVjp` (jax.lax.stop_gradient, jax.custom_jvp, jax.custom_vjp). Each is a primitive that
 * carries the traced function plus the user's rule, so it stages into jaxprs and composes:
 * - `customJvp`: jvp calls the rule; vmap batches both the function and the rule; reverse mode
 *   linearizes the rule (so the rule must be linear in the tangents, as in JAX).
 * - `customVjp`: jvp runs `fwd` and emits a `custom_lin` equation holding the residuals; only
 *   transposing it (reverse mode) calls `bwd`. Forward mode through a customVjp function is an
 *   error, as in JAX. vmap batches the function, `fwd` and `bwd`.
 */
import type { Array } from '../array';
import { definePrimitive, type ShapedArray } from '../primitive';
import { bind } from '../trace';
import * as tree from '../tree';
import { type BatchRule, moveBdim, vmapFlat } from './batching';
import { evalClosed } from './eval';
import { arrayLeaves } from './leaves';
import { avalStr, ClosedJaxpr, Jaxpr } from './jaxpr';
import { NOT_DIFFERENTIABLE, type JvpRule } from './jvp';
import { NON_LINEAR, type TransposeRule } from './transpose';
import { traceFlat } from './tracing';
import { instantiate, zerosOf } from './zeros';

// ---------------------------------------------------------------------------------------------
// stop_gradient

export const stopGradientP = definePrimitive<Record<string, never>>({
  name: 'stop_gradient',
  stablehlo: 'optimization_barrier',
  elementwise: { arity: 1, transcendental: false },
  abstractEval: ([x]) => [x],
  impl: ([x]) => [x.data.slice()],
});
stopGradientP.rules.eval = (args: Array[]) => args;
stopGradientP.rules.jvp = NOT_DIFFERENTIABLE;
stopGradientP.rules.transpose = NON_LINEAR;
stopGradientP.rules.batch = (([x], [d]) => [[bind(stopGradientP, [x], {})[0]], [d]]) satisfies BatchRule;

/** `jax.lax.stop_gradient`: the identity, with zero derivative. Works on pytrees. */
export function stopGradient<T>(x: T): T {
  const [leaves, def] = arrayLeaves(x, 'stopGradient');
  return tree.unflatten(def, leaves.map((l) => bind(stopGradientP, [l], {})[0])) as T;
}

// ---------------------------------------------------------------------------------------------
// custom_jvp

type FlatJvp = (primals: Array[], tangents: Array[]) => [Array[], Array[]];

interface CustomJvpParams {
  readonly fun: ClosedJaxpr;
  readonly jvp: FlatJvp;
  readonly name: string;
}

export const customJvpCallP = definePrimitive<CustomJvpParams>({
  name: 'custom_jvp_call',
  abstractEval: (_avals, { fun }) => fun.outAvals,
  impl() {
    throw new Error('custom_jvp_call: runs through its eval rule');
  },
});
customJvpCallP.rules.eval = (args: Array[], { fun }: CustomJvpParams) => evalClosed(fun, args);
customJvpCallP.rules.jvp = ((primals, tangents, { jvp, fun, name }: CustomJvpParams) => {
  const [outs, tOuts] = jvp(primals, tangents.map((t, i) => instantiate(t, primals[i].aval)));
  checkAvals(`customJvp ${name}: the jvp rule's primal outputs`, outs.map((o) => o.aval), fun.outAvals);
  checkAvals(`customJvp ${name}: the jvp rule's tangent outputs`, tOuts.map((o) => o.aval), fun.outAvals);
  return [outs, tOuts];
}) satisfies JvpRule;
customJvpCallP.rules.transpose = NON_LINEAR;
customJvpCallP.rules.batch = ((vals, dims, { fun, jvp, name }: CustomJvpParams, n) => {
  const args = vals.map((v, i) => moveBdim(v, dims[i], 0, n));
  const bfun = traceFlat((...xs) => vmapFlat((...ys) => evalClosed(fun, ys), xs, xs.map(() => 0), n, () => 0), args.map((a) => a.aval), 'vmap');
  const k = vals.length;
  const bjvp: FlatJvp = (ps, ts) => {
    const outs = vmapFlat((...ys) => {
      const [o, t] = jvp(ys.slice(0, k), ys.slice(k));
      return [...o, ...t];
    }, [...ps, ...ts], [...ps, ...ts].map(() => 0), n, () => 0);
    return [outs.slice(0, outs.length / 2), outs.slice(outs.length / 2)];
  };
  return [bind(customJvpCallP, args, { fun: bfun, jvp: bjvp, name }), bfun.outAvals.map(() => 0)];
}) satisfies BatchRule;

function checkAvals(what: string, got: ShapedArray[], want: ShapedArray[]): void {
  if (got.length !== want.length || got.some((g, i) => g.dtype !== want[i].dtype || g.shape.join() !== want[i].shape.join())) {
    throw new TypeError(`${what} are (${got.map(avalStr).join(', ')}) but the function returns (${want.map(avalStr).join(', ')})`);
  }
}

export interface CustomJvpFunction<F extends (...args: any[]) => any> {
  (...args: Parameters<F>): ReturnType<F>;
  /** Sets the rule: `(primals, tangents) => [primalOut, tangentOut]` (pytrees like f's output). */
  defjvp(rule: (primals: Parameters<F>, tangents: Parameters<F>) => [unknown, unknown]): CustomJvpFunction<F>;
}

/** `jax.custom_jvp`: `customJvp(f)` then `.defjvp((primals, tangents) => [out, tangentOut])`. */
export function customJvp<F extends (...args: any[]) => any>(f: F): CustomJvpFunction<F> {
  let rule: ((primals: any, tangents: any) => [unknown, unknown]) | null = null;
  const name = f.name || 'fn';
  const wrapped = ((...args: unknown[]) => {
    if (!rule) throw new Error(`customJvp ${name}: no rule defined; call .defjvp(rule) first`);
    const [leaves, inTree] = arrayLeaves(args, `customJvp ${name}`);
    let outTree: tree.TreeDef | null = null;
    const fun = traceFlat((...xs) => {
      const [o, ot] = arrayLeaves(f(...(tree.unflatten(inTree, xs) as unknown[])), `customJvp ${name}`);
      outTree = ot;
      return o;
    }, leaves.map((l) => l.aval), 'customJvp');
    const r = rule;
    const jvp: FlatJvp = (ps, ts) => {
      const [o, t] = r(tree.unflatten(inTree, ps), tree.unflatten(inTree, ts));
      return [arrayLeaves(o, `customJvp ${name} rule`)[0], arrayLeaves(t, `customJvp ${name} rule`)[0]];
    };
    const consts = fun.consts;
    const hoisted = hoistFun(fun);
    const outs = bind(customJvpCallP, [...consts, ...leaves], {
      fun: hoisted,
      jvp: (ps: Array[], ts: Array[]) => jvp(ps.slice(consts.length), ts.slice(consts.length)),
      name,
    });
    return tree.unflatten(outTree!, outs);
  }) as unknown as CustomJvpFunction<F>;
  wrapped.defjvp = (r) => {
    rule = r as typeof rule;
    return wrapped;
  };
  return wrapped;
}

function hoistFun(c: ClosedJaxpr): ClosedJaxpr {
  if (c.consts.length === 0) return c;
  const j = c.jaxpr;
  return new ClosedJaxpr(new Jaxpr([], [...j.constvars, ...j.invars], j.eqns, j.outs), []);
}

// ---------------------------------------------------------------------------------------------
// custom_vjp

type FlatFwd = (primals: Array[]) => [Array[], Array[]];
type FlatBwd = (res: Array[], cts: Array[]) => Array[];

interface CustomVjpParams {
  readonly fun: ClosedJaxpr;
  readonly fwd: FlatFwd;
  readonly bwd: FlatBwd;
  readonly name: string;
}

export const customVjpCallP = definePrimitive<CustomVjpParams>({
  name: 'custom_vjp_call',
  abstractEval: (_avals, { fun }) => fun.outAvals,
  impl() {
    throw new Error('custom_vjp_call: runs through its eval rule');
  },
});

interface CustomLinParams {
  readonly bwd: FlatBwd;
  readonly numRes: number;
  readonly outAvals: ShapedArray[];
  readonly name: string;
}

/** The linear map of a customVjp function at a point: transposing it calls `bwd`. */
export const customLinP = definePrimitive<CustomLinParams>({
  name: 'custom_lin',
  abstractEval: (_avals, { outAvals }) => outAvals,
  impl() {
    throw new Error('custom_lin: runs through its eval rule');
  },
});

customVjpCallP.rules.eval = (args: Array[], { fun }: CustomVjpParams) => evalClosed(fun, args);
customVjpCallP.rules.transpose = NON_LINEAR;
customVjpCallP.rules.jvp = ((primals, tangents, { fwd, bwd, fun, name }: CustomVjpParams) => {
  const [outs, res] = fwd(primals);
  checkAvals(`customVjp ${name}: fwd's outputs`, outs.map((o) => o.aval), fun.outAvals);
  const tOuts = bind(customLinP, [...res, ...tangents.map((t, i) => instantiate(t, primals[i].aval))], { bwd, numRes: res.length, outAvals: fun.outAvals, name });
  return [outs, tOuts];
}) satisfies JvpRule;
customVjpCallP.rules.batch = ((vals, dims, { fun, fwd, bwd, name }: CustomVjpParams, n) => {
  const args = vals.map((v, i) => moveBdim(v, dims[i], 0, n));
  const bfun = traceFlat((...xs) => vmapFlat((...ys) => evalClosed(fun, ys), xs, xs.map(() => 0), n, () => 0), args.map((a) => a.aval), 'vmap');
  let nOut = 0;
  const bfwd: FlatFwd = (ps) => {
    const all = vmapFlat((...ys) => {
      const [o, r] = fwd(ys);
      nOut = o.length;
      return [...o, ...r];
    }, ps, ps.map(() => 0), n, () => 0);
    return [all.slice(0, nOut), all.slice(nOut)];
  };
  const bbwd: FlatBwd = (res, cts) => vmapFlat((...ys) => bwd(ys.slice(0, res.length), ys.slice(res.length)), [...res, ...cts], [...res, ...cts].map(() => 0), n, () => 0);
  return [bind(customVjpCallP, args, { fun: bfun, fwd: bfwd, bwd: bbwd, name }), bfun.outAvals.map(() => 0)];
}) satisfies BatchRule;

customLinP.rules.eval = (_args: Array[], { name }: CustomLinParams) => {
  throw new Error(`customVjp ${name}: forward-mode differentiation (jvp, jacfwd) of a customVjp function is not supported, as in JAX; use customJvp`);
};
customLinP.rules.jvp = ((_p, _t, { name }: CustomLinParams) => {
  throw new Error(`customVjp ${name}: forward-mode differentiation of a customVjp function is not supported, as in JAX; use customJvp`);
}) satisfies JvpRule;
customLinP.rules.transpose = ((cts, args, { bwd, numRes, outAvals, name }: CustomLinParams) => {
  const res = args.slice(0, numRes) as Array[];
  const g = bwd(res, cts.map((c, i) => instantiate(c, outAvals[i])));
  const lin = args.slice(numRes);
  if (g.length !== lin.length) throw new Error(`customVjp ${name}: bwd returned ${g.length} cotangents for ${lin.length} primal inputs`);
  return [...res.map(() => null), ...g];
}) satisfies TransposeRule;
customLinP.rules.batch = ((vals, dims, params: CustomLinParams, n) => {
  const args = vals.map((v, i) => moveBdim(v, dims[i], 0, n));
  const { bwd, numRes } = params;
  const bbwd: FlatBwd = (res, cts) => vmapFlat((...ys) => bwd(ys.slice(0, numRes), ys.slice(numRes)), [...res, ...cts], [...res, ...cts].map(() => 0), n, () => 0);
  const outAvals = params.outAvals.map((a) => ({ ...a, shape: [n, ...a.shape] }));
  return [bind(customLinP, args, { ...params, bwd: bbwd, outAvals }), outAvals.map(() => 0)];
}) satisfies BatchRule;

export interface CustomVjpFunction<F extends (...args: any[]) => any> {
  (...args: Parameters<F>): ReturnType<F>;
  /**
   * Sets the rule: `fwd(...args) => [out, residuals]` and `bwd(residuals, ct) => cotangents`,
   * one per positional argument (each a pytree like the argument).
   */
  defvjp(fwd: (...args: Parameters<F>) => [unknown, unknown], bwd: (res: any, ct: any) => unknown[]): CustomVjpFunction<F>;
}

/** `jax.custom_vjp`: `customVjp(f)` then `.defvjp(fwd, bwd)`. */
export function customVjp<F extends (...args: any[]) => any>(f: F): CustomVjpFunction<F> {
  let rule: { fwd: (...a: any[]) => [unknown, unknown]; bwd: (res: any, ct: any) => unknown[] } | null = null;
  const name = f.name || 'fn';
  const wrapped = ((...args: unknown[]) => {
    if (!rule) throw new Error(`customVjp ${name}: no rule defined; call .defvjp(fwd, bwd) first`);
    const r = rule;
    const [leaves, inTree] = arrayLeaves(args, `customVjp ${name}`);
    let outTree: tree.TreeDef | null = null;
    const fun = traceFlat((...xs) => {
      const [o, ot] = arrayLeaves(f(...(tree.unflatten(inTree, xs) as unknown[])), `customVjp ${name}`);
      outTree = ot;
      return o;
    }, leaves.map((l) => l.aval), 'customVjp');
    const consts = fun.consts;
    const nc = consts.length;
    let resTree: tree.TreeDef | null = null;
    const fwd: FlatFwd = (ps) => {
      const [o, res] = r.fwd(...(tree.unflatten(inTree, ps.slice(nc)) as unknown[]));
      const [rl, rt] = arrayLeaves(res, `customVjp ${name} fwd residuals`);
      resTree = rt;
      return [arrayLeaves(o, `customVjp ${name} fwd`)[0], rl];
    };
    const bwd: FlatBwd = (res, cts) => {
      const g = r.bwd(tree.unflatten(resTree!, res), tree.unflatten(outTree!, cts));
      if (!globalThis.Array.isArray(g) || g.length !== args.length) {
        throw new TypeError(`customVjp ${name}: bwd must return an array with one cotangent per argument (${args.length}); got ${globalThis.Array.isArray(g) ? g.length : typeof g}`);
      }
      const [gl] = arrayLeaves(g.map((x, i) => x ?? tree.map((l: Array) => zerosOf(l.aval), args[i])), `customVjp ${name} bwd`);
      if (gl.length !== leaves.length) throw new TypeError(`customVjp ${name}: bwd's cotangents do not match the arguments' structure`);
      gl.forEach((c, i) => checkAvals(`customVjp ${name}: bwd's cotangent ${i}`, [c.aval], [leaves[i].aval]));
      return [...consts.map((c) => zerosOf(c.aval)), ...gl];
    };
    const outs = bind(customVjpCallP, [...consts, ...leaves], { fun: hoistFun(fun), fwd, bwd, name });
    return tree.unflatten(outTree!, outs);
  }) as unknown as CustomVjpFunction<F>;
  wrapped.defvjp = (fwd, bwd) => {
    rule = { fwd, bwd };
    return wrapped;
  };
  return wrapped;
}
