/**
 * Structural primitives: broadcast_in_dim, reshape, transpose, rev, squeeze, iota, and
 * reduce_sum (here because it and broadcast_in_dim are each other's transpose), with their rules
 * and their lax ops. Their kernels are strided copies; their shape rules carry most of the
 * user-facing error messages for shape manipulation. This is the lowest lax layer: every other
 * primitive's rules broadcast, move batch dims (`moveBdim`) or build zeros (`zerosOf`) with it.
 */
import { Array, numbersToStorage } from '../array';
import { type ArrayLike, asArray } from '../convert';
import { type DType, allocStorage, checkDType, isFloat, isInteger } from '../dtype';
import { type BatchRule, type BDim, type JvpRule, NON_LINEAR, NOT_DIFFERENTIABLE, type Primitive, type ShapedArray, definePrimitive } from '../primitive';
import { checkPermutation, checkShape, fmt, normalizeAxis, sizeOf, stridesOf } from '../shape';
import { bind1 } from '../trace';
import { reduction } from './reduceKernels';
import { lin1, linearJvp, p1, shift } from './ruleKit';
import { stridedCopy } from './strided';
import { showValue } from '../describe';

/** Batching rule of a one-operand primitive re-expressed on a leading batch dim. */
export const front = (f: (x: Array, params: any, n: number) => Array): BatchRule => ([x], [d], params, n) => [[f(moveBdim(x, d, 0, n), params, n)], [0]];

export const broadcastInDimP = definePrimitive<{ shape: readonly number[]; broadcastDimensions: readonly number[] }>({
  name: 'broadcast_in_dim',
  hlo: 'broadcast',
  rules: (self) => ({
    jvp: linearJvp(self),
    transpose: lin1((ct, x, { broadcastDimensions }) => unbroadcastTo(ct, x.aval.shape, broadcastDimensions)),
    batch: front((x, { shape, broadcastDimensions }, n) => broadcastInDim(x, [n, ...shape], [0, ...shift(broadcastDimensions)])),
  }),
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
    const st = new globalThis.Array<number>(shape.length).fill(0);
    bd.forEach((d, i) => {
      st[d] = x.shape[i] === 1 ? 0 : inSt[i];
    });
    return [stridedCopy(x.data, allocStorage(o.dtype, sizeOf(shape)), shape, st)];
  },
});

