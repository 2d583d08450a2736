/**
 * Stacking a list of elements into one batch (what Grain's `batch` does with numpy): elements
 * are pytrees; leaves at the same position are stacked along a new leading axis. Numbers and
 * booleans become a `[B]` core Array (int32 when every value is an integer, else float32; bool
 * for booleans), typed arrays of equal length become `[B, L]` Arrays of the matching dtype,
 * core Arrays are stacked, and anything else (strings, objects) is kept as a plain JS list.
 */
import { Array as CoreArray, type DType, fromStorage, isArray, np, tree } from '@tpukit/core';

type Array = CoreArray;

type Typed = Int32Array | Float32Array | Uint8Array | Int8Array | Uint32Array | Float64Array | Int16Array | Uint16Array;

function typedDType(x: Typed): DType | null {
  if (x instanceof Int32Array) return 'int32';
  if (x instanceof Float32Array) return 'float32';
  if (x instanceof Uint8Array) return 'uint8';
  if (x instanceof Int8Array) return 'int8';
  if (x instanceof Uint32Array) return 'uint32';
  if (x instanceof Float64Array) return 'float32';
  if (x instanceof Int16Array) return 'int32';
  if (x instanceof Uint16Array) return 'int32';
  return null;
}

const isLeaf = (x: unknown): boolean => ArrayBuffer.isView(x) || isArray(x);

function storageFor(dtype: DType, n: number): Int32Array | Float32Array | Uint8Array | Int8Array | Uint32Array {
  switch (dtype) {
    case 'int32': return new Int32Array(n);
    case 'uint8': return new Uint8Array(n);
    case 'int8': return new Int8Array(n);
    case 'uint32': return new Uint32Array(n);
    default: return new Float32Array(n);
  }
}

/**
 * Makes a shaped core Array from freshly allocated flat host data that nobody else holds. For
 * int32 / float32 / uint8 / int8 / uint32 the buffer becomes the Array's storage without a copy
 * (core's `fromStorage`); other dtypes go through `np.asarray` (a conversion).
 */
export function hostArray(data: Int32Array | Float32Array | Uint8Array | Int8Array | Uint32Array, shape: readonly number[], dtype: DType): Array {
  const direct =
    (dtype === 'int32' && data instanceof Int32Array) ||
    (dtype === 'float32' && data instanceof Float32Array) ||
    (dtype === 'uint8' && data instanceof Uint8Array) ||
    (dtype === 'int8' && data instanceof Int8Array) ||
    (dtype === 'uint32' && data instanceof Uint32Array);
  if (direct) return fromStorage(data, shape, dtype);
  const flat = np.asarray(data, dtype);
  return shape.length === 1 ? flat : flat.reshape(shape);
}

function stackLeaf(leaves: unknown[], where: string): unknown {
  const first = leaves[0];
  const b = leaves.length;
  if (typeof first === 'number' || typeof first === 'boolean') {
    let allInt = true;
    let allBool = true;
    for (let i = 0; i < b; i++) {
      const v = leaves[i];
      if (typeof v !== typeof first) throw new TypeError(`batch: element ${i} at ${where} is ${typeof v} but element 0 is ${typeof first}`);
      if (typeof v === 'number' && !Number.isInteger(v)) allInt = false;
      if (typeof v !== 'boolean') allBool = false;
    }
    if (allBool) return np.asarray(leaves as boolean[], 'bool');
    const dtype: DType = allInt && (leaves as number[]).every((v) => v >= -2147483648 && v <= 2147483647) ? 'int32' : 'float32';
    const out = storageFor(dtype, b);
    for (let i = 0; i < b; i++) out[i] = leaves[i] as number;
    return hostArray(out, [b], dtype);
  }
  if (ArrayBuffer.isView(first)) {
    const f = first as Typed;
    const dtype = typedDType(f);
    if (dtype === null) return leaves.slice();
    const len = f.length;
    const out = storageFor(dtype, b * len);
    for (let i = 0; i < b; i++) {
      const x = leaves[i] as Typed;
      if (!ArrayBuffer.isView(x) || x.constructor !== f.constructor) {
        throw new TypeError(`batch: element ${i} at ${where} is ${x?.constructor?.name ?? typeof x} but element 0 is ${f.constructor.name}`);
      }
      if (x.length !== len) {
        throw new RangeError(`batch: element ${i} at ${where} has length ${x.length} but element 0 has length ${len}; pad first (padToLength, bucketBySequenceLength or pack) so every element has one shape`);
      }
      out.set(x as ArrayLike<number>, i * len);
    }
    return hostArray(out, [b, len], dtype);
  }
  if (isArray(first)) {
    const shape = first.shape;
    for (let i = 1; i < b; i++) {
      const x = leaves[i] as Array;
      if (!isArray(x) || x.shape.join() !== shape.join() || x.dtype !== first.dtype) {
        throw new RangeError(`batch: element ${i} at ${where} is ${isArray(x) ? `${x.dtype}[${x.shape}]` : typeof x} but element 0 is ${first.dtype}[${shape}]`);
      }
    }
    return np.stack(leaves as Array[]);
  }
  return leaves.slice();
}

/** Stacks `elements` (pytrees of one structure) into one batch pytree. */
export function collate<T>(elements: readonly T[]): unknown {
  if (elements.length === 0) throw new RangeError('batch: cannot stack an empty list of elements');
  const [leaves0, def] = tree.flatten(elements[0], { isLeaf });
  const cols: unknown[][] = leaves0.map((l) => [l]);
  for (let i = 1; i < elements.length; i++) {
    const [li, di] = tree.flatten(elements[i], { isLeaf });
    if (!di.equals(def)) throw new TypeError(`batch: element ${i} has structure ${di} but element 0 has ${def}`);
    for (let j = 0; j < li.length; j++) cols[j].push(li[j]);
  }
  if (def.isLeaf) return stackLeaf(cols[0], 'the element');
  const [paths] = tree.flattenWithPath(elements[0], { isLeaf });
  return def.unflatten(cols.map((c, j) => stackLeaf(c, `leaf ${tree.keystr(paths[j][0])}`)));
}
