/**
 * How pytrees of Arrays cross a thread boundary: each Array becomes its raw storage (copied into
 * a fresh buffer that is transferred, or a SharedArrayBuffer when several devices read the same
 * value), plus shape and dtype; the tree's structure travels as plain JSON-like data with
 * `{ $array: k }` in place of the k-th Array. Used by the device runtime in both directions.
 */
import { Array, type DType, type StorageArray, fromStorage, toStorage } from '@tpukit/core';

export interface WireArray {
  readonly data: StorageArray;
  readonly shape: number[];
  readonly dtype: DType;
}

export interface Packed {
  readonly tree: unknown;
  readonly arrays: WireArray[];
}

type StorageCtor = new (b: ArrayBufferLike) => StorageArray;

/** A copy of `s` in a new buffer (a SharedArrayBuffer when `shared`). */
export function copyStorage(s: StorageArray, shared: boolean): StorageArray {
  const ctor = s.constructor as StorageCtor;
  const buf = shared ? new SharedArrayBuffer(s.byteLength) : new ArrayBuffer(s.byteLength);
  const out = new ctor(buf);
  (out as Uint8Array).set(s as Uint8Array);
  return out;
}

/** Replaces every Array in `x` by a reference into `arrays` (via `wire`). */
export function pack(x: unknown, wire: (a: Array) => WireArray, what: string): Packed {
  const arrays: WireArray[] = [];
  const walk = (v: unknown, path: string): unknown => {
    if (v instanceof Array) {
      arrays.push(wire(v));
      return { $array: arrays.length - 1 };
    }
    if (v === null || typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean' || v === undefined) return v;
    if (globalThis.Array.isArray(v)) return v.map((e, i) => walk(e, `${path}[${i}]`));
    if (typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
      return Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, e]) => [k, walk(e, `${path}.${k}`)]));
    }
    throw new TypeError(`${what}: ${path || 'the value'} is a ${(v as object).constructor?.name ?? typeof v}; only Arrays, numbers, strings, booleans, null and plain arrays/objects of them can go to a device`);
  };
  return { tree: walk(x, ''), arrays };
}

/** A fresh, transferable copy of an Array's storage. */
export const wireCopy = (a: Array): WireArray => ({ data: copyStorage(toStorage(a), false), shape: a.shape.slice(), dtype: a.dtype });

/** A copy of an Array's storage in a SharedArrayBuffer (for values several devices read). */
export const wireShared = (a: Array): WireArray => ({ data: copyStorage(toStorage(a), true), shape: a.shape.slice(), dtype: a.dtype });

/** The Arrays inside a tree, in `pack` order. */
export function arraysIn(x: unknown): Array[] {
  const out: Array[] = [];
  pack(x, (a) => {
    out.push(a);
    return EMPTY;
  }, 'arraysIn');
  return out;
}
const EMPTY: WireArray = { data: new Float32Array(0), shape: [0], dtype: 'float32' };

/** Rebuilds the tree with Arrays (the storage is used in place, not copied). */
export function unpack(p: Packed): unknown {
  const walk = (v: unknown): unknown => {
    if (v === null || typeof v !== 'object') return v;
    if (globalThis.Array.isArray(v)) return v.map(walk);
    const o = v as Record<string, unknown>;
    if (typeof o.$array === 'number' && Object.keys(o).length === 1) {
      const w = p.arrays[o.$array];
      return fromStorage(w.data, w.shape, w.dtype);
    }
    return Object.fromEntries(Object.entries(o).map(([k, e]) => [k, walk(e)]));
  };
  return walk(p.tree);
}

/** The buffers of `p` that can be transferred (not shared). */
export function transferList(p: Packed): ArrayBuffer[] {
  const out: ArrayBuffer[] = [];
  for (const a of p.arrays) if (a.data.buffer instanceof ArrayBuffer && !out.includes(a.data.buffer)) out.push(a.data.buffer);
  return out;
}