export const reshapeP = definePrimitive<{ newSizes: readonly number[] }>({
  name: 'reshape',
  stablehlo: 'reshape',
  rules: (self) => ({
    jvp: linearJvp(self),
    transpose: lin1((ct, x) => reshape(ct, x.aval.shape)),
    batch: front((x, { newSizes }, n) => reshape(x, [n, ...newSizes])),
  }),
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

export const transposeP = definePrimitive<{ permutation: readonly number[] }>({
  name: 'transpose',
  rules: (self) => ({
    jvp: linearJvp(self),
    transpose: lin1((ct, _x, { permutation }) => {
      const inv = new globalThis.Array<number>(permutation.length);
      permutation.forEach((p: number, i: number) => (inv[p] = i));
      return transpose(ct, inv);
    }),
    batch: front((x, { permutation }) => transpose(x, [0, ...shift(permutation)])),
  }),
  abstractEval([x], { permutation }) {
    const p = checkPermutation(permutation, x.shape.length, 'transpose');
    return [{ shape: p.map((a) => x.shape[a]), dtype: x.dtype, weakType: x.weakType }];
  },
  impl([x], { permutation }, [o]) {
    return [stridedCopy(x.data, allocStorage(o.dtype, x.data.length), o.shape, permutedStrides(x.shape, permutation))];
  },
  implInto([x], { permutation }, o, out) {
    stridedCopy(x.data, out, o.shape, permutedStrides(x.shape, permutation));
  },
});

/** The row-major strides of `shape`, read in the order of `permutation` (a transpose's input strides per output dim). */
function permutedStrides(shape: readonly number[], permutation: readonly number[]): number[] {
  const st = stridesOf(shape);
  return permutation.map((a) => st[a]);
}

export const revP = definePrimitive<{ dimensions: readonly number[] }>({
  name: 'rev',
  hlo: 'reverse',
  rules: (self) => ({
    jvp: linearJvp(self),
    transpose: lin1((ct, _x, { dimensions }) => rev(ct, dimensions)),
    batch: front((x, { dimensions }) => rev(x, shift(dimensions))),
  }),
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

export const squeezeP = definePrimitive<{ dimensions: readonly number[] }>({
  name: 'squeeze',
  rules: (self) => ({
    jvp: linearJvp(self),
    transpose: lin1((ct, x) => reshape(ct, x.aval.shape)),
    batch: front((x, { dimensions }) => squeeze(x, shift(dimensions))),
  }),
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
export const iotaP = definePrimitive<{ dtype: DType; shape: readonly number[]; dimension: number }>({
  name: 'iota',
  rules: {
    jvp: NOT_DIFFERENTIABLE,
    transpose: NON_LINEAR,
    // iota has no operands, so it is never batched; its rule exists for completeness.
    batch: () => {
      throw new Error('vmap: iota has no operands and cannot be batched');
    },
  },
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

export const reduceSumP = reduction('reduce_sum', () => 0, (a, v, d) => (isInteger(d) ? (d === 'uint32' ? (a + v) >>> 0 : (a + v) | 0) : a + v), 'num', (self) => ({
  jvp: linearJvp(self),
  transpose: lin1((ct, x, { axes }) => broadcastInDim(ct, x.aval.shape, x.aval.shape.map((_, i) => i).filter((i) => !axes.includes(i)))),
  batch: front((x, p) => p1(self, [x], { ...p, axes: shift(p.axes) })),
}));

/** Sums `ct` (shaped like a broadcast result) back to `shape`: broadcast_in_dim's transpose. */
function unbroadcastTo(ct: Array, shape: readonly number[], bd: readonly number[]): Array {
  const outRank = ct.ndim;
  const sumDims: number[] = [];
  for (let d = 0; d < outRank; d++) {
    const i = bd.indexOf(d);
    if (i < 0 || (shape[i] === 1 && ct.shape[d] !== 1)) sumDims.push(d);
  }
  const s = sumDims.length ? reduceSum(ct, sumDims) : ct;
  return s.shape.length === shape.length && s.shape.every((n, i) => n === shape[i]) ? s : reshape(s, shape);
}

// ---------------------------------------------------------------------------------------------
// The lax ops (re-exported by ops.ts)

export function broadcastInDim(x: ArrayLike, shape: readonly number[], broadcastDimensions: readonly number[]): Array {
  return bind1(broadcastInDimP, [asArray(x, { op: 'broadcast_in_dim' })], { shape: [...shape], broadcastDimensions: [...broadcastDimensions] });
}

/** `lax.broadcast(x, sizes)`: prepends dimensions. */
export function broadcast(x: ArrayLike, sizes: readonly number[]): Array {
  const a = asArray(x, { op: 'broadcast' });
  return broadcastInDim(a, [...sizes, ...a.shape], a.shape.map((_, i) => i + sizes.length));
}

export function reshape(x: ArrayLike, newSizes: readonly number[], dimensions?: readonly number[]): Array {
  let a = asArray(x, { op: 'reshape' });
  if (dimensions) a = transpose(a, dimensions);
  return bind1(reshapeP, [a], { newSizes: [...newSizes] });
}

export function transpose(x: ArrayLike, permutation: readonly number[]): Array {
  const a = asArray(x, { op: 'transpose' });
  const perm = permutation.map((p) => normalizeAxis(p, a.ndim, 'transpose', 'permutation'));
  if (perm.every((p, i) => p === i) && perm.length === a.ndim) return a;
  return bind1(transposeP, [a], { permutation: perm });
}

export function rev(x: ArrayLike, dimensions: readonly number[]): Array {
  const a = asArray(x, { op: 'rev' });
  return bind1(revP, [a], { dimensions: dimensions.map((d) => normalizeAxis(d, a.ndim, 'rev', 'dimensions')) });
}

export function squeeze(x: ArrayLike, dimensions: readonly number[]): Array {
  const a = asArray(x, { op: 'squeeze' });
  return bind1(squeezeP, [a], { dimensions: dimensions.map((d) => normalizeAxis(d, a.ndim, 'squeeze', 'dimensions')) });
}

export function expandDims(x: ArrayLike, dimensions: readonly number[]): Array {
  const a = asArray(x, { op: 'expand_dims' });
  const rank = a.ndim + dimensions.length;
  const dims = dimensions.map((d) => normalizeAxis(d, rank, 'expand_dims', 'dimensions')).sort((p, q) => p - q);
  const shape = a.shape.slice();
  for (const d of dims) shape.splice(d, 0, 1);
  return reshape(a, shape);
}

export function iota(dtype: DType, size: number): Array {
  return bind1(iotaP, [], { dtype, shape: [size], dimension: 0 });
}

export function broadcastedIota(dtype: DType, shape: readonly number[], dimension: number): Array {
  return bind1(iotaP, [], { dtype, shape: [...shape], dimension });
}

/** A reduction op over `axes` (negative axes count from the end). */
export const reductionOp = (p: Primitive) => (x: ArrayLike, axes: readonly number[]): Array => {
  const a = asArray(x, { op: p.name });
  return bind1(p, [a], { axes: axes.map((d) => normalizeAxis(d, a.ndim, p.name, 'axes')) });
};
export const reduceSum = reductionOp(reduceSumP);

// ---------------------------------------------------------------------------------------------
// What rules of every layer build on: operands from JS scalars, batch dims, zeros

/** A list of integers, or an error naming the op and the argument. */
export const ints = (op: string, arg: string, xs: readonly number[]): number[] => {
  if (!globalThis.Array.isArray(xs) || !xs.every((v) => Number.isInteger(v))) {
    throw new TypeError(`${op}: ${arg} must be a list of integers; got ${showValue(xs)}`);
  }
  return [...xs];
};

/** Operands of a lax op: Arrays stay as they are; JS scalars take the dtype of the first Array. */
export function operands(op: string, xs: ArrayLike[]): Array[] {
  const first = xs.find((x): x is Array => x instanceof Array);
  return xs.map((x) => (x instanceof Array ? x : first && (typeof x === 'number' || typeof x === 'boolean') ? scalarLike(x, first, op) : asArray(x, { op })));
}

/** A JS scalar as an operand like `like`. lax does not promote, so a value the dtype cannot hold
 * exactly (1.5 as int32, 2 as bool, NaN as uint8) is an error instead of a silent conversion. */
function scalarLike(v: number | boolean, like: Array, op: string): Array {
  const n = Number(v);
  const exact = isFloat(like.dtype) || (like.dtype === 'bool' ? n === 0 || n === 1 : Number.isInteger(n));
  if (!exact) {
    throw new TypeError(`${op}: JS value ${v} cannot be a ${like.dtype} operand (lax does not promote); use the np function or convert the array first`);
  }
  const s = asArray(v, { dtype: like.dtype, op });
  if (like.ndim === 0) return s;
  return bind1(broadcastInDimP, [s], { shape: like.shape, broadcastDimensions: [] });
}

/** Moves the batch dim of `x` to position `to` (broadcasting an unbatched value). */
export function moveBdim(x: Array, from: BDim, to: number, size: number): Array {
  if (from === null) {
    const shape = x.shape.slice();
    shape.splice(to, 0, size);
    return broadcastInDim(x, shape, x.shape.map((_, i) => (i < to ? i : i + 1)));
  }
  if (from === to) return x;
  const perm = x.shape.map((_, i) => i).filter((i) => i !== from);
  perm.splice(to, 0, from);
  return transpose(x, perm);
}

/** Only floating values carry tangents; integer and bool values have zero tangent (JAX's float0). */
export function isDifferentiable(a: ShapedArray): boolean {
  return isFloat(a.dtype);
}

export function zerosOf(a: ShapedArray): Array {
  return filled(0, a);
}

/** An array shaped and typed like `a`, filled with `v`. */
export function filled(v: number, a: ShapedArray): Array {
  const z = asArray(v, { dtype: a.dtype });
  return a.shape.length === 0 ? z : broadcastInDim(z, a.shape, []);
}

export function fullLike(v: number, x: Array): Array {
  return filled(v, x.aval);
}

/** A tangent or cotangent that may be a symbolic zero (null) as an array. */
export function instantiate(t: Array | null, a: ShapedArray): Array {
  return t ?? zerosOf(a);
}

/** The jvp rule of a primitive linear in its first `nLinear` operands; the rest (indices) carry no tangent. */
export function linearInJvp(prim: Primitive, nLinear: number): JvpRule {
  return (xs, ts, params) => {
    const y = p1(prim, xs, params);
    const lin = ts.slice(0, nLinear);
    if (lin.every((t) => t === null)) return [[y], [null]];
    return [[y], [p1(prim, [...lin.map((t, i) => instantiate(t, xs[i].aval)), ...xs.slice(nLinear)], params)]];
  };
}
