/**
 * Slicing primitives with jax.lax semantics: static `slice` (with strides), `dynamic_slice` and
 * `dynamic_update_slice` (start indices are scalar operands, clamped so the window fits, as XLA
 * does), `concatenate` and `pad` (negative low/high padding crops; interior padding inserts
 * values between elements). Basic NumPy indexing lowers to these; gather/scatter (gather.ts,
 * scatter.ts) handle the rest. Params are plain data so the transformations can write rules
 * against them. Kernels move storage words, so bfloat16/float16 data is copied bit-exactly.
 * Each primitive is defined with its rules and its lax ops.
 */
import { Array } from '../array';
import { type ArrayLike, asArray } from '../convert';
import { allocStorage, isInteger } from '../dtype';
import { type BatchRule, type BDim, type HostArray, type Primitive, type ShapedArray, type UndefPrimal, definePrimitive, isUndef } from '../primitive';
import { fmt, normalizeAxis, sizeOf, stridesOf } from '../shape';
import { bind, bind1 } from '../trace';
import { convertElementType, sub } from './elementwise';
import { gatherP, scatterP } from './gatherScatter';
import { lin1, p1 } from './ruleKit';
import { expandDims, ints, linearInJvp, moveBdim, operands, reduceSum, reshape, squeeze, zerosOf } from './structural';
import { stridedCopy } from './strided';
import { showValue } from '../describe';

const to0 = (x: Array, d: BDim, n: number): Array => moveBdim(x, d, 0, n);
const isB = (d: BDim): boolean => d !== null;
const zeroIdx = (): Array => convertElementType(0, 'int32');
const scalar0 = (d: ShapedArray['dtype']): Array => zerosOf({ shape: [], dtype: d, weakType: false });


export interface SliceParams {
  startIndices: readonly number[];
  limitIndices: readonly number[];
  /** null means all 1. */
  strides: readonly number[] | null;
}

export const sliceP = definePrimitive<SliceParams>({
  name: 'slice',
  rules: (self) => ({
    jvp: linearInJvp(self, 1),
    transpose: lin1((ct, x, { startIndices, strides }) => {
      const cfg = x.aval.shape.map((n, d) => {
        const st = strides ? strides[d] : 1;
        const out = ct.shape[d];
        const used = out === 0 ? 0 : (out - 1) * st + 1;
        return [startIndices[d], n - startIndices[d] - used, out === 0 ? 0 : st - 1] as [number, number, number];
      });
      return p1(padP, [ct, scalar0(ct.dtype)], { paddingConfig: cfg });
    }),
    batch: ([x], [d], { startIndices, limitIndices, strides }, n) => [
      [p1(self, [to0(x, d, n)], { startIndices: [0, ...startIndices], limitIndices: [n, ...limitIndices], strides: strides ? [1, ...strides] : null })],
      [0],
    ],
  }),
  abstractEval([x], { startIndices, limitIndices, strides }) {
    const r = x.shape.length;
    const show = `operand ${fmt(x.shape)}, start_indices ${fmt(startIndices)}, limit_indices ${fmt(limitIndices)}${strides ? `, strides ${fmt(strides)}` : ''}`;
    if (startIndices.length !== r || limitIndices.length !== r || (strides && strides.length !== r)) {
      throw new Error(`slice: start_indices, limit_indices and strides need one entry per operand dimension (rank ${r}); got ${show}`);
    }
    const out: number[] = [];
    for (let d = 0; d < r; d++) {
      const s = startIndices[d];
      const l = limitIndices[d];
      const st = strides ? strides[d] : 1;
      if (!Number.isInteger(s) || !Number.isInteger(l) || s < 0 || l > x.shape[d] || s > l) {
        throw new RangeError(`slice: dimension ${d} needs 0 <= start <= limit <= ${x.shape[d]}; got start ${s}, limit ${l} (${show})`);
      }
      if (!Number.isInteger(st) || st < 1) throw new RangeError(`slice: strides must be positive integers; got ${st} for dimension ${d} (${show})`);
      out.push(Math.ceil((l - s) / st));
    }
    return [{ shape: out, dtype: x.dtype, weakType: x.weakType }];
  },
  impl([x], { startIndices, strides }, [o]) {
    const st = stridesOf(x.shape);
    let base = 0;
    const inSt = st.map((s, d) => {
      base += startIndices[d] * s;
      return s * (strides ? strides[d] : 1);
    });
    return [stridedCopy(x.data, allocStorage(o.dtype, sizeOf(o.shape)), o.shape, inSt, base)];
  },
});

