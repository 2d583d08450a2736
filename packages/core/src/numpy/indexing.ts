/**
 * NumPy indexing, JAX style: `x.get(...idx)` is tpukit's spelling of `x[idx]`, and
 * `x.at(...idx).set(v)` / `.add` / `.subtract` / `.multiply` / `.divide` / `.power` / `.min` /
 * `.max` / `.apply(fn)` / `.get(opts)` are JAX's functional updates (`x.at[idx].set(v)`).
 *
 * An index item is an integer (negative counts from the end), a slice string (`':'`, `'1:3'`,
 * `'::2'`, `'-1::-1'`) or `s(start, stop, step)` object, `null` (newaxis), `'...'` (ellipsis),
 * an integer Array or nested JS integer list (advanced indexing), or a boolean Array / nested
 * boolean list (a mask; concrete values only). NumPy's rules decide where advanced dimensions go:
 * at the place of the first advanced index when all advanced indices (integers included) are
 * adjacent, otherwise in front.
 *
 * Lowering, as in JAX: an expression with only integers, slices, newaxis and ellipsis becomes
 * slice / rev / reshape; anything else becomes one `gather` (reads) or one `scatter` (updates)
 * built from an index plan: unit-step slices stay windows of the gather/scatter, strided slices
 * become iota index components, advanced indices are broadcast together into one block.
 * Out-of-bounds array indices: reads clamp by default, updates drop by default (JAX's defaults).
 */
import { Array, type IndexItem, type IndexUpdate, type NestedInput } from '../array';
import { asArray } from '../convert';
import type { GetMode, GetOptions, UpdateOptions } from '../methodArgs';
import { Slice } from '../slice';
import { type DType, isInteger } from '../dtype';
import * as lax from '../lax/ops';
import { broadcastShapes, fmt, shapesEqual, sizeOf } from '../shape';
import { nonzero, requireConcrete } from './nonzero';
import { divide as divideOp, power as powerOp } from './math';
import { broadcastTo } from './promote';
import { showValue } from '../describe';

export { Slice };

/** `np.s(stop)` or `np.s(start, stop, step?)`, like Python's `slice(...)`. */
export function s(startOrStop?: number | null, stop?: number | null, step?: number | null): Slice {
  if (stop === undefined && step === undefined) return new Slice(null, startOrStop ?? null, null);
  return new Slice(startOrStop ?? null, stop ?? null, step ?? null);
}

export type { IndexItem };

export type { GetMode, GetOptions, UpdateOptions };

const SLICE_RE = /^\s*(-?\d+)?\s*:\s*(-?\d+)?\s*(?::\s*(-?\d+)?\s*)?$/;

/** Parses `'a:b:c'` (any part may be empty) into a Slice. */
export function parseSlice(text: string, op = 'index'): Slice {
  const m = SLICE_RE.exec(text);
  if (!m) {
    throw new SyntaxError(`${op}: bad index string ${showValue(text)}; expected a slice like ':', '1:3', '::2', '-1::-1' or the ellipsis '...'`);
  }
  const num = (v: string | undefined): number | null => (v === undefined ? null : Number(v));
  if (num(m[3]) === 0) throw new Error(`${op}: slice ${showValue(text)} has step 0; the step cannot be zero`);
  return new Slice(num(m[1]), num(m[2]), num(m[3]));
}

/** Python's `slice.indices(n)`: concrete start, step and length. */
export function sliceIndices(sl: Slice, n: number): { start: number; step: number; length: number } {
  const step = sl.step ?? 1;
  let start: number;
  let stop: number;
  if (step > 0) {
    start = sl.start === null ? 0 : sl.start < 0 ? Math.max(sl.start + n, 0) : Math.min(sl.start, n);
    stop = sl.stop === null ? n : sl.stop < 0 ? Math.max(sl.stop + n, 0) : Math.min(sl.stop, n);
  } else {
    start = sl.start === null ? n - 1 : sl.start < 0 ? Math.max(sl.start + n, -1) : Math.min(sl.start, n - 1);
    stop = sl.stop === null ? -1 : sl.stop < 0 ? Math.max(sl.stop + n, -1) : Math.min(sl.stop, n - 1);
  }
  const length = step > 0 ? Math.max(0, Math.ceil((stop - start) / step)) : Math.max(0, Math.ceil((start - stop) / -step));
  return { start, step, length };
}

