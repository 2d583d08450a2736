/**
 * The shape rules and reference kernels of the reductions, as factories the primitive
 * definitions call with their rules: over a set of axes (reduce_sum in structural.ts, the others
 * in reduce.ts), argmax / argmin along one axis, cumulative ops along one axis. Float reductions
 * accumulate in float64 and round once to the output dtype (what XLA does for bf16 is accumulate
 * in f32; the oracle is at least that accurate).
 */
import { numbersToStorage, storageToNumbers } from '../array';
import { type DType, allocStorage, is16BitFloat, isFloat, isInteger } from '../dtype';
import { type HostArray, type PrimitiveDef, type ShapedArray, definePrimitive } from '../primitive';
import { fmt, sizeOf, stridesOf } from '../shape';
import { stridedCopy } from './strided';
import { showValue } from '../describe';

function checkAxes(name: string, x: ShapedArray, axes: readonly number[]): void {
  for (const a of axes) {
    if (!Number.isInteger(a) || a < 0 || a >= x.shape.length) {
      throw new RangeError(`${name}: axis ${a} out of range for operand ${x.dtype}${fmt(x.shape)}`);
    }
  }
  if (new Set(axes).size !== axes.length) throw new Error(`${name}: repeated axes ${showValue(axes)}`);
}

/** Values of `x` as numbers, permuted so the reduced axes are innermost: [outer, inner]. */
function moveAxesLast(x: HostArray, axes: readonly number[]): { vals: ArrayLike<number>; outer: number; inner: number } {
  const keep = x.shape.map((_, i) => i).filter((i) => !axes.includes(i));
  const perm = [...keep, ...[...axes].sort((a, b) => a - b)];
  const inner = sizeOf(axes.map((a) => x.shape[a]));
  const outer = sizeOf(keep.map((a) => x.shape[a]));
  const nums = storageToNumbers(x.data, x.dtype);
  const identity = perm.every((p, i) => p === i);
  if (identity) return { vals: nums, outer, inner };
  const st = stridesOf(x.shape);
  const out = stridedCopy(nums, new Float64Array(nums.length), perm.map((p) => x.shape[p]), perm.map((p) => st[p]));
  return { vals: out, outer, inner };
}

export type ReduceParams = { axes: readonly number[] };

function storeReduced(acc: Float64Array, dtype: DType): ReturnType<typeof allocStorage> {
  if (isFloat(dtype)) return dtype === 'float32' ? Float32Array.from(acc) : numbersToStorage(Float32Array.from(acc), dtype);
  return numbersToStorage(acc, dtype);
}

export function reduction(name: string, init: (d: DType) => number, step: (acc: number, v: number, d: DType) => number, kinds: 'num' | 'bool', rules: PrimitiveDef<ReduceParams>['rules']) {
  return definePrimitive<ReduceParams>({
    name,
    hlo: 'reduce',
    rules,
    abstractEval([x], { axes }) {
      checkAxes(name, x, axes);
      if (kinds === 'bool' && x.dtype !== 'bool' && !isInteger(x.dtype)) throw new TypeError(`${name}: needs bool or integer operand; got ${x.dtype}`);
      if (kinds === 'num' && x.dtype === 'bool' && name !== 'reduce_max' && name !== 'reduce_min') throw new TypeError(`${name}: does not accept bool; convert first`);
      return [{ shape: x.shape.filter((_, i) => !axes.includes(i)), dtype: x.dtype, weakType: x.weakType }];
    },
    impl([x], { axes }, [o]) {
      const { vals, outer, inner } = moveAxesLast(x, axes);
      const acc = new Float64Array(outer);
      const d = x.dtype;
      for (let i = 0; i < outer; i++) {
        let a = init(d);
        const base = i * inner;
        for (let j = 0; j < inner; j++) a = step(a, vals[base + j], d);
        acc[i] = a;
      }
      return [storeReduced(acc, o.dtype)];
    },
  });
}

export function maxInit(d: DType): number {
  return isFloat(d) ? -Infinity : d === 'int8' ? -128 : d === 'int32' ? -2147483648 : 0;
}
export function minInit(d: DType): number {
  return isFloat(d) ? Infinity : d === 'int8' ? 127 : d === 'uint8' ? 255 : d === 'int32' ? 2147483647 : d === 'bool' ? 1 : 4294967295;
}
export const nanMax = (a: number, v: number): number => (v > a || Number.isNaN(v) || Number.isNaN(a) ? (Number.isNaN(a) ? a : v) : a);
export const nanMin = (a: number, v: number): number => (v < a || Number.isNaN(v) || Number.isNaN(a) ? (Number.isNaN(a) ? a : v) : a);

export type ArgParams = { axis: number; indexDtype: DType };

export function argReduction(name: string, better: (v: number, best: number) => boolean, rules: PrimitiveDef<ArgParams>['rules']) {
  return definePrimitive<ArgParams>({
    name,
    rules,
    abstractEval([x], { axis, indexDtype }) {
      checkAxes(name, x, [axis]);
      if (x.shape[axis] === 0) throw new Error(`${name}: cannot take ${name} of an empty axis ${axis} (shape ${fmt(x.shape)})`);
      if (indexDtype !== 'int32' && indexDtype !== 'uint32') throw new TypeError(`${name}: index_dtype must be int32 or uint32; got ${indexDtype}`);
      return [{ shape: x.shape.filter((_, i) => i !== axis), dtype: indexDtype, weakType: false }];
    },
    impl([x], { axis }, [o]) {
      const { vals, outer, inner } = moveAxesLast(x, [axis]);
      const out = allocStorage(o.dtype, outer);
      for (let i = 0; i < outer; i++) {
        const base = i * inner;
        let bi = 0;
        let best = vals[base];
        if (!Number.isNaN(best)) {
          for (let j = 1; j < inner; j++) {
            const v = vals[base + j];
            if (Number.isNaN(v)) {
              bi = j;
              break;
            }
            if (better(v, best)) {
              best = v;
              bi = j;
            }
          }
        }
        out[i] = bi;
      }
      return [out];
    },
  });
}

export type CumParams = { axis: number; reverse: boolean };

export function cumulative(name: string, step: (acc: number, v: number, d: DType) => number, rules: PrimitiveDef<CumParams>['rules']) {
  return definePrimitive<CumParams>({
    name,
    rules,
    abstractEval([x], { axis }) {
      checkAxes(name, x, [axis]);
      if (x.dtype === 'bool') throw new TypeError(`${name}: does not accept bool; convert first`);
      return [x];
    },
    impl([x], { axis, reverse }, [o]) {
      const nums = storageToNumbers(x.data, x.dtype);
      const st = stridesOf(x.shape);
      const len = x.shape[axis];
      const stride = st[axis];
      const n = nums.length;
      const acc = new Float64Array(n);
      const d = x.dtype;
      const blocks = len === 0 ? 0 : n / len;
      for (let b = 0; b < blocks; b++) {
        // Base offset of line b: outer index * (len * stride) + inner index.
        const outerIdx = Math.floor(b / stride);
        const innerIdx = b % stride;
        const base = outerIdx * len * stride + innerIdx;
        let a = NaN;
        for (let k = 0; k < len; k++) {
          const j = reverse ? len - 1 - k : k;
          const p = base + j * stride;
          a = k === 0 ? nums[p] : step(a, nums[p], d);
          if (isFloat(d) && !is16BitFloat(d)) a = Math.fround(a);
          acc[p] = a;
        }
      }
      return [storeReduced(acc, o.dtype)];
    },
  });
}

