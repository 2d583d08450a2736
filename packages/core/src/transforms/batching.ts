/**
 * Batching (jax.vmap). A `BatchTracer` carries a value with one extra dimension, the batch
 * dimension `bdim` (or `null` when the value is the same for every batch member). Each
 * primitive's batching rule (`prim.rules.batch`, given where the primitive is defined) maps
 * batched operands to a batched result; most rules first move the batch dimension to the front
 * (`moveBdim`, lax/structural.ts). Higher-order primitives batch their sub-jaxprs (`vmapJaxpr`).
 * Nested vmaps are nested traces, each with its own batch dimension.
 */
import type { Array } from '../array';
import { type BatchRule, type BDim, type Primitive } from '../primitive';
import { moveBdim } from '../lax/structural';
import { fmt } from '../shape';
import { bind } from '../trace';
import * as tree from '../tree';
import { type MainTrace, Trace, Tracer, withMain } from './core';
import { evalJaxpr } from './eval';
import type { ClosedJaxpr } from './jaxpr';
import { arrayLeaves } from './leaves';
import { traceFlat } from './tracing';
import { showValue } from '../describe';

export type { BatchRule, BDim } from '../primitive';
export { moveBdim } from '../lax/structural';

/** The name of the axis whose batching rule is running (inherited by sub-jaxprs a rule batches). */
let ruleAxisName: string | null = null;

export class BatchTracer extends Tracer {
  constructor(
    trace: BatchTrace,
    readonly val: Array,
    readonly bdim: BDim,
  ) {
    super(trace, bdim === null ? val.aval : { shape: val.shape.filter((_, i) => i !== bdim), dtype: val.dtype, weakType: val.weakType });
  }
}

export class BatchTrace extends Trace {
  constructor(
    main: MainTrace,
    readonly axisSize: number,
    readonly axisName: string | null = null,
  ) {
    super(main);
  }

  pure(x: Array): Tracer {
    return new BatchTracer(this, x, null);
  }

  protected process(prim: Primitive, tracers: Tracer[], params: any): Array[] {
    const ts = tracers as BatchTracer[];
    const vals = ts.map((t) => t.val);
    const dims = ts.map((t) => t.bdim);
    if (dims.every((d) => d === null)) return bind(prim, vals, params);
    const rule = prim.rules.batch as BatchRule | undefined;
    if (!rule) throw new Error(`vmap: primitive ${prim.name} has no batching rule`);
    const prev = ruleAxisName;
    ruleAxisName = this.axisName;
    let outs: Array[];
    let outDims: BDim[];
    try {
      [outs, outDims] = rule(vals, dims, params, this.axisSize, this.axisName);
    } finally {
      ruleAxisName = prev;
    }
    return outs.map((o, i) => (outDims[i] === null ? o : new BatchTracer(this, o, outDims[i])));
  }
}

/** vmap of a flat function with per-input batch dims; outputs moved to `outDims` (null: must be unbatched). */
export function vmapFlat(f: (...xs: Array[]) => Array[], args: readonly Array[], inDims: readonly BDim[], axisSize: number, outDims: (i: number) => BDim, axisName: string | null = ruleAxisName): Array[] {
  return withMain(
    'vmap',
    (m) => new BatchTrace(m, axisSize, axisName),
    (trace) => {
      const ins = args.map((a, i) => (inDims[i] === null ? a : new BatchTracer(trace, a, inDims[i])));
      const outs = f(...ins);
      return outs.map((o, i) => {
        const t = trace.fullRaise(o) as BatchTracer;
        const od = outDims(i);
        if (od === null) {
          if (t.bdim !== null) throw new Error(`vmap: output ${i} is batched (${t.dtype}${fmt(t.shape)} varies along the mapped axis) but its outAxes entry is null`);
          return t.val;
        }
        const nd = t.val.ndim + (t.bdim === null ? 1 : 0);
        const to = od < 0 ? od + nd : od;
        if (to < 0 || to >= nd) throw new RangeError(`vmap: outAxes ${od} out of range for output ${i} of rank ${nd}`);
        return moveBdim(t.val, t.bdim, to, axisSize);
      });
    },
  );
}

const vmapCache = new WeakMap<ClosedJaxpr, Map<string, { jaxpr: ClosedJaxpr; outBatched: boolean[] }>>();

/**
 * A closed jaxpr batched along dim 0 of the inputs marked in `batched`; outputs batched at dim 0
 * where `outBatched` says (all of them when `instantiate` is true, or where marked).
 */
