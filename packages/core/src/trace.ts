/**
 * `bind`: the one entry every primitive application goes through. With no trace active it
 * evaluates the primitive on the current backend (checking shapes with the primitive's shape
 * rule first). The transformations (jvp, vmap, jaxpr tracing) plug in here: a Tracer is an
 * Array subclass whose `_trace` is a Trace, and the innermost trace among the arguments (or the
 * dynamic trace, when one is set) processes the primitive.
 */
import { Array, type TraceLike } from './array';
import { getBackend } from './backend';
import type { StorageArray } from './dtype';
import type { Primitive } from './primitive';
import { sizeOf } from './shape';
import { checkArrayBytes } from './sizeGuard';

export interface Trace extends TraceLike {
  processPrimitive(prim: Primitive, args: Array[], params: unknown): Array[];
}

let dynamicTrace: Trace | null = null;

/** Sets the trace that sees every bind, even of constants (used by jaxpr tracing). */
export function setDynamicTrace(t: Trace | null): Trace | null {
  const prev = dynamicTrace;
  dynamicTrace = t;
  return prev;
}

export function bind(prim: Primitive, args: Array[], params: unknown): Array[] {
  let top: Trace | null = dynamicTrace;
  for (const a of args) {
    const t = a._trace as Trace | null;
    if (t !== null && (top === null || t.level > top.level)) top = t;
  }
  if (top !== null) return top.processPrimitive(prim, args, params);
  return evalPrimitive(prim, args, params);
}

export function bind1(prim: Primitive, args: Array[], params: unknown): Array {
  return bind(prim, args, params)[0];
}

/**
 * Runs single-output primitive `prim` on concrete arrays on the current backend with its result
 * written into `out` (host storage of the result's dtype and element count, owned by the caller,
 * e.g. a compiler's reused result buffer or a view of its arena); the returned Array shares
 * `out`. Returns null when the backend cannot write this primitive into caller storage (see
 * `Backend.executeInto`): run `evalPrimitive` instead.
 */
export function evalPrimitiveInto(prim: Primitive, args: Array[], params: unknown, out: StorageArray): Array | null {
  const backend = getBackend();
  if (backend.executeInto === undefined || prim.rules.eval !== undefined) return null;
  const avals = args.map((a) => a.aval);
  const outAvals = prim.abstractEval(avals, params);
  if (outAvals.length !== 1) return null;
  const n = sizeOf(outAvals[0].shape);
  if (out.length !== n) throw new RangeError(`evalPrimitiveInto(${prim.name}): the result has ${n} elements (${outAvals[0].dtype}[${outAvals[0].shape.join(',')}]) but the destination holds ${out.length}`);
  const bufs = args.map((a) => a._bufferOn(backend));
  if (!backend.executeInto(prim, bufs, avals, params, outAvals[0], out)) return null;
  return new Array(outAvals[0], backend, out);
}

/**
 * `evalPrimitiveInto` for a primitive with several results: result i written into `outs[i]`
 * (host storage of its dtype and element count, owned by the caller); the returned Arrays share
 * them. Returns null when the backend cannot (see `Backend.executeIntoAll`): run
 * `evalPrimitive` instead.
 */
export function evalPrimitiveIntoAll(prim: Primitive, args: Array[], params: unknown, outs: readonly StorageArray[]): Array[] | null {
  const backend = getBackend();
  if (backend.executeIntoAll === undefined || prim.rules.eval !== undefined) return null;
  const avals = args.map((a) => a.aval);
  const outAvals = prim.abstractEval(avals, params);
  if (outAvals.length !== outs.length) throw new RangeError(`evalPrimitiveIntoAll(${prim.name}): the primitive has ${outAvals.length} results but ${outs.length} destinations were given`);
  outAvals.forEach((o, i) => {
    const n = sizeOf(o.shape);
    if (outs[i].length !== n) throw new RangeError(`evalPrimitiveIntoAll(${prim.name}): result ${i} has ${n} elements (${o.dtype}[${o.shape.join(',')}]) but its destination holds ${outs[i].length}`);
  });
  const bufs = args.map((a) => a._bufferOn(backend));
  if (!backend.executeIntoAll(prim, bufs, avals, params, outAvals, outs as StorageArray[])) return null;
  return outAvals.map((o, i) => new Array(o, backend, outs[i]));
}

/**
 * Runs a primitive on concrete arrays on the current backend. Higher-order primitives (jit's
 * `pjit`, control flow, custom rules) carry `rules.eval`, which runs their sub-programs with
 * Arrays instead of one backend kernel.
 */
export function evalPrimitive(prim: Primitive, args: Array[], params: unknown): Array[] {
  const evalRule = prim.rules.eval as ((args: Array[], params: unknown) => Array[]) | undefined;
  if (evalRule !== undefined) return evalRule(args, params);
  const backend = getBackend();
  const avals = args.map((a) => a.aval);
  const outAvals = prim.abstractEval(avals, params);
  for (let i = 0; i < outAvals.length; i++) checkArrayBytes(prim.name, outAvals[i].shape, outAvals[i].dtype);
  const bufs = args.map((a) => a._bufferOn(backend));
  const outs = backend.execute(prim, bufs, avals, params, outAvals);
  return outs.map((b, i) => new Array(outAvals[i], backend, b));
}
