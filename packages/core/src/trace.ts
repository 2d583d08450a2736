/**
 * `bind`: the one entry every primitive application goes through. With no trace active it
 * evaluates the primitive on the current backend (checking shapes with the primitive's shape
 * rule first). The transformations (jvp, vmap, jaxpr tracing) plug in here: a Tracer is an
 * Array subclass whose `_trace` is a Trace, and the innermost trace among the arguments (or the
 * dynamic trace, when one is set) processes the primitive.
 */
import { Array, type TraceLike } from './array';
import { getBackend, type ResultBands } from './backend';
import type { StorageArray } from './dtype';
import type { Primitive } from './primitive';
import { sameAval, type ShapedArray } from './aval';
import { frozenShape, sizeOf } from './shape';
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
 * What `evalPrimitiveInto(All)` worked out for one call site (a compiled program's instruction),
 * reused while the arguments' avals stay the same: the argument avals, the result avals the
 * primitive's shape rule gave for them, and a scratch list for the backend buffers. Make one
 * per call site with `intoMemo()`; the result avals are recomputed when any argument's shape,
 * dtype or weak type changes.
 */
export interface IntoMemo {
  /** @internal */ prim: Primitive | null;
  /** @internal */ params: unknown;
  /** @internal */ avals: ShapedArray[];
  /** @internal */ outAvals: ShapedArray[];
  /** @internal */ bufs: unknown[];
  /** @internal */ relay: BandRelay | null;
}

/** A fresh memo for one call site of `evalPrimitiveInto(All)`. */
export function intoMemo(): IntoMemo {
  return { prim: null, params: undefined, avals: [], outAvals: [], bufs: [], relay: null };
}

/**
 * Passes a backend's finished bands of a result on to the caller's `ResultBands` (reused per
 * call site): checks that they follow each other from 0 and stay inside the result, and
 * remembers how far they reached, so that `evalPrimitiveInto` hands over the rest at the end.
 */
interface BandRelay {
  bands: ResultBands | null;
  done: number;
  n: number;
  name: string;
  readonly fn: ResultBands;
}

function bandRelay(): BandRelay {
  const r: BandRelay = {
    bands: null,
    done: 0,
    n: 0,
    name: '',
    fn: (e0, e1) => {
      if (e0 !== r.done || !(e1 >= e0 && e1 <= r.n)) throw new RangeError(`evalPrimitiveInto(${r.name}): the backend handed over elements [${e0}, ${e1}) of ${r.n} after [0, ${r.done})`);
      if (e1 > e0) r.bands!(e0, e1);
      r.done = e1;
    },
  };
  return r;
}

/**
 * The result avals of `prim` on `args`: the memo's when it holds them for this primitive, these
 * parameters and equal argument avals (no allocation), else the shape rule's (then kept in it).
 */
function outAvalsOf(prim: Primitive, args: Array[], params: unknown, memo: IntoMemo | undefined): { avals: ShapedArray[]; outAvals: ShapedArray[] } {
  if (memo === undefined) {
    const avals = args.map((a) => a.aval);
    return { avals, outAvals: prim.abstractEval(avals, params) };
  }
  let hit = memo.prim === prim && memo.params === params && memo.avals.length === args.length;
  for (let i = 0; hit && i < args.length; i++) hit = sameAval(args[i].aval, memo.avals[i]);
  if (!hit) {
    const avals = args.map((a) => a.aval);
    // (Frozen copies of the result shapes: the Arrays made from them per call share them.)
    // (A rule's own list is copied unless frozen: a shape rule may return a list it keeps, such as a program's outAvals.)
    const given = prim.abstractEval(avals, params);
    const outs: ShapedArray[] = new globalThis.Array(given.length);
    for (let i = 0; i < given.length; i++) outs[i] = { shape: frozenShape(given[i].shape), dtype: given[i].dtype, weakType: given[i].weakType };
    memo.outAvals = outs;
    memo.avals = avals;
    memo.prim = prim;
    memo.params = params;
  }
  return memo;
}

/** The arguments' buffers on `backend`: in the memo's scratch list when there is one (cleared by `releaseBufs`). */
function bufsOf(args: Array[], backend: ReturnType<typeof getBackend>, memo: IntoMemo | undefined): unknown[] {
  const bufs = memo === undefined ? new globalThis.Array<unknown>(args.length) : memo.bufs;
  if (bufs.length !== args.length) bufs.length = args.length;
  for (let i = 0; i < args.length; i++) bufs[i] = args[i]._bufferOn(backend);
  return bufs;
}

const releaseBufs = (memo: IntoMemo | undefined): void => {
  if (memo !== undefined) memo.bufs.fill(null);
};

/**
 * Runs single-output primitive `prim` on concrete arrays on the current backend with its result
 * written into `out` (host storage of the result's dtype and element count, owned by the caller,
 * e.g. a compiler's reused result buffer or a view of its arena); the returned Array shares
 * `out`. Returns null when the backend cannot write this primitive into caller storage (see
 * `Backend.executeInto`): run `evalPrimitive` instead. `memo` (from `intoMemo()`, one per call
 * site) skips the shape rule while the arguments' avals repeat.
 *
 * `bands` (optional) receives the result in bands of elements [e0, e1) of `out`, each as soon
 * as it is final: in order, together exactly [0, n) once, all before this returns (none when
 * it returns null), on the calling thread. A backend that computes a product by rows may hand
 * over its finished rows while the rest is still being computed (the systolic backend's
 * dot_general on its thread pool, between the calling thread's tiles), so an elementwise
 * epilogue runs over them there, while the other threads still multiply; whatever the backend
 * did not hand over comes as one last band. The callback must not write `out` outside its band nor
 * read `out` past it.
 */
export function evalPrimitiveInto(prim: Primitive, args: Array[], params: unknown, out: StorageArray, memo?: IntoMemo, bands?: ResultBands): Array | null {
  const backend = getBackend();
  if (backend.executeInto === undefined || prim.rules.eval !== undefined) return null;
  const { avals, outAvals } = outAvalsOf(prim, args, params, memo);
  if (outAvals.length !== 1) return null;
  const o = outAvals[0];
  const n = sizeOf(o.shape);
  if (out.length !== n) throw new RangeError(`evalPrimitiveInto(${prim.name}): the result has ${n} elements (${o.dtype}[${o.shape.join(',')}]) but the destination holds ${out.length}`);
  let relay: BandRelay | null = null;
  if (bands !== undefined) {
    if (typeof bands !== 'function') throw new TypeError(`evalPrimitiveInto(${prim.name}): bands must be a function (e0, e1) => void; got ${typeof bands}`);
    relay = memo === undefined ? bandRelay() : (memo.relay ??= bandRelay());
    relay.bands = bands;
    relay.done = 0;
    relay.n = n;
    relay.name = prim.name;
  }
  const bufs = bufsOf(args, backend, memo);
  let ok: boolean;
  try {
    ok = backend.executeInto(prim, bufs, avals, params, o, out, relay?.fn);
  } finally {
    releaseBufs(memo);
    if (relay !== null) relay.bands = null;
  }
  if (relay !== null) {
    if (!ok && relay.done > 0) throw new Error(`evalPrimitiveInto(${prim.name}): the backend handed over ${relay.done} of ${n} elements and then declined the primitive`);
    if (ok && relay.done < n) bands!(relay.done, n);
  }
  return ok ? new Array(o, backend, out) : null;
}

/**
 * `evalPrimitiveInto` for a primitive with several results: result i written into `outs[i]`
 * (host storage of its dtype and element count, owned by the caller); the returned Arrays share
 * them. Returns null when the backend cannot (see `Backend.executeIntoAll`): run
 * `evalPrimitive` instead. `memo` as for `evalPrimitiveInto`.
 */
export function evalPrimitiveIntoAll(prim: Primitive, args: Array[], params: unknown, outs: readonly StorageArray[], memo?: IntoMemo): Array[] | null {
  const backend = getBackend();
  if (backend.executeIntoAll === undefined || prim.rules.eval !== undefined) return null;
  const { avals, outAvals } = outAvalsOf(prim, args, params, memo);
  if (outAvals.length !== outs.length) throw new RangeError(`evalPrimitiveIntoAll(${prim.name}): the primitive has ${outAvals.length} results but ${outs.length} destinations were given`);
  for (let i = 0; i < outAvals.length; i++) {
    const o = outAvals[i];
    const n = sizeOf(o.shape);
    if (outs[i].length !== n) throw new RangeError(`evalPrimitiveIntoAll(${prim.name}): result ${i} has ${n} elements (${o.dtype}[${o.shape.join(',')}]) but its destination holds ${outs[i].length}`);
  }
  const bufs = bufsOf(args, backend, memo);
  const ok = backend.executeIntoAll(prim, bufs, avals, params, outAvals, outs as StorageArray[]);
  releaseBufs(memo);
  return ok ? outAvals.map((o, i) => new Array(o, backend, outs[i])) : null;
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
  // (Loops rather than arrow functions: this runs per primitive of every call; see tree.ts on closures.)
  const avals: ShapedArray[] = new globalThis.Array(args.length);
  const bufs: unknown[] = new globalThis.Array(args.length);
  for (let i = 0; i < args.length; i++) avals[i] = args[i].aval;
  const outAvals = prim.abstractEval(avals, params);
  for (let i = 0; i < outAvals.length; i++) checkArrayBytes(prim.name, outAvals[i].shape, outAvals[i].dtype);
  for (let i = 0; i < args.length; i++) bufs[i] = args[i]._bufferOn(backend);
  const outs = backend.execute(prim, bufs, avals, params, outAvals);
  const res: Array[] = new globalThis.Array(outs.length);
  for (let i = 0; i < outs.length; i++) res[i] = new Array(outAvals[i], backend, outs[i]);
  return res;
}
