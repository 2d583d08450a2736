/**
 * `Array`: tpukit's immutable n-d array (jax.Array). It holds an abstract value (shape, dtype,
 * weak type) and a buffer on some backend. bfloat16 and float16 data is stored as 16-bit
 * patterns, 2 bytes per element. Memory is the garbage collector's business; `dispose()` and
 * `using` release a buffer early in tight loops. Tracers (see the transformations) are
 * subclasses that carry a trace instead of a buffer.
 *
 * The jax.numpy-style methods (`x.reshape`, `x.sum`, `x.at(...)`) are declared here with types
 * from this layer (`methodArgs.ts`, `slice.ts`, and the input types below) and installed by
 * `methods.ts` as forwards to the `np` functions, so this file never imports the numpy layer.
 */
import * as bf16 from './bf16';
import * as f16 from './f16';
import { type Backend, getBackend } from './backend';
import { defaultSharding } from './device';
import { type DType, type DataArray, type StorageArray, allocStorage, is16BitFloat } from './dtype';
import type { Device, Index, Sharding } from './interfaces';
import type { ArgOptions, AxisArgs, CumOptions, ExtremumOptions, GetOptions, ReduceOptions, SortOptions, UpdateOptions, VarOptions } from './methodArgs';
import type { ShapedArray } from './aval';
import type { Slice } from './slice';
import { type Shape, fmt, frozenShape, sizeOf } from './shape';

/** Something that can trace: implemented by the transformations' traces. */
export interface TraceLike {
  readonly level: number;
}

/** One device's part of an array. */
export interface Shard {
  readonly device: Device;
  readonly index: Index;
  /** 0 for the first device holding this index; replicas have 1, 2, ... */
  readonly replicaId: number;
  readonly data: Array;
}

export type NestedArray = number | boolean | NestedArray[];

/** Typed arrays accepted as input (their dtype is inferred; see convert.ts). */
export type TypedArrayInput = Float32Array | Float64Array | Int32Array | Uint32Array | Int8Array | Uint8Array | Uint8ClampedArray | Int16Array;
/** JS numbers and booleans, nested to any depth (checked for raggedness on conversion). */
export type NestedInput = number | boolean | NestedInput[] | readonly NestedInput[];
/** Anything an operation accepts where it takes an array (converted by `asArray`). */
export type ArrayLike = Array | number | boolean | NestedInput | TypedArrayInput;

/** One item of an index expression for `x.get(...)` / `x.at(...)` (see numpy/indexing.ts). */
export type IndexItem = number | string | Slice | null | Array | NestedInput;

/** What `x.at(...idx)` returns: JAX's `x.at[idx]`. Every method returns a new array. */
export interface IndexUpdate {
  /** `x[idx]`; out-of-bounds array indices clamp unless `mode` says otherwise. */
  get(opts?: GetOptions): Array;
  /** `x[idx] = v` (functional). */
  set(v: unknown, opts?: UpdateOptions): Array;
  /** `x[idx] += v`; repeated indices accumulate. */
  add(v: unknown, opts?: UpdateOptions): Array;
  /** `x[idx] *= v`; repeated indices accumulate. */
  multiply(v: unknown, opts?: UpdateOptions): Array;
  /** `x[idx] -= v`; repeated indices accumulate. */
  subtract(v: unknown, opts?: UpdateOptions): Array;
  /** `x[idx] /= v`. */
  divide(v: unknown, opts?: UpdateOptions): Array;
  /** `x[idx] **= v`. */
  power(v: unknown, opts?: UpdateOptions): Array;
  /** `x[idx] = fn(x[idx])` for an elementwise `fn`, once per indexed element. */
  apply(fn: (v: Array) => Array, opts?: UpdateOptions): Array;
  /** `x[idx] = minimum(x[idx], v)`. */
  min(v: unknown, opts?: UpdateOptions): Array;
  /** `x[idx] = maximum(x[idx], v)`. */
  max(v: unknown, opts?: UpdateOptions): Array;
}

const finalizer = new FinalizationRegistry<{ backend: Backend; buf: unknown }>(({ backend, buf }) => backend.dispose(buf));

export class Array {
  readonly aval: ShapedArray;
  /** @internal */ _backend: Backend | null;
  /** @internal */ _buf: unknown;
  /** @internal */ _sharding: Sharding;
  /** @internal */ _shards: Shard[] | null = null;
  #disposed = false;
  /** Why the buffer is gone when it was donated (deleted by a call), for the error message. */
  #deletedBy: string | null = null;

