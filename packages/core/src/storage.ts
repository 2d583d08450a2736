/**
 * Raw storage access for libraries that move array bytes around without arithmetic
 * (checkpointing, transfer): `toStorage` hands out an array's storage-format contents (bfloat16
 * and float16 as their 16-bit patterns, so a round trip is bit-exact), `fromStorage` wraps such
 * data back into an Array. Neither copies on the reference backend; treat the data as read-only.
 */
import { Array } from './array';
import { type DType, type StorageArray, allocStorage, checkDType, isStorageOf } from './dtype';
import { type Shape, fmt, sizeOf } from './shape';

/**
 * The storage-format contents of `x` in row-major order: bf16/f16 as Uint16Array bit patterns,
 * bool as Uint8Array of 0/1. A view, not a copy, where the backend allows: do not mutate it.
 * Sharded arrays are assembled from their shards (use `x.addressableShards` to avoid that).
 */
export function toStorage(x: Array): StorageArray {
  if (!(x instanceof Array)) throw new TypeError(`toStorage: expected an Array; got ${typeof x}`);
  return x._storage();
}

/**
 * An Array on the current backend holding `data` (storage format for `dtype`, row-major) with
 * `shape`. The data is not copied on the reference backend: do not mutate it afterwards.
 */
export function fromStorage(data: StorageArray, shape: Shape, dtype: DType): Array {
  checkDType(dtype, 'fromStorage');
  // (Called per result by compiled programs: plain loops, nothing allocated but the Array.)
  for (let i = 0; i < shape.length; i++) {
    const d = shape[i];
    if (!Number.isSafeInteger(d) || d < 0) throw new RangeError(`fromStorage: shape ${fmt(shape)} must hold non-negative integers`);
  }
  const n = sizeOf(shape);
  if (!isStorageOf(data, dtype)) {
    throw new TypeError(`fromStorage: ${dtype} is stored as ${allocStorage(dtype, 0).constructor.name}; got ${data.constructor.name}`);
  }
  if (data.length !== n) {
    throw new RangeError(`fromStorage: shape ${fmt(shape)} has ${n} elements; got ${data.length} values of ${dtype}`);
  }
  return Array._fromStorage(data, shape, dtype); // (the Array copies the shape, or shares it when frozen)
}
