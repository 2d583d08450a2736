/**
 * Batching (jax.vmap). A `BatchTracer` carries a value with one extra dimension, the batch
 * dimension `bdim` (or `null` when the value is the same for every batch member). Each
 * primitive's batching rule maps batched operands to a batched result; most rules first move the
 * batch dimension to the front. Higher-order primitives batch their sub-jaxprs (`vmapJaxpr`).
 * Nested vmaps are nested traces, each with its own batch dimension.
 */
// The primitive modules whose rules this file attaches (imported so they are registered first).
import '../lax/elementwise';
import '../lax/structural';
import '../lax/reduce';
import '../lax/dot';
import '../lax/slicing';
import '../lax/gather';
import '../lax/scatter';
import '../lax/sort';
import '../random/threefry';
import type { Array } from '../array';
import * as lax from '../lax/ops';
import { freeDims } from '../lax/dot';
import { getPrimitive, type Primitive } from '../primitive';
import { fmt } from '../shape';
import { bind } from '../trace';
import * as tree from '../tree';
import { type MainTrace, Trace, Tracer, withMain } from './core';
import { evalJaxpr } from './eval';
import type { ClosedJaxpr } from './jaxpr';
import { arrayLeaves } from './leaves';
import { traceFlat } from './tracing';
import { showValue } from '../describe';

export type BDim = number | null;

/** A batching rule: batched outputs and their batch dims from operands and theirs. */
export type BatchRule = (vals: Array[], dims: BDim[], params: any, axisSize: number) => [Array[], BDim[]];

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
    const [outs, outDims] = rule(vals, dims, params, this.axisSize);
    return outs.map((o, i) => (outDims[i] === null ? o : new BatchTracer(this, o, outDims[i])));
  }
}

/** Moves the batch dim of `x` to position `to` (broadcasting an unbatched value). */
export function moveBdim(x: Array, from: BDim, to: number, size: number): Array {
  if (from === null) {
    const shape = x.shape.slice();
    shape.splice(to, 0, size);
    return lax.broadcastInDim(x, shape, x.shape.map((_, i) => (i < to ? i : i + 1)));
  }
  if (from === to) return x;
  const perm = x.shape.map((_, i) => i).filter((i) => i !== from);
  perm.splice(to, 0, from);
  return lax.transpose(x, perm);
}

