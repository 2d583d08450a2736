/**
 * Turning user input into Arrays: JS numbers and booleans (weakly typed scalars, as Python
 * scalars are in JAX), nested JS arrays (checked for raggedness), typed arrays, and Arrays.
 */
import { Array, type ArrayLike, type NestedInput, type TypedArrayInput, numbersToStorage } from './array';
import { type DType, type TypeWithWeak, checkDType, intRange, isInteger, scalarType } from './dtype';
import { fmt } from './shape';
import { describeValue } from './describe';
import { checkArrayBytes } from './sizeGuard';

export type { ArrayLike, NestedInput, TypedArrayInput };

interface NumList {
  readonly length: number;
  readonly [i: number]: number;
}

export function isArray(x: unknown): x is Array {
  return x instanceof Array;
}

/** The dtype (and weak bit) an input has before any conversion. */
export function typeOf(x: ArrayLike): TypeWithWeak {
  if (x instanceof Array) return { dtype: x.dtype, weak: x.weakType };
  if (typeof x === 'number' || typeof x === 'boolean') return scalarType(x);
  if (ArrayBuffer.isView(x)) return { dtype: typedArrayDType(x as TypedArrayInput, 'asarray'), weak: false };
  const { flat } = flattenNested(x as NestedInput, 'asarray');
  return { dtype: inferDType(flat), weak: false };
}

function typedArrayDType(x: TypedArrayInput, op: string): DType {
  if (x instanceof Float32Array || x instanceof Float64Array) return 'float32';
  if (x instanceof Int32Array || x instanceof Int16Array) return 'int32';
  if (x instanceof Uint32Array) return 'uint32';
  if (x instanceof Int8Array) return 'int8';
  if (x instanceof Uint8Array || x instanceof Uint8ClampedArray) return 'uint8';
  throw new TypeError(`${op}: unsupported typed array ${(x as object).constructor.name}; pass a dtype with a Float32Array or use bf16.decode first`);
}

function inferDType(flat: (number | boolean)[]): DType {
  if (flat.length > 0 && flat.every((v) => typeof v === 'boolean')) return 'bool';
  // Booleans mixed with integers give int32, as jnp.array([True, 2]) does.
  if (flat.every((v) => typeof v === 'boolean' || Number.isInteger(v))) return flat.length === 0 ? 'float32' : 'int32';
  return 'float32';
}

/** Flattens nested JS arrays row-major, checking that they are rectangular. */
export function flattenNested(x: NestedInput, op: string): { flat: (number | boolean)[]; shape: number[] } {
  const shape: number[] = [];
  let probe: unknown = x;
  while (globalThis.Array.isArray(probe)) {
    shape.push(probe.length);
    probe = probe[0];
  }
  const flat: (number | boolean)[] = [];
  const walk = (v: unknown, depth: number, path: number[]): void => {
    if (depth === shape.length) {
      if (typeof v !== 'number' && typeof v !== 'boolean') {
        throw new TypeError(`${op}: element at [${path.join(',')}] is ${globalThis.Array.isArray(v) ? 'a list (ragged nesting)' : describeValue(v)}; expected a number or boolean${v !== null && typeof v === 'object' && 'aval' in v ? ' (combine Arrays with np.stack or np.concatenate)' : ''}`);
      }
      flat.push(v);
      return;
    }
    if (!globalThis.Array.isArray(v) || v.length !== shape[depth]) {
      throw new Error(`${op}: ragged nested input: element at [${path.join(',')}] has ${globalThis.Array.isArray(v) ? `length ${v.length}` : 'no length'}, expected length ${shape[depth]} (shape ${fmt(shape)})`);
    }
    for (let i = 0; i < v.length; i++) walk(v[i], depth + 1, [...path, i]);
  };
  walk(x, 0, []);
  return { flat, shape };
}

function checkFits(values: NumList, dtype: DType, op: string): void {
  if (!isInteger(dtype)) return;
  const [lo, hi] = intRange(dtype);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!Number.isFinite(v)) {
      const at = values.length > 1 ? ` (element ${i})` : '';
      throw new RangeError(`${op}: value ${v}${at} cannot be stored in ${dtype}: integer dtypes have no NaN or infinity; pass a float dtype or replace non-finite values first`);
    }
    if (Number.isInteger(v) && (v < lo || v > hi)) {
      throw new RangeError(`${op}: value ${v} does not fit in ${dtype} (range ${lo}..${hi}); pass a wider dtype${dtype === 'int32' ? " (e.g. 'float32' or 'uint32')" : ''}`);
    }
  }
}

/**
 * `jnp.asarray`: an Array from any input. With `dtype`, values are converted (floats to
 * integers truncate toward zero; out-of-range integers are an error, not a silent wrap).
 * `weak` marks the result weakly typed (used for JS scalars entering an op).
 */
export function asArray(x: ArrayLike, opts: { dtype?: DType; weak?: boolean; op?: string; copy?: boolean } = {}): Array {
  const op = opts.op ?? 'asarray';
  const dtype = opts.dtype === undefined ? undefined : checkDType(opts.dtype, op);
  if (x instanceof Array) {
    if (dtype === undefined || dtype === x.dtype) return x;
    throw new TypeError(`${op}: use astype to convert a ${x.dtype} Array to ${dtype}`);
  }
  let values: NumList;
  let shape: number[];
  let inferred: TypeWithWeak;
  if (typeof x === 'number' || typeof x === 'boolean') {
    values = [Number(x)];
    shape = [];
    inferred = scalarType(x);
    if (opts.weak === false) inferred = { dtype: inferred.dtype, weak: false };
  } else if (ArrayBuffer.isView(x)) {
    values = x as TypedArrayInput;
    shape = [(x as TypedArrayInput).length];
    inferred = { dtype: typedArrayDType(x as TypedArrayInput, op), weak: false };
  } else if (globalThis.Array.isArray(x)) {
    const f = flattenNested(x as NestedInput, op);
    values = f.flat.map(Number);
    shape = f.shape;
    inferred = { dtype: inferDType(f.flat), weak: false };
  } else {
    throw new TypeError(`${op}: cannot make an array from ${describeValue(x)}`);
  }
  const target = dtype ?? inferred.dtype;
  const weak = opts.weak ?? (dtype === undefined ? inferred.weak : false);
  let vals = values;
  if (isInteger(target) && !isInteger(inferred.dtype) && inferred.dtype !== 'bool') {
    vals = globalThis.Array.from(values as NumList, (v: number) => Math.trunc(v));
  }
  checkArrayBytes(op, shape, target);
  checkFits(vals, target, op);
  return Array._fromStorage(numbersToStorage(vals, target), shape, target, weak);
}
