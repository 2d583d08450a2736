/**
 * A closed jaxpr as plain data, so that a device worker can run a traced program: variables
 * become numbers, primitives their names, literals and constants stay Arrays (which `pack`
 * then sends as raw storage), and sub-jaxprs in parameters (jit, control flow) are encoded the
 * same way. Parameters must be plain data; a function or class instance (a custom_jvp rule, a
 * Sharding) cannot cross a thread and is an error naming the primitive.
 */
import { type Array, ClosedJaxpr, isArray } from '@tpukit/core';
import { Jaxpr, type JaxprEqn, Lit, type ShapedArray, Var, getPrimitive } from '@tpukit/core/internal';

type Atom = Var | Lit;

export interface WireJaxpr {
  readonly avals: ShapedArray[];
  readonly constvars: number[];
  readonly invars: number[];
  readonly eqns: { prim: string; inputs: unknown[]; params: unknown; outs: number[] }[];
  readonly outs: unknown[];
}

function encodeJaxpr(j: Jaxpr): WireJaxpr {
  const ids = new Map<Var, number>();
  const avals: ShapedArray[] = [];
  const id = (v: Var): number => {
    let k = ids.get(v);
    if (k === undefined) {
      ids.set(v, (k = avals.length));
      avals.push({ shape: [...v.aval.shape], dtype: v.aval.dtype, weakType: v.aval.weakType });
    }
    return k;
  };
  const atom = (a: Atom): unknown => (a instanceof Lit ? { $lit: a.val } : id(a));
  const constvars = j.constvars.map(id);
  const invars = j.invars.map(id);
  const eqns = j.eqns.map((e) => ({ prim: e.prim.name, inputs: e.inputs.map(atom), params: encodeParam(e.params, e.prim.name), outs: e.outBinders.map(id) }));
  return { avals, constvars, invars, eqns, outs: j.outs.map(atom) };
}

function encodeParam(v: unknown, prim: string): unknown {
  if (v === null || v === undefined || typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean') return v;
  if (isArray(v)) return v;
  if (v instanceof ClosedJaxpr) return { $closed: encodeJaxpr(v.jaxpr), consts: v.consts };
  if (v instanceof Jaxpr) return { $jaxpr: encodeJaxpr(v) };
  if (globalThis.Array.isArray(v)) return v.map((x) => encodeParam(x, prim));
  if (typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
    return Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, encodeParam(x, prim)]));
  }
  throw new TypeError(`shardMap on devices: primitive ${prim} has a ${typeof v === 'function' ? 'function' : ((v as object).constructor?.name ?? typeof v)} parameter, which cannot be sent to a device thread`);
}

/** A closed jaxpr as plain data plus Arrays. */
export function encodeClosed(c: ClosedJaxpr): unknown {
  return { $closed: encodeJaxpr(c.jaxpr), consts: c.consts };
}

function decodeJaxpr(w: WireJaxpr): Jaxpr {
  const vars = w.avals.map((a) => new Var(a));
  const atom = (a: unknown): Atom => (typeof a === 'number' ? vars[a] : new Lit((a as { $lit: Array }).$lit));
  const eqns: JaxprEqn[] = w.eqns.map((e) => ({ prim: getPrimitive(e.prim), inputs: e.inputs.map(atom), params: decodeParam(e.params), outBinders: e.outs.map((k) => vars[k]) }));
  return new Jaxpr(w.constvars.map((k) => vars[k]), w.invars.map((k) => vars[k]), eqns, w.outs.map(atom));
}

function decodeParam(v: unknown): unknown {
  if (v === null || typeof v !== 'object' || isArray(v)) return v;
  if (globalThis.Array.isArray(v)) return v.map(decodeParam);
  const o = v as Record<string, unknown>;
  if (o.$closed) return new ClosedJaxpr(decodeJaxpr(o.$closed as WireJaxpr), o.consts as Array[]);
  if (o.$jaxpr) return decodeJaxpr(o.$jaxpr as WireJaxpr);
  return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, decodeParam(x)]));
}

/** The inverse of `encodeClosed`. */
export function decodeClosed(w: unknown): ClosedJaxpr {
  return decodeParam(w) as ClosedJaxpr;
}
