/**
 * The reference backend: plain TypeScript kernels over host typed arrays, one per primitive
 * (the `impl` of each primitive record). It is the correctness oracle every faster backend is
 * tested against, so it favours clarity; its elementwise and sort kernels are still plain
 * typed-array loops fast enough for eager use (lax/elementwiseKernels.ts, lax/radixSort.ts).
 * Buffers are the storage arrays themselves.
 */
import type { Backend } from '../backend';
import { isStorageOf, type StorageArray } from '../dtype';
import type { HostArray, Primitive, ShapedArray } from '../primitive';

/** Buffers of a host-memory backend (storage typed arrays) as the kernels' HostArrays. */
export function hostArrays(inputs: unknown[], avals: ShapedArray[]): HostArray[] {
  return inputs.map((data, i) => ({ data: data as StorageArray, shape: avals[i].shape, dtype: avals[i].dtype }));
}

/**
 * The memory half of a backend whose buffers are the host storage arrays themselves (this one
 * and the systolic backend): nothing is copied in or out, and the garbage collector reclaims them.
 */
export const hostMemory: Pick<Backend, 'manualMemory' | 'fromHost' | 'toHost' | 'dispose'> = {
  manualMemory: false,
  fromHost(data: StorageArray): unknown {
    return data;
  },
  toHost(buffer: unknown): StorageArray {
    return buffer as StorageArray;
  },
  dispose(): void {
    // Typed arrays are reclaimed by the garbage collector.
  },
};

/**
 * `Backend.executeInto` of a host-memory backend: the primitive's reference kernel into caller
 * storage, where the primitive has one (`implInto`) and `out` is the result dtype's storage type.
 */
export function hostExecuteInto(prim: Primitive, inputs: unknown[], inAvals: ShapedArray[], params: unknown, outAval: ShapedArray, out: StorageArray): boolean {
  if (prim.implInto === undefined || !isStorageOf(out, outAval.dtype)) return false;
  prim.implInto(hostArrays(inputs, inAvals), params, outAval, out);
  return true;
}

const REFERENCE_NUMERICS = Object.freeze({ flushSubnormals: false });

export const referenceBackend: Backend = {
  name: 'reference',
  ...hostMemory,
  execute(prim: Primitive, inputs: unknown[], inAvals: ShapedArray[], params: unknown, outAvals: ShapedArray[]): unknown[] {
    return prim.impl(hostArrays(inputs, inAvals), params, outAvals);
  },
  hostKernels: () => REFERENCE_NUMERICS,
  executeInto: hostExecuteInto,
};