function checkIndexScalars(name: string, idx: ShapedArray[], rank: number, operand: string): void {
  if (idx.length !== rank) {
    throw new Error(`${name}: needs one start index per operand dimension; got ${idx.length} for operand ${operand}`);
  }
  idx.forEach((a, i) => {
    if (a.shape.length !== 0 || !isInteger(a.dtype)) {
      throw new TypeError(`${name}: start index ${i} must be an integer scalar; got ${a.dtype}${fmt(a.shape)}`);
    }
  });
}

/** Start indices read from scalar operands and clamped to [0, dim - size], as XLA does. */
function clampedStarts(idx: HostArray[], shape: readonly number[], sizes: readonly number[]): number[] {
  return idx.map((a, d) => Math.min(Math.max(Number(a.data[0]), 0), shape[d] - sizes[d]));
}

export const dynamicSliceP: Primitive<{ sliceSizes: readonly number[] }> = definePrimitive<{ sliceSizes: readonly number[] }>({
  name: 'dynamic_slice',
  hlo: 'dynamic-slice',
  rules: (self) => ({
    jvp: linearInJvp(self, 1),
    transpose: ([ct], [x, ...idx]) => [p1(dynamicUpdateSliceP, [zerosOf((x as UndefPrimal).aval), ct!, ...(idx as Array[])], {}), ...idx.map(() => null)],
    batch: (vals, dims, params, n) => {
      if (dims.slice(1).some(isB)) return [[dynamicSliceAsGather(vals, dims, params.sliceSizes, n)], [0]];
      return [[p1(self, [to0(vals[0], dims[0], n), zeroIdx(), ...vals.slice(1)], { sliceSizes: [n, ...params.sliceSizes] })], [0]];
    },
  }),
  abstractEval([x, ...idx], { sliceSizes }) {
    checkIndexScalars('dynamic_slice', idx, x.shape.length, `${x.dtype}${fmt(x.shape)}`);
    if (sliceSizes.length !== x.shape.length) {
      throw new Error(`dynamic_slice: slice_sizes ${fmt(sliceSizes)} needs one entry per operand dimension (operand ${fmt(x.shape)})`);
    }
    sliceSizes.forEach((s, d) => {
      if (!Number.isInteger(s) || s < 0 || s > x.shape[d]) {
        throw new RangeError(`dynamic_slice: slice_sizes ${fmt(sliceSizes)} must lie within operand ${fmt(x.shape)} (dimension ${d}: 0..${x.shape[d]})`);
      }
    });
    return [{ shape: sliceSizes.slice(), dtype: x.dtype, weakType: x.weakType }];
  },
  impl([x, ...idx], { sliceSizes }, [o]) {
    const starts = clampedStarts(idx, x.shape, sliceSizes);
    const st = stridesOf(x.shape);
    let base = 0;
    for (let d = 0; d < st.length; d++) base += starts[d] * st[d];
    return [stridedCopy(x.data, allocStorage(o.dtype, sizeOf(o.shape)), o.shape, st, base)];
  },
});

