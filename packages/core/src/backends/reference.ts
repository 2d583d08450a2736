/**
 * The reference backend: plain TypeScript kernels over host typed arrays, one per primitive
 * (the `impl` of each primitive record). It is the correctness oracle every faster backend is
 * tested against, so it favours clarity over speed. Buffers are the storage arrays themselves.
 */
import type { Backend } from '../backend';
import type { StorageArray } from '../dtype';
import type { Primitive, ShapedArray } from '../primitive';

export const referenceBackend: Backend = {
  name: 'reference',
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
  execute(prim: Primitive, inputs: unknown[], inAvals: ShapedArray[], params: unknown, outAvals: ShapedArray[]): unknown[] {
    const host = inputs.map((data, i) => ({ data: data as StorageArray, shape: inAvals[i].shape, dtype: inAvals[i].dtype }));
    return prim.impl(host, params, outAvals);
  },
};
