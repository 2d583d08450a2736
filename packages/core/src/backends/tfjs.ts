/**
 * `@tpukit/core/tfjs`: moving arrays between tpukit and TensorFlow.js (`@tensorflow/tfjs-core`,
 * an optional peer dependency, so this lives on its own subpath). tfjs has only float32, int32
 * and bool (plus complex64 and string, which have no tpukit counterpart), so:
 *
 * | tpukit                      | tfjs    | note |
 * |-----------------------------|---------|------|
 * | float32                     | float32 | exact |
 * | bfloat16, float16           | float32 | widened exactly; `fromTfjs(t, { dtype })` narrows back |
 * | int32                       | int32   | exact |
 * | int8, uint8                 | int32   | widened exactly |
 * | uint32                      | int32   | exact for values <= 2^31 - 1; larger values are an error (no silent wrap) |
 * | bool                        | bool    | exact |
 *
 * Data is copied in both directions (tfjs tensors and tpukit Arrays are both immutable, and
 * sharing a buffer would tie their lifetimes together).
 */
import * as tf from '@tensorflow/tfjs-core';
// Through the package entry, so that importing only this subpath still registers the
// reference backend and the Array methods.
import { Array, type DType, type StorageArray, np } from '../index';
import { checkDType } from '../dtype';
import { fmt } from '../shape';

/** The tpukit dtype a tfjs dtype arrives as. */
function fromTfjsDType(d: string): DType {
  switch (d) {
    case 'float32': return 'float32';
    case 'int32': return 'int32';
    case 'bool': return 'bool';
    default:
      throw new TypeError(`fromTfjs: tfjs dtype ${d} has no tpukit counterpart (supported: float32, int32, bool)`);
  }
}

/** The tfjs dtype a tpukit dtype leaves as (see the table above). */
export function tfjsDTypeOf(d: DType): 'float32' | 'int32' | 'bool' {
  switch (d) {
    case 'float32': case 'bfloat16': case 'float16': return 'float32';
    case 'int32': case 'int8': case 'uint8': case 'uint32': return 'int32';
    case 'bool': return 'bool';
    default: return d satisfies never;
  }
}

/**
 * A tpukit Array with the values of a tfjs tensor (float32, int32 or bool). With `dtype`, the
 * values are then converted as `astype` does (e.g. back to bfloat16 after `toTfjs`).
 */
export function fromTfjs(t: tf.Tensor, opts: { dtype?: DType } = {}): Array {
  if (t === null || typeof t !== 'object' || typeof (t as tf.Tensor).dataSync !== 'function') {
    throw new TypeError(`fromTfjs: expected a tfjs Tensor; got ${t === null ? 'null' : typeof t}`);
  }
  if (t.isDisposed) throw new Error(`fromTfjs: the ${t.dtype}${fmt(t.shape)} tensor is disposed`);
  const dtype = fromTfjsDType(t.dtype);
  const data = t.dataSync() as Float32Array | Int32Array | Uint8Array;
  // tfjs hands out its own buffer on some backends: copy so the Array owns its data.
  const storage: StorageArray = dtype === 'bool' ? Uint8Array.from(data, (v) => (v ? 1 : 0)) : data.slice();
  const out = Array._fromStorage(storage, t.shape.slice(), dtype);
  if (opts.dtype === undefined) return out;
  return np.astype(out, checkDType(opts.dtype, 'fromTfjs'));
}

/**
 * A new tfjs tensor with the values of `x` on tfjs's current backend. bfloat16/float16 become
 * float32; int8/uint8/uint32 become int32 (uint32 values above 2^31 - 1 are an error).
 */
export function toTfjs(x: Array): tf.Tensor {
  if (!(x instanceof Array)) throw new TypeError(`toTfjs: expected a tpukit Array; got ${x === null ? 'null' : typeof x}`);
  const target = tfjsDTypeOf(x.dtype);
  const data = x.dataSync();
  let values: Float32Array | Int32Array | Uint8Array;
  if (target === 'float32' || x.dtype === 'int32' || x.dtype === 'bool') {
    values = data as Float32Array | Int32Array | Uint8Array;
  } else {
    if (x.dtype === 'uint32') {
      for (let i = 0; i < data.length; i++) {
        if (data[i] > 0x7fffffff) {
          throw new RangeError(`toTfjs: uint32${fmt(x.shape)} element ${i} is ${data[i]}, above int32's 2147483647 (tfjs has no uint32); convert with astype('float32') first`);
        }
      }
    }
    values = Int32Array.from(data as ArrayLike<number>);
  }
  return tf.tensor(values, x.shape.slice(), target);
}