  // jax.Array methods, installed by methods.ts as forwards to the np functions.
  declare reshape: (shape: number | readonly number[]) => Array;
  declare transpose: (axes?: readonly number[]) => Array;
  declare readonly T: Array;
  declare astype: (dtype: DType) => Array;
  declare ravel: () => Array;
  declare flatten: () => Array;
  declare squeeze: (axis?: number | readonly number[]) => Array;
  declare swapaxes: (a: number, b: number) => Array;
  // Reductions, sorts and scans take what their np functions take: (axis?, options?) or (options?).
  declare sum: (...args: AxisArgs<ReduceOptions>) => Array;
  declare mean: (...args: AxisArgs<ReduceOptions>) => Array;
  declare prod: (...args: AxisArgs<ReduceOptions>) => Array;
  declare max: (...args: AxisArgs<ExtremumOptions>) => Array;
  declare min: (...args: AxisArgs<ExtremumOptions>) => Array;
  declare any: (...args: AxisArgs<ExtremumOptions>) => Array;
  declare all: (...args: AxisArgs<ExtremumOptions>) => Array;
  declare var: (...args: AxisArgs<VarOptions>) => Array;
  declare std: (...args: AxisArgs<VarOptions>) => Array;
  declare argmax: (...args: AxisArgs<ArgOptions>) => Array;
  declare argmin: (...args: AxisArgs<ArgOptions>) => Array;
  declare cumsum: (...args: AxisArgs<CumOptions>) => Array;
  declare cumprod: (...args: AxisArgs<CumOptions>) => Array;
  declare sort: (...args: AxisArgs<SortOptions>) => Array;
  declare argsort: (...args: AxisArgs<SortOptions>) => Array;
  declare add: (y: ArrayLike) => Array;
  declare sub: (y: ArrayLike) => Array;
  declare mul: (y: ArrayLike) => Array;
  declare div: (y: ArrayLike) => Array;
  declare pow: (y: ArrayLike) => Array;
  declare neg: () => Array;
  declare matmul: (y: ArrayLike) => Array;
  /** `x.get(...idx)` is tpukit's spelling of `x[idx]` (NumPy basic and advanced indexing). */
  declare get: (...indices: IndexItem[]) => Array;
  /** `x.at(...idx)` is JAX's `x.at[idx]`: `.get(opts)`, `.set(v)`, `.add(v)`, `.subtract(v)`, `.multiply(v)`, `.divide(v)`, `.power(v)`, `.min(v)`, `.max(v)`, `.apply(fn)`. */
  declare at: (...indices: IndexItem[]) => IndexUpdate;

  /** @internal Use `np.array` / `np.asarray` to make arrays. */
  constructor(aval: ShapedArray, backend: Backend | null, buf: unknown, sharding: Sharding = defaultSharding) {
    // A frozen shape is shared (nobody can change it), any other is copied and frozen: compiled
    // programs make hundreds of Arrays per call from the same frozen shapes.
    this.aval = { shape: frozenShape(aval.shape), dtype: aval.dtype, weakType: aval.weakType };
    this._backend = backend;
    this._buf = buf;
    this._sharding = sharding;
    if (backend && backend.manualMemory) finalizer.register(this, { backend, buf }, this);
  }

  /** @internal Wraps storage-format host data in an Array on the current backend (no copy on reference). */
  static _fromStorage(data: StorageArray, shape: Shape, dtype: DType, weakType = false): Array {
    const backend = getBackend();
    const av: ShapedArray = { shape, dtype, weakType };
    return new Array(av, backend, backend.fromHost(data, av));
  }

  /** @internal The trace this value belongs to; null for concrete arrays. */
  get _trace(): TraceLike | null {
    return null;
  }

  get shape(): readonly number[] {
    return this.aval.shape;
  }
  get dtype(): DType {
    return this.aval.dtype;
  }
  get weakType(): boolean {
    return this.aval.weakType;
  }
  get ndim(): number {
    return this.aval.shape.length;
  }
  get size(): number {
    return sizeOf(this.aval.shape);
  }
  get sharding(): Sharding {
    return this._sharding;
  }
  /** The shards of this array held in this process (one for an unsharded array). */
  get addressableShards(): Shard[] {
    if (this._shards) return this._shards;
    const [[device, index]] = this._sharding.devicesIndicesMap(this.shape);
    return [{ device, index, replicaId: 0, data: this }];
  }

  /** @internal The buffer on `backend`, moving the data there if it lives elsewhere. */
  _bufferOn(backend: Backend): unknown {
    this.#checkLive('use');
    if (this._backend === backend) return this._buf;
    const host = this._storage();
    this._backend = backend;
    this._buf = backend.fromHost(host, this.aval);
    if (backend.manualMemory) finalizer.register(this, { backend, buf: this._buf }, this);
    return this._buf;
  }

  /** @internal Storage-format contents (bf16 as Uint16). Do not mutate. */
  _storage(): StorageArray {
    this.#checkLive('read');
    if (this._backend === null) {
      if (this._shards) return assembleShards(this);
      throw new Error(`Array: a ${this.dtype}${fmt(this.shape)} tracer has no concrete value here`);
    }
    return this._backend.toHost(this._buf, this.aval);
  }

  /** @internal Throws the deleted/disposed error for `what` (a cheap check for callers such as jit). */
  _assertLive(what: string): void {
    this.#checkLive(what);
  }

  #checkLive(what: string): void {
    if (this.#disposed) {
      if (this.#deletedBy !== null) throw new Error(`Array has been deleted: cannot ${what} a ${this.dtype}${fmt(this.shape)} array; ${this.#deletedBy}`);
      throw new Error(`Array: cannot ${what} a ${this.dtype}${fmt(this.shape)} array after dispose()`);
    }
  }