type Item =
  | { kind: 'int'; value: number }
  | { kind: 'slice'; slice: Slice }
  | { kind: 'newaxis' }
  | { kind: 'ellipsis' }
  | { kind: 'array'; arr: Array }
  | { kind: 'mask'; arr: Array };

function describe(item: unknown): string {
  if (item instanceof Array) return `${item.dtype}${fmt(item.shape)} Array`;
  return showValue(item);
}

function classify(item: IndexItem, op: string, pos: number): Item {
  if (item === null) return { kind: 'newaxis' };
  if (typeof item === 'number') {
    if (!Number.isInteger(item)) throw new TypeError(`${op}: index ${pos} is ${item}; indices must be integers, slices, null, '...', or integer/boolean arrays`);
    return { kind: 'int', value: item };
  }
  if (typeof item === 'string') return item.trim() === '...' ? { kind: 'ellipsis' } : { kind: 'slice', slice: parseSlice(item, op) };
  if (item instanceof Slice) return { kind: 'slice', slice: item };
  let arr: Array;
  if (item instanceof Array) arr = item;
  else if (globalThis.Array.isArray(item)) {
    arr = asArray(item as NestedInput, { op });
    if (arr.size === 0 && arr.dtype === 'float32') arr = lax.convertElementType(arr, 'int32');
  } else throw new TypeError(`${op}: index ${pos} is ${describe(item)}; indices must be integers, slices, null, '...', or integer/boolean arrays`);
  if (arr.dtype === 'bool') {
    if (arr.ndim === 0) throw new Error(`${op}: index ${pos} is a scalar boolean; scalar boolean indices are not supported (use jnp.where)`);
    return { kind: 'mask', arr };
  }
  if (!isInteger(arr.dtype)) throw new TypeError(`${op}: index ${pos} is a ${arr.dtype}${fmt(arr.shape)} array; index arrays must have an integer or bool dtype`);
  return { kind: 'array', arr };
}

/** One output dimension of an indexing result. */
type OutDim =
  | { kind: 'window'; opDim: number; start: number; size: number }
  | { kind: 'strided'; opDim: number; start: number; step: number; size: number }
  | { kind: 'newaxis' }
  | { kind: 'adv' };

/** A component of the gather/scatter index vector. */
type Component =
  | { kind: 'const'; opDim: number; value: number }
  | { kind: 'strided'; opDim: number; outDim: number }
  | { kind: 'adv'; opDim: number; arr: Array };

interface Plan {
  shape: readonly number[];
  outShape: number[];
  out: OutDim[];
  comps: Component[];
  advShape: number[];
  /** True when there is no array index: lowers to slice/rev/reshape. */
  basic: boolean;
  /** Per operand dim for the basic path. */
  basicDims: ({ kind: 'int'; value: number } | { kind: 'slice'; start: number; step: number; size: number })[];
}