export const dynamicUpdateSliceP: Primitive<Record<string, never>> = definePrimitive<Record<string, never>>({
  name: 'dynamic_update_slice',
  hlo: 'dynamic-update-slice',
  rules: (self) => ({
    jvp: linearInJvp(self, 2),
    transpose: ([ct], [x, u, ...idx]) => {
      const ix = idx as Array[];
      const ua = isUndef(u) ? u.aval : (u as Array).aval;
      return [
        isUndef(x) ? p1(self, [ct!, zerosOf(ua), ...ix], {}) : null,
        isUndef(u) ? p1(dynamicSliceP, [ct!, ...ix], { sliceSizes: ua.shape }) : null,
        ...ix.map(() => null),
      ];
    },
    batch: (vals, dims, params, n) => {
      if (dims.slice(2).some(isB)) {
        // Batched starts: one overwriting scatter with the batch as a batching dim ('clip' clamps
        // each window into bounds as dynamic_update_slice does).
        const [x, u, ...idx] = vals;
        const ind = concatenate(idx.map((v, i) => reshape(to0(convertElementType(v, 'int32'), dims[i + 2], n), [n, 1])), 1);
        const r = idx.length;
        return [[p1(scatterP, [to0(x, dims[0], n), ind, to0(u, dims[1], n)], {
          dimensionNumbers: { updateWindowDims: range(r, 1), insertedWindowDims: [], scatterDimsToOperandDims: range(r, 1), operandBatchingDims: [0], scatterIndicesBatchingDims: [0] },
          mode: 'clip',
          indicesAreSorted: true,
          uniqueIndices: true,
        })], [0]];
      }
      return [[p1(self, [to0(vals[0], dims[0], n), to0(vals[1], dims[1], n), zeroIdx(), ...vals.slice(2)], params)], [0]];
    },
  }),
  abstractEval([x, update, ...idx]) {
    checkIndexScalars('dynamic_update_slice', idx, x.shape.length, `${x.dtype}${fmt(x.shape)}`);
    if (update.dtype !== x.dtype) throw new TypeError(`dynamic_update_slice: update dtype ${update.dtype} must equal operand dtype ${x.dtype}`);
    if (update.shape.length !== x.shape.length || update.shape.some((u, d) => u > x.shape[d])) {
      throw new Error(`dynamic_update_slice: update ${fmt(update.shape)} must have the operand's rank and fit inside operand ${fmt(x.shape)}`);
    }
    return [{ shape: x.shape, dtype: x.dtype, weakType: x.weakType }];
  },
  impl([x, update, ...idx]) {
    const out = x.data.slice();
    const starts = clampedStarts(idx, x.shape, update.shape);
    const n = update.data.length;
    if (n === 0) return [out];
    const st = stridesOf(x.shape);
    const r = update.shape.length;
    const pos = new Int32Array(r);
    for (let k = 0; k < n; k++) {
      let off = 0;
      for (let d = 0; d < r; d++) off += (starts[d] + pos[d]) * st[d];
      out[off] = update.data[k];
      for (let d = r - 1; d >= 0; d--) {
        if (++pos[d] < update.shape[d]) break;
        pos[d] = 0;
      }
    }
    return [out];
  },
});

export const concatenateP = definePrimitive<{ dimension: number }>({
  name: 'concatenate',
  rules: (self) => ({
    jvp: (xs, ts, params) => [[p1(self, xs, params)], [p1(self, ts.map((t, i) => t ?? zerosOf(xs[i].aval)), params)]],
    transpose: ([ct], xs, { dimension }) => {
      let off = 0;
      return xs.map((x) => {
        const a = isUndef(x) ? x.aval : (x as Array).aval;
        const start = off;
        off += a.shape[dimension];
        if (!isUndef(x)) return null;
        return sliceInDim(ct!, start, start + a.shape[dimension], 1, dimension);
      });
    },
    batch: (vals, dims, { dimension }, n) => [[p1(self, vals.map((v, i) => to0(v, dims[i], n)), { dimension: dimension + 1 })], [0]],
  }),
  abstractEval(xs, { dimension }) {
    if (xs.length === 0) throw new Error('concatenate: needs at least one operand');
    const [a] = xs;
    const r = a.shape.length;
    if (!Number.isInteger(dimension) || dimension < 0 || dimension >= r) {
      throw new RangeError(`concatenate: dimension ${dimension} out of range for operands of rank ${r}`);
    }
    let total = 0;
    for (const x of xs) {
      if (x.dtype !== a.dtype) throw new TypeError(`concatenate: operand dtypes must be equal; got ${xs.map((v) => v.dtype).join(', ')}`);
      const ok = x.shape.length === r && x.shape.every((s, d) => d === dimension || s === a.shape[d]);
      if (!ok) {
        throw new Error(`concatenate: operands must agree in every dimension but ${dimension}; got ${xs.map((v) => fmt(v.shape)).join(', ')}`);
      }
      total += x.shape[dimension];
    }
    const shape = a.shape.slice();
    shape[dimension] = total;
    return [{ shape, dtype: a.dtype, weakType: xs.every((x) => x.weakType) }];
  },
  impl(xs, { dimension }, [o]) {
    const out = allocStorage(o.dtype, sizeOf(o.shape));
    const outer = sizeOf(o.shape.slice(0, dimension));
    const inner = sizeOf(o.shape.slice(dimension + 1));
    const rowOut = o.shape[dimension] * inner;
    let col = 0;
    for (const x of xs) {
      const w = x.shape[dimension] * inner;
      for (let i = 0; i < outer; i++) {
        (out as Float32Array).set(x.data.subarray(i * w, (i + 1) * w) as Float32Array, i * rowOut + col);
      }
      col += w;
    }
    return [out];
  },
});