/** vmap of a flat function with per-input batch dims; outputs moved to `outDims` (null: must be unbatched). */
export function vmapFlat(f: (...xs: Array[]) => Array[], args: readonly Array[], inDims: readonly BDim[], axisSize: number, outDims: (i: number) => BDim): Array[] {
  return withMain(
    'vmap',
    (m) => new BatchTrace(m, axisSize),
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
  const key = `${axisSize}|${batched.map(Number).join('')}|${typeof instantiateOut === 'boolean' ? instantiateOut : instantiateOut.map(Number).join('')}`;
  let m = vmapCache.get(closed);
  if (!m) vmapCache.set(closed, (m = new Map()));
  const hit = m.get(key);
  if (hit) return hit;
  const inAvals = closed.inAvals.map((a, i) => (batched[i] ? { ...a, shape: [axisSize, ...a.shape] } : a));
  let outBatched: boolean[] = [];
  const jaxpr = traceFlat((...xs) => {
    return withMain(
      'vmap',
      (mm) => new BatchTrace(mm, axisSize),
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
    const res = vmapFlat(flat, leaves, norm, size, (i) => outDims[i]);
    return tree.unflatten(outTree!, res);
  };
}

// ---------------------------------------------------------------------------------------------
// Rules for first-order primitives

const p1 = (prim: Primitive, xs: Array[], params: any): Array => bind(prim, xs, params)[0];
const to0 = (x: Array, d: BDim, n: number): Array => moveBdim(x, d, 0, n);
const shift = (ax: readonly number[]): number[] => ax.map((a) => a + 1);

/** Elementwise: batch dims to the front, unbatched operands broadcast. */
function elementwise(prim: Primitive): BatchRule {
  return (vals, dims, params, n) => [[p1(prim, vals.map((v, i) => to0(v, dims[i], n)), params)], [0]];
}

function selectNRule(prim: Primitive): BatchRule {
  return ([which, ...cases], [wd, ...cds], params, n) => {
    const caseShape = cds[0] === null ? cases[0].shape : cases[0].shape.filter((_, i) => i !== cds[0]);
    let w = which;
    if (!(wd === null && which.ndim === 0)) {
      w = to0(which, wd, n);
      if (w.ndim === 1 && caseShape.length > 0) w = lax.broadcastInDim(w, [n, ...caseShape], [0]);
    }
    return [[p1(prim, [w, ...cases.map((c, i) => to0(c, cds[i], n))], params)], [0]];
  };
}

/** Structural ops re-expressed on a front batch dim. */
const front = (f: (x: Array, params: any, n: number) => Array): ((prim: Primitive) => BatchRule) => () => ([x], [d], params, n) => [[f(to0(x, d, n), params, n)], [0]];

const table: Record<string, (prim: Primitive) => BatchRule> = {
  select_n: selectNRule,
  broadcast_in_dim: front((x, { shape, broadcastDimensions }, n) => lax.broadcastInDim(x, [n, ...shape], [0, ...shift(broadcastDimensions)])),
  reshape: front((x, { newSizes }, n) => lax.reshape(x, [n, ...newSizes])),
  transpose: front((x, { permutation }) => lax.transpose(x, [0, ...shift(permutation)])),
  rev: front((x, { dimensions }) => lax.rev(x, shift(dimensions))),
  squeeze: front((x, { dimensions }) => lax.squeeze(x, shift(dimensions))),
  reduce_sum: (prim) => front((x, p) => p1(prim, [x], { ...p, axes: shift(p.axes) }))(prim),
  dot_general: (prim) => ([a, b], [da, db], params) => {
    const [[lc, rc], [lb, rb]] = params.dimensionNumbers as [[number[], number[]], [number[], number[]]];
    if (da !== null && db !== null) {
      const x = to0(a, da, 0);
      const y = to0(b, db, 0);
      const dn = [[shift(lc), shift(rc)], [[0, ...shift(lb)], [0, ...shift(rb)]]];
      return [[p1(prim, [x, y], { ...params, dimensionNumbers: dn })], [0]];
    }
    if (da !== null) {
      const x = to0(a, da, 0);
      const dn = [[shift(lc), rc], [shift(lb), rb]];
      // The batch dim is lhs's first free dim: it lands right after the batch dims.
      return [[p1(prim, [x, b], { ...params, dimensionNumbers: dn })], [lb.length]];
    }
    const y = to0(b, db, 0);
    const dn = [[lc, shift(rc)], [lb, shift(rb)]];
    const lhsFree = freeDims(a.ndim, lc, lb).length;
    return [[p1(prim, [a, y], { ...params, dimensionNumbers: dn })], [lb.length + lhsFree]];
  },
};

const elementwiseNames = [
  'neg', 'sign', 'abs', 'floor', 'ceil', 'round', 'round_nearest_even', 'is_finite', 'exp', 'exp2', 'log', 'log1p', 'expm1', 'tanh',
  'logistic', 'sin', 'cos', 'tan', 'asin', 'acos', 'atan', 'sinh', 'cosh', 'asinh', 'acosh', 'atanh', 'sqrt', 'rsqrt', 'cbrt',
  'erf', 'erfc', 'erf_inv', 'lgamma', 'digamma', 'square', 'not', 'integer_pow', 'add', 'sub', 'mul', 'div', 'rem', 'pow', 'max',
  'min', 'atan2', 'nextafter', 'and', 'or', 'xor', 'shift_left', 'shift_right_arithmetic', 'shift_right_logical', 'eq', 'ne', 'lt',
  'le', 'gt', 'ge', 'convert_element_type', 'bitcast_convert_type',
];
for (const name of elementwiseNames) table[name] = elementwise;
for (const name of ['reduce_max', 'reduce_min', 'reduce_prod', 'reduce_and', 'reduce_or']) {
  table[name] = (prim) => front((x, p) => p1(prim, [x], { ...p, axes: shift(p.axes) }))(prim);
}
for (const name of ['argmax', 'argmin', 'cumsum', 'cumprod', 'cummax', 'cummin']) {
  table[name] = (prim) => front((x, p) => p1(prim, [x], { ...p, axis: p.axis + 1 }))(prim);
}
// iota has no operands, so it is never batched; its rule exists for completeness.
table.iota = () => () => {
  throw new Error('vmap: iota has no operands and cannot be batched');
};

// Slicing, gather/scatter, sort and random primitives.
const zeroIdx = (): Array => lax.convertElementType(0, 'int32');

/**
 * The fallback for batching cases without a vectorised rule (a batched padding value): one
 * application per batch member, stacked. Correct for any primitive.
 */
function loopRule(prim: Primitive): BatchRule {
  return (vals, dims, params, n) => {
    const per: Array[][] = [];
    for (let b = 0; b < n; b++) {
      per.push(bind(prim, vals.map((v, i) => (dims[i] === null ? v : lax.squeeze(lax.sliceInDim(v, b, b + 1, 1, dims[i]!), [dims[i]!]))), params));
    }
    return [per[0].map((_, k) => lax.concatenate(per.map((p) => lax.reshape(p[k], [1, ...p[k].shape])), 0)), per[0].map(() => 0)];
  };
}

const isB = (d: BDim): boolean => d !== null;

Object.assign(table, {
  slice: front((x, { startIndices, limitIndices, strides }, n) =>
    p1(getPrimitive('slice'), [x], { startIndices: [0, ...startIndices], limitIndices: [n, ...limitIndices], strides: strides ? [1, ...strides] : null }),
  ),
  dynamic_slice: (prim: Primitive): BatchRule => (vals, dims, params, n) => {
    if (dims.slice(1).some(isB)) return [[dynamicSliceAsGather(vals, dims, params.sliceSizes, n)], [0]];
    return [[p1(prim, [to0(vals[0], dims[0], n), zeroIdx(), ...vals.slice(1)], { sliceSizes: [n, ...params.sliceSizes] })], [0]];
  },
  dynamic_update_slice: (prim: Primitive): BatchRule => (vals, dims, params, n) => {
    if (dims.slice(2).some(isB)) {
      // Batched starts: one overwriting scatter with the batch as a batching dim ('clip' clamps
      // each window into bounds as dynamic_update_slice does).
      const [x, u, ...idx] = vals;
      const ind = lax.concatenate(idx.map((v, i) => lax.reshape(to0(lax.convertElementType(v, 'int32'), dims[i + 2], n), [n, 1])), 1);
      const r = idx.length;
      const range = (k: number, st = 0) => globalThis.Array.from({ length: k }, (_, i) => st + i);
      return [[p1(getPrimitive('scatter'), [to0(x, dims[0], n), ind, to0(u, dims[1], n)], {
        dimensionNumbers: { updateWindowDims: range(r, 1), insertedWindowDims: [], scatterDimsToOperandDims: range(r, 1), operandBatchingDims: [0], scatterIndicesBatchingDims: [0] },
        mode: 'clip',
        indicesAreSorted: true,
        uniqueIndices: true,
      })], [0]];
    }
    return [[p1(prim, [to0(vals[0], dims[0], n), to0(vals[1], dims[1], n), zeroIdx(), ...vals.slice(2)], params)], [0]];
  },
  concatenate: (prim: Primitive): BatchRule => (vals, dims, { dimension }, n) => [[p1(prim, vals.map((v, i) => to0(v, dims[i], n)), { dimension: dimension + 1 })], [0]],
  pad: (prim: Primitive): BatchRule => (vals, dims, params, n) => {
    if (isB(dims[1])) return loopRule(prim)(vals, dims, params, n);
    return [[p1(prim, [to0(vals[0], dims[0], n), vals[1]], { paddingConfig: [[0, 0, 0], ...params.paddingConfig] })], [0]];
  },
  gather: (prim: Primitive): BatchRule => ([x, idx], [dx, di], params, n) => {
    const dn = params.dimensionNumbers;
    const s = (a: readonly number[]) => shift(a);
    if (dx !== null && di === null) {
      // The operand's batch dim becomes a leading offset (window) dim of full size.
      return [[p1(prim, [to0(x, dx, n), idx], {
        ...params,
        dimensionNumbers: { offsetDims: [0, ...s(dn.offsetDims)], collapsedSliceDims: s(dn.collapsedSliceDims), startIndexMap: s(dn.startIndexMap), operandBatchingDims: s(dn.operandBatchingDims), startIndicesBatchingDims: dn.startIndicesBatchingDims },
        sliceSizes: [n, ...params.sliceSizes],
      })], [0]];
    }
    if (dx === null) {
      // Batched indices: a new leading batch dim of the indices, which leads the output.
      return [[p1(prim, [x, to0(idx, di, n)], {
        ...params,
        dimensionNumbers: { ...dn, offsetDims: s(dn.offsetDims), startIndicesBatchingDims: s(dn.startIndicesBatchingDims) },
      })], [0]];
    }
    return [[p1(prim, [to0(x, dx, n), to0(idx, di, n)], {
      ...params,
      dimensionNumbers: {
        offsetDims: s(dn.offsetDims),
        collapsedSliceDims: s(dn.collapsedSliceDims),
        startIndexMap: s(dn.startIndexMap),
        operandBatchingDims: [0, ...s(dn.operandBatchingDims)],
        startIndicesBatchingDims: [0, ...s(dn.startIndicesBatchingDims)],
      },
      sliceSizes: [1, ...params.sliceSizes],
    })], [0]];
  },
  sort: (prim: Primitive): BatchRule => (vals, dims, params, n) => {
    const outs = bind(prim, vals.map((v, i) => to0(v, dims[i], n)), { ...params, dimension: params.dimension + 1 });
    return [outs, outs.map(() => 0)];
  },
  top_k: (prim: Primitive): BatchRule => ([x], [d], params, n) => [bind(prim, [to0(x, d, n)], params), [0, 0]],
  // threefry broadcasts its operands NumPy-style: give every operand the same rank with the batch dim first.
  threefry2x32: (prim: Primitive): BatchRule => (vals, dims, params, n) => {
    const logical = vals.map((v, i) => (dims[i] === null ? v.shape : v.shape.filter((_, k) => k !== dims[i])));
    const r = Math.max(...logical.map((l) => l.length));
    const ops = vals.map((v, i) => {
      const pad = new globalThis.Array<number>(r - logical[i].length).fill(1);
      if (dims[i] === null) return lax.reshape(v, [1, ...pad, ...logical[i]]);
      return lax.reshape(to0(v, dims[i], n), [n, ...pad, ...logical[i]]);
    });
    return [bind(prim, ops, params), [0, 0]];
  },
});

/**
 * dynamic_slice with batched start indices: a gather whose index vectors are the per-member
 * starts ([n, rank]), with the operand's batch dim (if any) as a batching dim. Gather's 'clip'
 * mode clamps each window into bounds exactly as dynamic_slice does.
 */
function dynamicSliceAsGather(vals: Array[], dims: BDim[], sliceSizes: readonly number[], n: number): Array {
  const [x, ...idx] = vals;
  const starts = idx.map((v, i) => lax.reshape(to0(lax.convertElementType(v, 'int32'), dims[i + 1], n), [n, 1]));
  const ind = lax.concatenate(starts, 1);
  const r = idx.length;
  const range = (k: number, s = 0) => globalThis.Array.from({ length: k }, (_, i) => s + i);
  const common = { mode: 'clip', fillValue: null, indicesAreSorted: false, uniqueIndices: false };
  if (dims[0] === null) {
    return p1(getPrimitive('gather'), [x, ind], {
      ...common,
      dimensionNumbers: { offsetDims: range(r, 1), collapsedSliceDims: [], startIndexMap: range(r), operandBatchingDims: [], startIndicesBatchingDims: [] },
      sliceSizes,
    });
  }
  return p1(getPrimitive('gather'), [to0(x, dims[0], n), ind], {
    ...common,
    dimensionNumbers: { offsetDims: range(r, 1), collapsedSliceDims: [], startIndexMap: range(r, 1), operandBatchingDims: [0], startIndicesBatchingDims: [0] },
    sliceSizes: [1, ...sliceSizes],
  });
}

/** Scatters: a leading window dim when the indices are shared; a batching dim pair when not. */
function scatterRule(prim: Primitive): BatchRule {
  return (vals, dims, params, n) => {
    const [x, idx, u] = vals;
    const dn = params.dimensionNumbers;
    if (isB(dims[1])) {
      // Batched indices: everything batched at 0, the batch a new batching dim pair.
      return [[p1(prim, [to0(x, dims[0], n), to0(idx, dims[1], n), to0(u, dims[2], n)], {
        ...params,
        dimensionNumbers: {
          updateWindowDims: shift(dn.updateWindowDims),
          insertedWindowDims: shift(dn.insertedWindowDims),
          scatterDimsToOperandDims: shift(dn.scatterDimsToOperandDims),
          operandBatchingDims: [0, ...shift(dn.operandBatchingDims)],
          scatterIndicesBatchingDims: [0, ...shift(dn.scatterIndicesBatchingDims)],
        },
      })], [0]];
    }
    return [[p1(prim, [to0(x, dims[0], n), idx, to0(u, dims[2], n)], {
      ...params,
      dimensionNumbers: {
        updateWindowDims: [0, ...shift(dn.updateWindowDims)],
        insertedWindowDims: shift(dn.insertedWindowDims),
        scatterDimsToOperandDims: shift(dn.scatterDimsToOperandDims),
        operandBatchingDims: shift(dn.operandBatchingDims),
        scatterIndicesBatchingDims: dn.scatterIndicesBatchingDims,
      },
    })], [0]];
  };
}
for (const name of ['scatter', 'scatter-add', 'scatter-mul', 'scatter-min', 'scatter-max']) table[name] = scatterRule;

for (const [name, r] of Object.entries(table)) {
  const prim = getPrimitive(name);
  prim.rules.batch = r(prim);
}