/** Resolves an index expression against `shape` (NumPy semantics). */
function plan(shape: readonly number[], items: readonly IndexItem[], op: string): Plan {
  const ndim = shape.length;
  const raw = items.map((it, i) => classify(it, op, i));
  if (raw.filter((r) => r.kind === 'ellipsis').length > 1) throw new Error(`${op}: an index can only have a single ellipsis ('...')`);
  const consumed = raw.reduce((n, r) => n + (r.kind === 'mask' ? r.arr.ndim : r.kind === 'newaxis' || r.kind === 'ellipsis' ? 0 : 1), 0);
  if (consumed > ndim) {
    throw new RangeError(`${op}: too many indices for array: array of shape ${fmt(shape)} is ${ndim}-dimensional, but ${consumed} were indexed`);
  }
  // Expand the ellipsis (or an implicit trailing one) and turn masks into integer arrays.
  const expanded: Item[] = [];
  const full = (): Item => ({ kind: 'slice', slice: new Slice() });
  let dim = 0;
  let sawEllipsis = false;
  for (const r of raw) {
    if (r.kind === 'ellipsis') {
      sawEllipsis = true;
      for (let k = 0; k < ndim - consumed; k++) expanded.push(full());
      dim += ndim - consumed;
    } else if (r.kind === 'mask') {
      requireConcrete(r.arr, op, 'boolean mask indexing needs concrete values; use jnp.where(mask, x, y) instead');
      const want = shape.slice(dim, dim + r.arr.ndim);
      if (!shapesEqual(want, r.arr.shape)) {
        throw new Error(`${op}: boolean index of shape ${fmt(r.arr.shape)} does not match the indexed dimensions ${fmt(want)} of array ${fmt(shape)} (starting at dimension ${dim})`);
      }
      for (const c of nonzero(r.arr)) expanded.push({ kind: 'array', arr: c });
      dim += r.arr.ndim;
    } else {
      expanded.push(r);
      if (r.kind !== 'newaxis') dim++;
    }
  }
  if (!sawEllipsis) for (let k = 0; k < ndim - consumed; k++) expanded.push(full());

  const hasArray = expanded.some((e) => e.kind === 'array');
  const advPositions = expanded.flatMap((e, i) => (e.kind === 'array' || (hasArray && e.kind === 'int') ? [i] : []));
  const contiguous = advPositions.every((p, i) => i === 0 || p === advPositions[i - 1] + 1);
  const advArrays: Array[] = [];
  const advShapes: (readonly number[])[] = [];
  const out: OutDim[] = [];
  const comps: Component[] = [];
  const basicDims: Plan['basicDims'] = [];
  let opDim = 0;
  let advInserted = false;
  const insertAdv = (): void => {
    if (!advInserted) out.push({ kind: 'adv' });
    advInserted = true;
  };
  if (hasArray && !contiguous) insertAdv();
  for (const e of expanded) {
    if (e.kind === 'newaxis') {
      out.push({ kind: 'newaxis' });
      continue;
    }
    const n = shape[opDim];
    if (e.kind === 'int') {
      const v = e.value < 0 ? e.value + n : e.value;
      if (v < 0 || v >= n) throw new RangeError(`${op}: index ${e.value} is out of bounds for axis ${opDim} with size ${n}`);
      if (hasArray) {
        insertAdv();
        advArrays.push(asArray(v, { dtype: 'int32', op }));
        advShapes.push([]);
        comps.push({ kind: 'adv', opDim, arr: advArrays[advArrays.length - 1] });
      } else comps.push({ kind: 'const', opDim, value: v });
      basicDims.push({ kind: 'int', value: v });
    } else if (e.kind === 'slice') {
      const { start, step, length } = sliceIndices(e.slice, n);
      basicDims.push({ kind: 'slice', start, step, size: length });
      if (step === 1 || length <= 1) {
        out.push({ kind: 'window', opDim, start: length === 0 ? 0 : start, size: length });
        if (length > 0 && start !== 0) comps.push({ kind: 'const', opDim, value: start });
      } else {
        out.push({ kind: 'strided', opDim, start, step, size: length });
        comps.push({ kind: 'strided', opDim, outDim: out.length - 1 });
      }
    } else if (e.kind === 'array') {
      insertAdv();
      advArrays.push(e.arr);
      advShapes.push(e.arr.shape);
      comps.push({ kind: 'adv', opDim, arr: e.arr });
    }
    opDim++;
  }
  let advShape: number[] = [];
  if (hasArray) {
    try {
      advShape = broadcastShapes(op, ...advShapes);
    } catch {
      throw new Error(`${op}: shape mismatch: indexing arrays could not be broadcast together with shapes ${advShapes.map(fmt).join(', ')}`);
    }
  }
  const outShape: number[] = [];
  for (const o of out) {
    if (o.kind === 'adv') outShape.push(...advShape);
    else if (o.kind === 'newaxis') outShape.push(1);
    else outShape.push(o.size);
  }
  return { shape, outShape, out, comps, advShape, basic: !hasArray, basicDims };
}