/** `[low, high, interior]` per dimension. */
export type PaddingConfig = readonly (readonly [number, number, number])[];

export const padP = definePrimitive<{ paddingConfig: PaddingConfig }>({
  name: 'pad',
  rules: (self) => ({
    jvp: linearInJvp(self, 2),
    transpose: ([ct], [x, v], { paddingConfig }) => {
      const c = ct!;
      let tOp: Array | null = null;
      if (isUndef(x)) {
        const unpad = paddingConfig.map(([lo, hi]: [number, number, number]) => [-lo, -hi, 0]);
        const unpadded = p1(self, [c, scalar0(c.dtype)], { paddingConfig: unpad });
        tOp = slice(unpadded, unpadded.shape.map(() => 0), unpadded.shape, paddingConfig.map(([, , i]: [number, number, number]) => i + 1));
      }
      const all = (a: Array) => reduceSum(a, a.shape.map((_, i) => i));
      const tV = isUndef(v) ? (tOp ? sub(all(c), all(tOp)) : all(c)) : null;
      return [tOp, tV];
    },
    batch: (vals, dims, params, n) => {
      if (isB(dims[1])) return loopBatch(self)(vals, dims, params, n);
      return [[p1(self, [to0(vals[0], dims[0], n), vals[1]], { paddingConfig: [[0, 0, 0], ...params.paddingConfig] })], [0]];
    },
  }),
  abstractEval([x, v], { paddingConfig }) {
    if (v.shape.length !== 0) throw new Error(`pad: padding_value must be a scalar; got shape ${fmt(v.shape)}`);
    if (v.dtype !== x.dtype) throw new TypeError(`pad: padding_value dtype ${v.dtype} must equal operand dtype ${x.dtype}`);
    if (paddingConfig.length !== x.shape.length) {
      throw new Error(`pad: padding_config needs one [low, high, interior] per operand dimension (operand ${fmt(x.shape)}); got ${showValue(paddingConfig)}`);
    }
    const shape = paddingConfig.map(([lo, hi, interior], d) => {
      if (![lo, hi, interior].every(Number.isInteger) || interior < 0) {
        throw new RangeError(`pad: padding_config entry ${d} ${showValue([lo, hi, interior])} must be integers with interior >= 0`);
      }
      const n = x.shape[d];
      const size = lo + hi + n + Math.max(0, n - 1) * interior;
      if (size < 0) {
        throw new RangeError(`pad: padding_config entry ${d} ${showValue([lo, hi, interior])} makes dimension ${d} (size ${n}) negative (${size})`);
      }
      return size;
    });
    return [{ shape, dtype: x.dtype, weakType: x.weakType }];
  },
  impl([x, v], { paddingConfig }, [o]) {
    const out = allocStorage(o.dtype, sizeOf(o.shape));
    out.fill(v.data[0] as never);
    const n = x.data.length;
    if (n === 0) return [out];
    const r = x.shape.length;
    const ost = stridesOf(o.shape);
    const pos = new Int32Array(r);
    for (let k = 0; k < n; k++) {
      let off = 0;
      let inside = true;
      for (let d = 0; d < r; d++) {
        const p = paddingConfig[d][0] + pos[d] * (paddingConfig[d][2] + 1);
        if (p < 0 || p >= o.shape[d]) {
          inside = false;
          break;
        }
        off += p * ost[d];
      }
      if (inside) out[off] = x.data[k];
      for (let d = r - 1; d >= 0; d--) {
        if (++pos[d] < x.shape[d]) break;
        pos[d] = 0;
      }
    }
    return [out];
  },
});

// ---------------------------------------------------------------------------------------------
// Batching helpers

const range = (k: number, st = 0): number[] => globalThis.Array.from({ length: k }, (_, i) => st + i);

/**
 * dynamic_slice with batched start indices: a gather whose index vectors are the per-member
 * starts ([n, rank]), with the operand's batch dim (if any) as a batching dim. Gather's 'clip'
 * mode clamps each window into bounds exactly as dynamic_slice does.
 */