export function vmapJaxpr(closed: ClosedJaxpr, batched: readonly boolean[], axisSize: number, instantiateOut: boolean | readonly boolean[]): { jaxpr: ClosedJaxpr; outBatched: boolean[] } {
  const axisName = ruleAxisName;
  const key = `${axisSize}|${axisName ?? ''}|${batched.map(Number).join('')}|${typeof instantiateOut === 'boolean' ? instantiateOut : instantiateOut.map(Number).join('')}`;
  let m = vmapCache.get(closed);
  if (!m) vmapCache.set(closed, (m = new Map()));
  const hit = m.get(key);
  if (hit) return hit;
  const inAvals = closed.inAvals.map((a, i) => (batched[i] ? { ...a, shape: [axisSize, ...a.shape] } : a));
  let outBatched: boolean[] = [];
  const jaxpr = traceFlat((...xs) => {
    return withMain(
      'vmap',
      (mm) => new BatchTrace(mm, axisSize, axisName),
      (trace) => {
        const ins = xs.map((x, i) => (batched[i] ? new BatchTracer(trace, x, 0) : x));
        const outs = evalJaxpr(closed.jaxpr, closed.consts, ins).map((o) => trace.fullRaise(o) as BatchTracer);
        outBatched = outs.map((t, i) => t.bdim !== null || (typeof instantiateOut === 'boolean' ? instantiateOut : instantiateOut[i]));
        return outs.map((t, i) => (outBatched[i] ? moveBdim(t.val, t.bdim, 0, axisSize) : t.val));
      },
    );
  }, inAvals, 'vmap');
  const res = { jaxpr, outBatched };
  m.set(key, res);
  return res;
}

// ---------------------------------------------------------------------------------------------
// The public vmap

export interface VmapOptions {
  /** Which axis of each argument is mapped: a number or null for all, or one entry per argument (a number, null, or a pytree of them matching the argument). */
  inAxes?: number | null | readonly unknown[];
  /** Where the mapped axis goes in each output: a number or null for all, or a pytree prefix of the output. */
  outAxes?: unknown;
  /** The mapped size, needed when no argument is mapped. */
  axisSize?: number;
  /** A name for the mapped axis, seen by batching rules (collectives over named axes). */
  axisName?: string;
}

const axisLeaf = (x: unknown): boolean => x === null || typeof x === 'number';

function axesFor(spec: unknown, target: unknown, what: string): BDim[] {
  const [leaves] = arrayLeaves(target, what);
  if (axisLeaf(spec)) return leaves.map(() => spec as BDim);
  const [axes] = tree.flatten(spec, { isLeaf: axisLeaf });
  if (axes.length !== leaves.length) throw new Error(`${what}: the axes spec ${showValue(spec)} does not match the structure of the value it maps (${leaves.length} leaves)`);
  return axes as BDim[];
}

/** `jax.vmap`: maps `f` over an axis of its arguments. */
export function vmap(f: (...args: any[]) => unknown, opts: VmapOptions = {}): (...args: any[]) => any {
  const inAxes = opts.inAxes === undefined ? 0 : opts.inAxes;
  const outAxes = opts.outAxes === undefined ? 0 : opts.outAxes;
  return (...args: any[]) => {
    let dims: BDim[];
    if (axisLeaf(inAxes)) dims = arrayLeaves(args, 'vmap')[0].map(() => inAxes as BDim);
    else {
      const spec = inAxes as readonly unknown[];
      if (!globalThis.Array.isArray(spec) || spec.length !== args.length) {
        throw new Error(`vmap: inAxes has ${(spec as unknown[]).length} entries but the function got ${args.length} arguments`);
      }
      dims = args.flatMap((a, i) => axesFor(spec[i], a, 'vmap inAxes'));
    }
    const [leaves, inTree] = arrayLeaves(args, 'vmap');
    const sizes: string[] = [];
    let size = opts.axisSize ?? -1;
    const norm = leaves.map((l, i) => {
      const d = dims[i];
      if (d === null) return null;
      const nd = d < 0 ? d + l.ndim : d;
      if (nd < 0 || nd >= l.ndim) throw new RangeError(`vmap: inAxes ${d} out of range for argument leaf ${i} of shape ${fmt(l.shape)}`);
      sizes.push(`leaf ${i} has shape ${fmt(l.shape)} and axis ${nd} is mapped (size ${l.shape[nd]})`);
      if (size < 0) size = l.shape[nd];
      else if (l.shape[nd] !== size) throw new Error(`vmap: inconsistent sizes for the mapped axes${opts.axisSize !== undefined ? ` (axisSize ${opts.axisSize})` : ''}: ${sizes.join('; ')}`);
      return nd;
    });
    if (size < 0) throw new Error('vmap: no argument is mapped (all inAxes are null) and no axisSize was given');
    let outTree: tree.TreeDef | null = null;
    let outDims: BDim[] = [];
    const flat = (...ls: Array[]): Array[] => {
      const [outs, def] = arrayLeaves(f(...(tree.unflatten(inTree, ls) as unknown[])), 'vmap');
      outTree = def;
      outDims = axisLeaf(outAxes) ? outs.map(() => outAxes as BDim) : axesFor(outAxes, tree.unflatten(def, outs), 'vmap outAxes');
      return outs;
    };
    const res = vmapFlat(flat, leaves, norm, size, (i) => outDims[i], opts.axisName ?? null);
    return tree.unflatten(outTree!, res);
  };
}
