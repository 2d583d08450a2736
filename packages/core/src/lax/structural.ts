/**
 * Structural primitives: broadcast_in_dim, reshape, transpose, rev, squeeze, iota. Their kernels
 * are strided copies; their shape rules carry most of the user-facing error messages for shape
 * manipulation.
 */
import { numbersToStorage } from '../array';
import { type DType, allocStorage, checkDType, isFloat } from '../dtype';
import { definePrimitive } from '../primitive';
import { checkPermutation, checkShape, fmt, sizeOf, stridesOf } from '../shape';
import { stridedCopy } from './strided';
import { showValue } from '../describe';

export const broadcastInDim = definePrimitive<{ shape: readonly number[]; broadcastDimensions: readonly number[] }>({
  name: 'broadcast_in_dim',
  abstractEval([x], { shape, broadcastDimensions: bd }) {
    checkShape(shape, 'broadcast_in_dim');
    if (bd.length !== x.shape.length) {
      throw new Error(`broadcast_in_dim: broadcast_dimensions ${showValue(bd)} must have one entry per operand dimension (operand ${fmt(x.shape)})`);
    }
    for (let i = 0; i < bd.length; i++) {
      const d = bd[i];
      if (!Number.isInteger(d) || d < 0 || d >= shape.length || (i > 0 && d <= bd[i - 1])) {
        throw new Error(`broadcast_in_dim: broadcast_dimensions ${showValue(bd)} must be strictly increasing and within rank ${shape.length}`);
      }
      if (x.shape[i] !== 1 && x.shape[i] !== shape[d]) {
        throw new Error(`broadcast_in_dim: operand ${fmt(x.shape)} cannot broadcast to ${fmt(shape)} with broadcast_dimensions ${showValue(bd)}`);
      }
    }
    return [{ shape: shape.slice(), dtype: x.dtype, weakType: x.weakType }];
  },
  impl([x], { shape, broadcastDimensions: bd }, [o]) {
    const inSt = stridesOf(x.shape);
    const st = new Array<number>(shape.length).fill(0);
    bd.forEach((d, i) => {
      st[d] = x.shape[i] === 1 ? 0 : inSt[i];
    });
    return [stridedCopy(x.data, allocStorage(o.dtype, sizeOf(shape)), shape, st)];
  },
});

export const reshape = definePrimitive<{ newSizes: readonly number[] }>({
  name: 'reshape',
  abstractEval([x], { newSizes }) {
    checkShape(newSizes, 'reshape', 'new_sizes');
    if (sizeOf(newSizes) !== sizeOf(x.shape)) {
      throw new Error(`reshape: cannot reshape ${fmt(x.shape)} (size ${sizeOf(x.shape)}) to ${fmt(newSizes)} (size ${sizeOf(newSizes)})`);
    }
    return [{ shape: newSizes.slice(), dtype: x.dtype, weakType: x.weakType }];
  },
  impl([x]) {
    return [x.data.slice()];
  },
});

export const transpose = definePrimitive<{ permutation: readonly number[] }>({
  name: 'transpose',
  abstractEval([x], { permutation }) {
    const p = checkPermutation(permutation, x.shape.length, 'transpose');
    return [{ shape: p.map((a) => x.shape[a]), dtype: x.dtype, weakType: x.weakType }];
  },
  impl([x], { permutation }, [o]) {
    const inSt = stridesOf(x.shape);
    const st = permutation.map((a) => inSt[a]);
    return [stridedCopy(x.data, allocStorage(o.dtype, x.data.length), o.shape, st)];
  },
});

export const rev = definePrimitive<{ dimensions: readonly number[] }>({
  name: 'rev',
  abstractEval([x], { dimensions }) {
    for (const d of dimensions) {
      if (!Number.isInteger(d) || d < 0 || d >= x.shape.length) throw new RangeError(`rev: dimension ${d} out of range for rank ${x.shape.length}`);
    }
    return [x];
  },
  impl([x], { dimensions }, [o]) {
    const st = stridesOf(x.shape);
    let base = 0;
    for (const d of dimensions) {
      base += (x.shape[d] - 1) * st[d];
      st[d] = -st[d];
    }
    return [stridedCopy(x.data, allocStorage(o.dtype, x.data.length), x.shape, st, base)];
  },
});

export const squeeze = definePrimitive<{ dimensions: readonly number[] }>({
  name: 'squeeze',
  abstractEval([x], { dimensions }) {
    for (const d of dimensions) {
      if (!Number.isInteger(d) || d < 0 || d >= x.shape.length) throw new RangeError(`squeeze: dimension ${d} out of range for rank ${x.shape.length}`);
      if (x.shape[d] !== 1) throw new Error(`squeeze: cannot squeeze dimension ${d} of size ${x.shape[d]} (shape ${fmt(x.shape)})`);
    }
    return [{ shape: x.shape.filter((_, i) => !dimensions.includes(i)), dtype: x.dtype, weakType: x.weakType }];
  },
  impl([x]) {
    return [x.data.slice()];
  },
});

/** `lax.iota` generalised as `broadcasted_iota`: values count along `dimension`. */
export const iota = definePrimitive<{ dtype: DType; shape: readonly number[]; dimension: number }>({
  name: 'iota',
  abstractEval(_avals, { dtype, shape, dimension }) {
    checkDType(dtype, 'iota');
    if (dtype === 'bool') throw new TypeError('iota: dtype must be numeric; got bool');
    checkShape(shape, 'iota');
    if (!Number.isInteger(dimension) || dimension < 0 || dimension >= shape.length) {
      throw new RangeError(`iota: dimension ${dimension} out of range for shape ${fmt(shape)}`);
    }
    return [{ shape: shape.slice(), dtype, weakType: false }];
  },
  impl(_inputs, { dtype, shape, dimension }) {
    const n = sizeOf(shape);
    const st = stridesOf(shape);
    const vals = isFloat(dtype) ? new Float32Array(n) : allocStorage(dtype, n);
    for (let i = 0; i < n; i++) vals[i] = Math.floor(i / st[dimension]) % shape[dimension];
    if (dtype === 'bfloat16' || dtype === 'float16') {
      // Values are small integers; round once into the 16-bit format.
      return [numbersToStorage(vals as Float32Array, dtype)];
    }
    return [vals];
  },
});