function dynamicSliceAsGather(vals: Array[], dims: BDim[], sliceSizes: readonly number[], n: number): Array {
  const [x, ...idx] = vals;
  const starts = idx.map((v, i) => reshape(to0(convertElementType(v, 'int32'), dims[i + 1], n), [n, 1]));
  const ind = concatenate(starts, 1);
  const r = idx.length;
  const common = { mode: 'clip', fillValue: null, indicesAreSorted: false, uniqueIndices: false };
  if (dims[0] === null) {
    return p1(gatherP, [x, ind], {
      ...common,
      dimensionNumbers: { offsetDims: range(r, 1), collapsedSliceDims: [], startIndexMap: range(r), operandBatchingDims: [], startIndicesBatchingDims: [] },
      sliceSizes,
    });
  }
  return p1(gatherP, [to0(x, dims[0], n), ind], {
    ...common,
    dimensionNumbers: { offsetDims: range(r, 1), collapsedSliceDims: [], startIndexMap: range(r, 1), operandBatchingDims: [0], startIndicesBatchingDims: [0] },
    sliceSizes: [1, ...sliceSizes],
  });
}

/**
 * The fallback for batching cases without a vectorised rule (a batched padding value): one
 * application per batch member, stacked. Correct for any primitive.
 */
function loopBatch(prim: Primitive): BatchRule {
  return (vals, dims, params, n) => {
    const per: Array[][] = [];
    for (let b = 0; b < n; b++) {
      per.push(bind(prim, vals.map((v, i) => (dims[i] === null ? v : squeeze(sliceInDim(v, b, b + 1, 1, dims[i]!), [dims[i]!]))), params));
    }
    return [per[0].map((_, k) => concatenate(per.map((p) => reshape(p[k], [1, ...p[k].shape])), 0)), per[0].map(() => 0)];
  };
}

// ---------------------------------------------------------------------------------------------
// The lax ops (re-exported by ops.ts)


/** `lax.slice(x, startIndices, limitIndices, strides?)`: a static strided window. */
export function slice(x: ArrayLike, startIndices: readonly number[], limitIndices: readonly number[], strides?: readonly number[] | null): Array {
  const a = asArray(x, { op: 'slice' });
  return bind1(sliceP, [a], {
    startIndices: ints('slice', 'start_indices', startIndices),
    limitIndices: ints('slice', 'limit_indices', limitIndices),
    strides: strides ? ints('slice', 'strides', strides) : null,
  });
}

/** `lax.slice_in_dim`: slice one axis, keeping the others whole. Negative bounds count from the end. */
export function sliceInDim(x: ArrayLike, startIndex: number | null, limitIndex: number | null, stride = 1, axis = 0): Array {
  const a = asArray(x, { op: 'slice_in_dim' });
  const ax = normalizeAxis(axis, a.ndim, 'slice_in_dim');
  const n = a.shape[ax];
  const s = startIndex === null ? 0 : startIndex < 0 ? startIndex + n : startIndex;
  const l = limitIndex === null ? n : limitIndex < 0 ? limitIndex + n : limitIndex;
  const start = a.shape.map((_, d) => (d === ax ? s : 0));
  const limit = a.shape.map((m, d) => (d === ax ? l : m));
  const str = a.shape.map((_, d) => (d === ax ? stride : 1));
  return slice(a, start, limit, str);
}

/** `lax.concatenate(operands, dimension)`; operands must share dtype and all other dimensions. */
export function concatenate(xs: readonly ArrayLike[], dimension: number): Array {
  if (xs.length === 0) throw new Error('concatenate: needs at least one operand');
  const arrays = operands('concatenate', [...xs]);
  const dim = normalizeAxis(dimension, arrays[0].ndim, 'concatenate', 'dimension');
  if (arrays.length === 1) return arrays[0];
  return bind1(concatenateP, arrays, { dimension: dim });
}


/** Start indices as int32 scalars (JS integers or integer scalar Arrays). */
function startScalars(op: string, startIndices: readonly (number | Array)[]): Array[] {
  return startIndices.map((s, i) => {
    if (typeof s === 'number') {
      if (!Number.isInteger(s)) throw new TypeError(`${op}: start index ${i} must be an integer; got ${s}`);
      return asArray(s, { dtype: 'int32', op });
    }
    if (!(s instanceof Array) || s.ndim !== 0) throw new TypeError(`${op}: start index ${i} must be an integer or an integer scalar Array; got ${String(s)}`);
    return s.dtype === 'int32' ? s : convertElementType(s, 'int32');
  });
}

/** `lax.dynamic_slice`: starts may be traced scalars; they are clamped so the slice fits. */
export function dynamicSlice(x: ArrayLike, startIndices: readonly (number | Array)[], sliceSizes: readonly number[]): Array {
  const a = asArray(x, { op: 'dynamic_slice' });
  return bind1(dynamicSliceP, [a, ...startScalars('dynamic_slice', startIndices)], { sliceSizes: ints('dynamic_slice', 'slice_sizes', sliceSizes) });
}