/** Basic indexing: static slice, then rev for negative steps, then reshape (ints, newaxis). */
function basicGet(x: Array, p: Plan): Array {
  const start: number[] = [];
  const limit: number[] = [];
  const strides: number[] = [];
  const revDims: number[] = [];
  p.basicDims.forEach((b, d) => {
    if (b.kind === 'int') {
      start.push(b.value);
      limit.push(b.value + 1);
      strides.push(1);
    } else if (b.size === 0) {
      start.push(0);
      limit.push(0);
      strides.push(1);
    } else if (b.step > 0) {
      start.push(b.start);
      limit.push(b.start + (b.size - 1) * b.step + 1);
      strides.push(b.step);
    } else {
      const lo = b.start + (b.size - 1) * b.step;
      start.push(lo);
      limit.push(b.start + 1);
      strides.push(-b.step);
      if (b.size > 1) revDims.push(d);
    }
  });
  let y = x;
  const whole = start.every((v, d) => v === 0 && limit[d] === x.shape[d] && strides[d] === 1);
  if (!whole) y = lax.slice(y, start, limit, strides.some((v) => v !== 1) ? strides : null);
  if (revDims.length) y = lax.rev(y, revDims);
  if (!shapesEqual(y.shape, p.outShape)) y = lax.reshape(y, p.outShape);
  return y;
}

/** Integer arrays normalised for gather/scatter: int32, negative indices wrapped once. */
function normalizeIndexArray(arr: Array, n: number): Array {
  let a = arr.dtype === 'int32' ? arr : lax.convertElementType(arr, 'int32');
  if (arr.dtype.startsWith('u')) return a;
  const neg = lax.lt(a, 0);
  a = lax.select(neg, lax.add(a, n), a);
  return a;
}

interface Lowered {
  indices: Array;
  windowPositions: number[];
  pointDims: number[];
  indexMap: number[];
  sliceSizes: number[];
  batchShape: number[];
}

/** Builds the gather/scatter index array and dimension numbers of a plan. */
function lower(p: Plan): Lowered {
  const outPos: number[] = [];
  {
    let pos = 0;
    for (const o of p.out) {
      outPos.push(pos);
      pos += o.kind === 'adv' ? p.advShape.length : 1;
    }
  }
  const windowPositions: number[] = [];
  const windowOf = new Map<number, number>();
  const batchPositions: number[] = [];
  p.out.forEach((o, i) => {
    if (o.kind === 'window') {
      windowPositions.push(outPos[i]);
      windowOf.set(o.opDim, o.size);
    } else if (o.kind === 'adv') for (let k = 0; k < p.advShape.length; k++) batchPositions.push(outPos[i] + k);
    else batchPositions.push(outPos[i]);
  });
  const batchShape = batchPositions.map((q) => p.outShape[q]);
  const batchIndexOf = (q: number): number => batchPositions.indexOf(q);
  const advOut = p.out.findIndex((o) => o.kind === 'adv');
  const cols = p.comps.map((c): Array => {
    let col: Array;
    if (c.kind === 'const') col = lax.broadcastInDim(asArray(c.value, { dtype: 'int32' }), batchShape, []);
    else if (c.kind === 'strided') {
      const o = p.out[c.outDim] as Extract<OutDim, { kind: 'strided' }>;
      const ramp = lax.add(lax.mul(lax.iota('int32', o.size), o.step), o.start);
      col = lax.broadcastInDim(ramp, batchShape, [batchIndexOf(outPos[c.outDim])]);
    } else {
      const a = broadcastTo(normalizeIndexArray(c.arr, p.shape[c.opDim]), p.advShape, 'index');
      const first = batchIndexOf(outPos[advOut]);
      col = lax.broadcastInDim(a, batchShape, p.advShape.map((_, k) => first + k));
    }
    return lax.reshape(col, [...batchShape, 1]);
  });
  const indices = cols.length === 0 ? lax.broadcastInDim(asArray(0, { dtype: 'int32' }), [...batchShape, 0], []) : lax.concatenate(cols, batchShape.length);
  const pointDims = p.shape.map((_, d) => d).filter((d) => !windowOf.has(d));
  const sliceSizes = p.shape.map((_, d) => windowOf.get(d) ?? 1);
  return { indices, windowPositions, pointDims, indexMap: p.comps.map((c) => c.opDim), sliceSizes, batchShape };
}

