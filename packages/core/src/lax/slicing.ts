/**
 * Slicing primitives with jax.lax semantics: static `slice` (with strides), `dynamic_slice` and
 * `dynamic_update_slice` (start indices are scalar operands, clamped so the window fits, as XLA
 * does), `concatenate` and `pad` (negative low/high padding crops; interior padding inserts
 * values between elements). Basic NumPy indexing lowers to these; gather/scatter (gather.ts,
 * scatter.ts) handle the rest. Params are plain data so the transformations can write rules
 * against them. Kernels move storage words, so bfloat16/float16 data is copied bit-exactly.
 */
import { allocStorage, isInteger } from '../dtype';
import { type HostArray, type ShapedArray, definePrimitive } from '../primitive';
import { fmt, sizeOf, stridesOf } from '../shape';
import { stridedCopy } from './strided';
import { showValue } from '../describe';

export interface SliceParams {
  startIndices: readonly number[];
  limitIndices: readonly number[];
  /** null means all 1. */
  strides: readonly number[] | null;
}

export const slice = definePrimitive<SliceParams>({
  name: 'slice',
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

export const dynamicSlice = definePrimitive<{ sliceSizes: readonly number[] }>({
  name: 'dynamic_slice',
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

export const dynamicUpdateSlice = definePrimitive<Record<string, never>>({
  name: 'dynamic_update_slice',
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

export const concatenate = definePrimitive<{ dimension: number }>({
  name: 'concatenate',
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

export const pad = definePrimitive<{ paddingConfig: PaddingConfig }>({
  name: 'pad',
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
