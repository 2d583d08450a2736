/**
 * Device-owned buffers. A shard that lives on a CPU device is stored in a SharedArrayBuffer
 * owned by that device: its worker thread reads and writes it in place, and the host reads it
 * without a copy (`x.addressableShards[i].data`). A partitioned call sends the worker only the
 * buffer (a handle to shared memory, never the bytes); results come back the same way.
 * Ownership is recorded here: a buffer owned by one device given to another as its shard is an
 * error, a buffer no device owns (a host Array) is copied into a new buffer of the target device.
 */
import { type Array, type DType, fromStorage, type StorageArray, toStorage } from '@tpukit/core';

const owner = new WeakMap<SharedArrayBuffer, number>();

type StorageCtor = new (b: ArrayBufferLike, off?: number, len?: number) => StorageArray;

/** The device (id) owning `a`'s storage, or null for a host array. */
export function ownerOf(a: Array): number | null {
  const s = toStorage(a);
  return s.buffer instanceof SharedArrayBuffer ? (owner.get(s.buffer) ?? null) : null;
}

/** Storage `data` (a view of a whole SharedArrayBuffer) as an Array owned by `deviceId`. */
export function deviceArray(data: StorageArray, shape: readonly number[], dtype: DType, deviceId: number): Array {
  owner.set(data.buffer as SharedArrayBuffer, deviceId);
  return fromStorage(data, shape, dtype);
}

/** Records that `a`'s storage (a SharedArrayBuffer a device's thread filled) is owned by `deviceId`. */
export function adopt(a: Array, deviceId: number): void {
  const b = toStorage(a).buffer;
  if (b instanceof SharedArrayBuffer) owner.set(b, deviceId);
}

/** A copy of `a` in a new buffer owned by `deviceId`. */
export function copyToDevice(a: Array, deviceId: number): Array {
  const s = toStorage(a);
  const ctor = s.constructor as StorageCtor;
  const out = new ctor(new SharedArrayBuffer(s.byteLength));
  (out as Uint8Array).set(s as Uint8Array);
  return deviceArray(out, a.shape, a.dtype, deviceId);
}

/**
 * The storage device `deviceId` computes on for `a`: `a`'s own buffer when the device owns it,
 * else a copy (a transfer). When `a` is the argument's own shard for this device (`isShard`), a
 * buffer another device owns is an error: the array claims a shard lives where it does not.
 */
export function deviceStorage(a: Array, deviceId: number, isShard: boolean, what: string): StorageArray {
  const s = toStorage(a);
  if (s.buffer instanceof SharedArrayBuffer) {
    const o = owner.get(s.buffer);
    if (o === deviceId) return s;
    if (o !== undefined && isShard) {
      throw new Error(`${what}: the shard for device ${deviceId} is a ${a.dtype}[${a.shape.join(',')}] buffer owned by device ${o}; shards must live on their own device (devicePut the array to the sharding first)`);
    }
  }
  return toStorage(copyToDevice(a, deviceId));
}

/** Device buffers that an asynchronous run (`shardMap(...).onDevices`) is reading, with how many runs hold each. */
const held = new Map<SharedArrayBuffer, number>();

/** Marks the device buffers among `arrays` as held until the returned release is called. */
export function hold(arrays: readonly Array[]): () => void {
  const bufs = [...new Set(arrays.map((a) => toStorage(a).buffer).filter((b): b is SharedArrayBuffer => b instanceof SharedArrayBuffer && owner.has(b)))];
  for (const b of bufs) held.set(b, (held.get(b) ?? 0) + 1);
  return () => {
    for (const b of bufs) {
      const n = held.get(b)! - 1;
      if (n === 0) held.delete(b);
      else held.set(b, n);
    }
  };
}

/** Throws when `a`'s device buffer is held by a run in progress (it cannot be donated now). */
export function checkNotHeld(a: Array, what: string): void {
  const b = toStorage(a).buffer;
  if (b instanceof SharedArrayBuffer && held.has(b)) {
    throw new Error(`${what}: cannot donate this ${a.dtype}[${a.shape.join(',')}] shard of device ${owner.get(b)}: a shardMap(...).onDevices call still running holds its buffer (await it first, or do not donate)`);
  }
}