function checkGetMode(op: string, mode: unknown): GetMode {
  if (mode !== 'clip' && mode !== 'fill' && mode !== 'drop' && mode !== 'promise_in_bounds') {
    throw new Error(`${op}: mode must be 'clip', 'fill', 'drop' or 'promise_in_bounds'; got ${showValue(mode)}`);
  }
  return mode;
}

/** `x[idx]` with options: the body of `x.get(...)` and `x.at(...).get(opts)`. */
export function getItem(x: Array, items: readonly IndexItem[], opts: GetOptions = {}): Array {
  const op = 'get';
  const mode = checkGetMode(op, opts.mode ?? 'clip');
  const p = plan(x.shape, items, op);
  if (p.basic) return basicGet(x, p);
  if (sizeOf(p.outShape) === 0) return lax.broadcastInDim(lax.convertElementType(asArray(0), x.dtype, x.weakType), p.outShape, []);
  if (p.shape.some((n, d) => n === 0 && p.comps.some((c) => c.opDim === d))) {
    throw new RangeError(`${op}: cannot index with an array into an axis of size 0 (array ${fmt(x.shape)})`);
  }
  const l = lower(p);
  return lax.gather(
    x,
    l.indices,
    { offsetDims: l.windowPositions, collapsedSliceDims: l.pointDims, startIndexMap: l.indexMap },
    l.sliceSizes,
    { mode: mode === 'drop' ? 'fill' : mode, fillValue: opts.fillValue ?? null },
  );
}

type Scatter = typeof lax.scatter;

/** The update values as an Array of x's dtype (JAX casts them to the updated array's dtype). */
function updateValues(x: Array, v: unknown, op: string): Array {
  if (v instanceof Array) return v.dtype === x.dtype ? v : lax.convertElementType(v, x.dtype);
  return asArray(v as NestedInput, { dtype: x.dtype as DType, op });
}

const onesLike = (x: Array): Array => lax.broadcastInDim(lax.convertElementType(asArray(1), x.dtype, x.weakType), x.shape, []);

function update(name: string, scatterFn: Scatter, x: Array, items: readonly IndexItem[], v: unknown, opts: UpdateOptions): Array {
  const op = `at().${name}`;
  const mode = checkGetMode(op, opts.mode ?? 'drop');
  const p = plan(x.shape, items, op);
  let vals = updateValues(x, v, op);
  if (vals.ndim > p.outShape.length) {
    // NumPy lets the value carry extra leading size-1 dimensions.
    const lead = vals.ndim - p.outShape.length;
    if (vals.shape.slice(0, lead).some((d) => d !== 1)) {
      throw new Error(`${op}: value of shape ${fmt(vals.shape)} cannot broadcast to the indexed shape ${fmt(p.outShape)}`);
    }
    vals = lax.reshape(vals, vals.shape.slice(lead));
  }
  try {
    vals = broadcastTo(vals, p.outShape, op);
  } catch {
    throw new Error(`${op}: value of shape ${fmt(vals.shape)} cannot broadcast to the indexed shape ${fmt(p.outShape)}`);
  }
  if (sizeOf(p.outShape) === 0) return x;
  if (p.shape.some((n, d) => n === 0 && p.comps.some((c) => c.opDim === d))) {
    throw new RangeError(`${op}: cannot index with an array into an axis of size 0 (array ${fmt(x.shape)})`);
  }
  const l = lower(p);
  return scatterFn(
    x,
    l.indices,
    vals,
    { updateWindowDims: l.windowPositions, insertedWindowDims: l.pointDims, scatterDimsToOperandDims: l.indexMap },
    { mode: mode === 'drop' ? 'fill' : mode },
  );
}