  /** The values as a new typed array; bfloat16/float16 are decoded to Float32Array. */
  dataSync(): DataArray {
    const s = this._storage();
    if (this.dtype === 'bfloat16') return bf16.decode(s as Uint16Array);
    if (this.dtype === 'float16') return f16.decode(s as Uint16Array);
    return s.slice() as DataArray;
  }

  async data(): Promise<DataArray> {
    return this.dataSync();
  }

  /** The values as nested JS arrays (booleans for bool arrays), as `ndarray.tolist()`. */
  toArray(): NestedArray {
    const flat = this.dataSync();
    const isBool = this.dtype === 'bool';
    const shape = this.shape;
    if (shape.length === 0) return isBool ? flat[0] !== 0 : flat[0];
    let pos = 0;
    const build = (dim: number): NestedArray[] => {
      const out: NestedArray[] = new globalThis.Array(shape[dim]);
      for (let i = 0; i < shape[dim]; i++) {
        if (dim === shape.length - 1) {
          const v = flat[pos++];
          out[i] = isBool ? v !== 0 : v;
        } else out[i] = build(dim + 1);
      }
      return out;
    };
    return build(0);
  }

  /** The single value of a size-1 array. */
  item(): number | boolean {
    if (this.size !== 1) throw new Error(`item: needs an array of size 1; got ${this.dtype}${fmt(this.shape)} (size ${this.size})`);
    const v = this.dataSync()[0];
    return this.dtype === 'bool' ? v !== 0 : v;
  }

  /** Releases the buffer now. Using the array afterwards is an error. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    if (this._backend) {
      if (this._backend.manualMemory) finalizer.unregister(this);
      this._backend.dispose(this._buf);
    }
    this._buf = null;
  }

  get isDisposed(): boolean {
    return this.#disposed;
  }

  /** `jax.Array.is_deleted()`: true after `delete()`/`dispose()` or once donated to a call. */
  isDeleted(): boolean {
    return this.#disposed;
  }

  /** `jax.Array.delete()`: releases the buffer now (same as `dispose()`). */
  delete(): void {
    this.dispose();
  }

  /**
   * @internal Marks the array deleted because its buffer was donated (`reason` says to what,
   * e.g. "it was donated to jit(step) as argument 0"). With `releaseBuffer` false the buffer
   * is not handed back to the backend (an output of the call now owns it).
   */
  _markDeleted(reason: string, releaseBuffer: boolean): void {
    if (this.#disposed) return;
    if (releaseBuffer) this.dispose();
    else {
      this.#disposed = true;
      if (this._backend?.manualMemory) finalizer.unregister(this);
      this._buf = null;
    }
    this.#deletedBy = reason;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  toString(): string {
    return `Array(${JSON.stringify(this.size <= 64 ? this.toArray() : `<${this.size} values>`)}, dtype=${this.dtype}${this.weakType ? ', weak_type=True' : ''}, shape=${fmt(this.shape)})`;
  }
}

/** Decoded float view of storage data (bf16/f16 widened to f32; others returned as is). */
export function storageToNumbers(data: StorageArray, dtype: DType): globalThis.ArrayLike<number> {
  if (dtype === 'bfloat16') return bf16.decode(data as Uint16Array);
  if (dtype === 'float16') return f16.decode(data as Uint16Array);
  return data;
}

/** Converts computed values to a dtype's storage (rounding floats, wrapping integers). */
export function numbersToStorage(values: globalThis.ArrayLike<number>, dtype: DType): StorageArray {
  if (is16BitFloat(dtype)) {
    const f = values instanceof Float32Array ? values : Float32Array.from(values);
    return dtype === 'bfloat16' ? bf16.encode(f) : f16.encode(f);
  }
  const out = allocStorage(dtype, values.length);
  if (dtype === 'bool') for (let i = 0; i < values.length; i++) out[i] = values[i] ? 1 : 0;
  else (out as Exclude<StorageArray, Uint16Array>).set(values);
  return out;
}

/** Bit-preserving view for copying: float32 goes through its 32-bit patterns so NaN payloads survive. */
function bitsView(x: StorageArray): Exclude<StorageArray, Float32Array> {
  return x instanceof Float32Array ? new Uint32Array(x.buffer, x.byteOffset, x.length) : x;
}

function assembleShards(a: Array): StorageArray {
  const shape = a.shape;
  const result = allocStorage(a.dtype, a.size);
  const out = bitsView(result);
  const strides: number[] = [];
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = acc;
    acc *= shape[i];
  }
  for (const sh of a._shards!) {
    if (sh.replicaId !== 0) continue;
    const src = bitsView(sh.data._storage());
    const local = sh.index.map(([s, e]) => e - s);
    const n = sizeOf(local);
    const idx = new globalThis.Array(local.length).fill(0);
    for (let k = 0; k < n; k++) {
      let off = 0;
      for (let d = 0; d < local.length; d++) off += (sh.index[d][0] + idx[d]) * strides[d];
      out[off] = src[k];
      for (let d = local.length - 1; d >= 0; d--) {
        if (++idx[d] < local[d]) break;
        idx[d] = 0;
      }
    }
  }
  return result;
}
