/**
 * Tracing Python-style functions to a jaxpr (`makeJaxpr`). A `JaxprTrace` is a dynamic trace:
 * every primitive bound while it is active (even on constants) is recorded as an equation
 * instead of being run. Values from outside (concrete arrays, tracers of enclosing
 * transformations) become constvars; scalar constants become inline literals. Shape errors
 * surface here from each primitive's shape rule, naming the primitive and the shapes.
 */
import { Array } from '../array';
import type { DType } from '../dtype';
import type { Primitive, ShapedArray } from '../primitive';
import * as tree from '../tree';
import { type Atom, ClosedJaxpr, Jaxpr, type JaxprEqn, Lit, Var } from './jaxpr';
import { type MainTrace, Trace, Tracer, withMain } from './core';
import { describeValue } from '../describe';
import { checkArrayBytes } from '../sizeGuard';

export class JaxprTracer extends Tracer {
  constructor(
    trace: JaxprTrace,
    aval: ShapedArray,
    readonly v: Var,
  ) {
    super(trace, aval);
  }
}

export class JaxprTrace extends Trace {
  readonly eqns: JaxprEqn[] = [];
  /** Constants lifted into the trace, keyed by the outside value. */
  readonly consts = new Map<Array, JaxprTracer>();

  constructor(main: MainTrace) {
    super(main);
  }

  newArg(aval: ShapedArray): JaxprTracer {
    return new JaxprTracer(this, aval, new Var(aval));
  }

  pure(x: Array): Tracer {
    let t = this.consts.get(x);
    if (t === undefined) {
      t = new JaxprTracer(this, x.aval, new Var(x.aval));
      this.consts.set(x, t);
    }
    return t;
  }

  protected process(prim: Primitive, tracers: Tracer[], params: any): Array[] {
    const inAvals = tracers.map((t) => t.aval);
    const outAvals = prim.abstractEval(inAvals, params);
    for (const a of outAvals) checkArrayBytes(prim.name, a.shape, a.dtype);
    const outs = outAvals.map((a) => new JaxprTracer(this, a, new Var(a)));
    this.eqns.push({ prim, inputs: tracers.map((t) => (t as JaxprTracer).v), params, outBinders: outs.map((o) => o.v) });
    return outs;
  }

  /** Assembles the jaxpr from the recorded equations. Scalar concrete constants become literals. */
  build(ins: JaxprTracer[], outs: Array[]): ClosedJaxpr {
    const outTracers = outs.map((o) => this.fullRaise(o) as JaxprTracer);
    const lits = new Map<Var, Lit>();
    const constvars: Var[] = [];
    const constvals: Array[] = [];
    for (const [val, t] of this.consts) {
      if (val._trace === null && val.ndim === 0 && !val.isDisposed) lits.set(t.v, new Lit(val));
      else {
        constvars.push(t.v);
        constvals.push(val);
      }
    }
    const sub = (a: Var): Atom => lits.get(a) ?? a;
    const eqns = lits.size === 0 ? this.eqns : this.eqns.map((e) => ({ ...e, inputs: e.inputs.map((a) => (a instanceof Var ? sub(a) : a)) }));
    const outAtoms = outTracers.map((t) => sub(t.v));
    return new ClosedJaxpr(new Jaxpr(constvars, ins.map((t) => t.v), eqns, outAtoms), constvals);
  }
}

/** Traces a flat function at the given abstract inputs. */
export function traceFlat(fn: (...args: Array[]) => Array[], inAvals: readonly ShapedArray[], name = 'makeJaxpr'): ClosedJaxpr {
  return withMain(
    name,
    (m) => new JaxprTrace(m),
    (trace) => {
      const ins = inAvals.map((a) => trace.newArg(a));
      const outs = fn(...ins);
      return trace.build(ins, outs);
    },
    true,
  );
}

/** An abstract argument (JAX's ShapeDtypeStruct). */
export interface ShapeDtypeStruct {
  readonly shape: readonly number[];
  readonly dtype: DType;
  readonly weakType?: boolean;
}

export function isShapeDtypeStruct(x: unknown): x is ShapeDtypeStruct {
  return typeof x === 'object' && x !== null && !(x instanceof Array) && globalThis.Array.isArray((x as ShapeDtypeStruct).shape) && typeof (x as ShapeDtypeStruct).dtype === 'string';
}

export function avalOf(x: unknown, what: string): ShapedArray {
  if (x instanceof Array) return x.aval;
  if (isShapeDtypeStruct(x)) return { shape: [...x.shape], dtype: x.dtype, weakType: x.weakType ?? false };
  throw new TypeError(`${what}: arguments must be Arrays or {shape, dtype} structs (pytrees of them); got ${x === null ? 'null' : typeof x}`);
}

/** Leaves of a pytree of arguments, treating {shape, dtype} structs as leaves. */
export function flattenArgs(args: unknown): [unknown[], tree.TreeDef] {
  return tree.flatten(args, { isLeaf: (x) => x instanceof Array || isShapeDtypeStruct(x) });
}

/** The jaxpr and output structure of `f` at these arguments. */
export interface TracedJaxpr extends ClosedJaxpr {
  readonly outTree: tree.TreeDef;
}

/**
 * `jax.make_jaxpr`: `makeJaxpr(f)(...args)` traces `f` at the arguments' shapes and dtypes and
 * returns the closed jaxpr (print it with `toString()`). Arguments are pytrees of Arrays or
 * `{shape, dtype}` structs.
 */
export function makeJaxpr(f: (...args: any[]) => unknown): (...args: unknown[]) => TracedJaxpr {
  return (...args: unknown[]) => {
    const [leaves, inTree] = flattenArgs(args);
    const avals = leaves.map((l) => avalOf(l, 'makeJaxpr'));
    let outTree: tree.TreeDef | null = null;
    const closed = traceFlat((...ins) => {
      const out = f(...(tree.unflatten(inTree, ins) as unknown[]));
      const [outLeaves, ot] = tree.flatten(out);
      outTree = ot;
      return outLeaves.map((l) => asOutput(l, 'makeJaxpr'));
    }, avals);
    return Object.assign(closed, { outTree: outTree! });
  };
}

/** Checks that a function output leaf is an Array (numbers are converted as weak scalars by callers). */
export function asOutput(x: unknown, what: string): Array {
  if (x instanceof Array) return x;
  throw new TypeError(`${what}: the function must return a pytree of Arrays; got a leaf ${describeValue(x)}`);
}