/** What `x.at(...idx)` returns: JAX's `x.at[idx]`. Every method returns a new array. */
export class IndexUpdateRef implements IndexUpdate {
  constructor(
    readonly array: Array,
    readonly indices: readonly IndexItem[],
  ) {}
  /** `x[idx]`; out-of-bounds array indices clamp unless `mode` says otherwise. */
  get(opts: GetOptions = {}): Array {
    return getItem(this.array, this.indices, opts);
  }
  /** `x[idx] = v` (functional). */
  set(v: unknown, opts: UpdateOptions = {}): Array {
    return update('set', lax.scatter, this.array, this.indices, v, opts);
  }
  /** `x[idx] += v`; repeated indices accumulate. */
  add(v: unknown, opts: UpdateOptions = {}): Array {
    return update('add', lax.scatterAdd, this.array, this.indices, v, opts);
  }
  /** `x[idx] *= v`; repeated indices accumulate. */
  multiply(v: unknown, opts: UpdateOptions = {}): Array {
    return update('multiply', lax.scatterMul, this.array, this.indices, v, opts);
  }
  /** `x[idx] -= v`; repeated indices accumulate (a scatter-add of the negated values). */
  subtract(v: unknown, opts: UpdateOptions = {}): Array {
    const vals = updateValues(this.array, v, 'at().subtract');
    return update('subtract', lax.scatterAdd, this.array, this.indices, lax.neg(vals), opts);
  }
  /** `x[idx] /= v`, as JAX computes it: `x / scatter-mul(ones, idx, v)`. */
  divide(v: unknown, opts: UpdateOptions = {}): Array {
    return divideOp(this.array, update('divide', lax.scatterMul, onesLike(this.array), this.indices, updateValues(this.array, v, 'at().divide'), opts));
  }
  /** `x[idx] **= v`, as JAX computes it: `x ** scatter-mul(ones, idx, v)`. */
  power(v: unknown, opts: UpdateOptions = {}): Array {
    return powerOp(this.array, update('power', lax.scatterMul, onesLike(this.array), this.indices, updateValues(this.array, v, 'at().power'), opts));
  }
  /**
   * `x[idx] = fn(x[idx])` for an elementwise `fn`, applied once per indexed element (repeated
   * indices do not apply it twice). Computed as `where(mask, fn(x), x)`, so `fn` must be
   * elementwise and is evaluated on the whole array.
   */
  apply(fn: (v: Array) => Array, opts: UpdateOptions = {}): Array {
    const x = this.array;
    const none = lax.broadcastInDim(asArray(false), x.shape, []);
    const mask = update('apply', lax.scatter, none, this.indices, true, opts);
    const y = fn(x);
    if (!(y instanceof Array) || !shapesEqual(y.shape, x.shape)) {
      throw new Error(`at().apply: fn must be elementwise, returning an array of shape ${fmt(x.shape)}; got ${y instanceof Array ? fmt(y.shape) : typeof y}`);
    }
    return lax.select(mask, y.dtype === x.dtype ? y : lax.convertElementType(y, x.dtype, x.weakType), x);
  }
  /** `x[idx] = minimum(x[idx], v)`. */
  min(v: unknown, opts: UpdateOptions = {}): Array {
    return update('min', lax.scatterMin, this.array, this.indices, v, opts);
  }
  /** `x[idx] = maximum(x[idx], v)`. */
  max(v: unknown, opts: UpdateOptions = {}): Array {
    return update('max', lax.scatterMax, this.array, this.indices, v, opts);
  }
}

/** `x.at(...idx)` as a function. */
export function at(x: Array, ...indices: IndexItem[]): IndexUpdateRef {
  return new IndexUpdateRef(x, indices);
}