/** `lax.dynamic_slice_in_dim`. */
export function dynamicSliceInDim(x: ArrayLike, startIndex: number | Array, sliceSize: number, axis = 0): Array {
  const a = asArray(x, { op: 'dynamic_slice_in_dim' });
  const ax = normalizeAxis(axis, a.ndim, 'dynamic_slice_in_dim');
  const starts = a.shape.map((_, d) => (d === ax ? startIndex : 0));
  return dynamicSlice(a, starts, a.shape.map((m, d) => (d === ax ? sliceSize : m)));
}

/** `lax.index_in_dim`: one static position along `axis` (negative counts from the end), kept as a size-1 dim unless `keepdims` is false. */
export function indexInDim(x: ArrayLike, index: number, axis = 0, keepdims = true): Array {
  const a = asArray(x, { op: 'index_in_dim' });
  const ax = normalizeAxis(axis, a.ndim, 'index_in_dim');
  const n = a.shape[ax];
  const i = index < 0 ? index + n : index;
  if (!Number.isInteger(index) || i < 0 || i >= n) throw new RangeError(`index_in_dim: index ${index} is out of bounds for axis ${ax} with size ${n}`);
  const out = sliceInDim(a, i, i + 1, 1, ax);
  return keepdims ? out : squeeze(out, [ax]);
}

/** `lax.dynamic_index_in_dim`: like index_in_dim with a (possibly traced) start, clamped. */
export function dynamicIndexInDim(x: ArrayLike, index: number | Array, axis = 0, keepdims = true): Array {
  const a = asArray(x, { op: 'dynamic_index_in_dim' });
  const ax = normalizeAxis(axis, a.ndim, 'dynamic_index_in_dim');
  const out = dynamicSliceInDim(a, index, 1, ax);
  return keepdims ? out : squeeze(out, [ax]);
}

/** `lax.dynamic_update_slice_in_dim`: writes `update` at `startIndex` along `axis` (clamped). */
export function dynamicUpdateSliceInDim(x: ArrayLike, update: ArrayLike, startIndex: number | Array, axis: number): Array {
  const a = asArray(x, { op: 'dynamic_update_slice_in_dim' });
  const ax = normalizeAxis(axis, a.ndim, 'dynamic_update_slice_in_dim');
  return dynamicUpdateSlice(a, update, a.shape.map((_, d) => (d === ax ? startIndex : 0)));
}

/** `lax.dynamic_update_index_in_dim`: writes a slab of size 1 (given with or without that dim) at `index`. */
export function dynamicUpdateIndexInDim(x: ArrayLike, update: ArrayLike, index: number | Array, axis: number): Array {
  const a = asArray(x, { op: 'dynamic_update_index_in_dim' });
  const ax = normalizeAxis(axis, a.ndim, 'dynamic_update_index_in_dim');
  let u = update instanceof Array ? update : asArray(update, { dtype: a.dtype, op: 'dynamic_update_index_in_dim' });
  if (u.ndim === a.ndim - 1) u = expandDims(u, [ax]);
  return dynamicUpdateSliceInDim(a, u, index, ax);
}

/** `lax.dynamic_update_slice`: writes `update` at clamped starts. */
export function dynamicUpdateSlice(x: ArrayLike, update: ArrayLike, startIndices: readonly (number | Array)[]): Array {
  const a = asArray(x, { op: 'dynamic_update_slice' });
  const u = update instanceof Array ? update : asArray(update, { dtype: a.dtype, op: 'dynamic_update_slice' });
  return bind1(dynamicUpdateSliceP, [a, u, ...startScalars('dynamic_update_slice', startIndices)], {});
}

/** `lax.pad(x, paddingValue, [[lo, hi, interior], ...])`; negative lo/hi crop. */
export function pad(x: ArrayLike, paddingValue: ArrayLike, paddingConfig: readonly (readonly [number, number, number])[]): Array {
  const a = asArray(x, { op: 'pad' });
  const v = paddingValue instanceof Array ? paddingValue : asArray(paddingValue, { dtype: a.dtype, op: 'pad' });
  return bind1(padP, [a, v], { paddingConfig: paddingConfig.map((c) => [c[0], c[1], c[2]] as [number, number, number]) });
}
