/**
 * What a backend needs of a primitive to run it: its name and its reference kernel over host
 * arrays. Below backend.ts and primitive.ts: a backend never sees a primitive's rules (which
 * name `Array`), so `array.ts -> backend.ts` does not lead back up to the transformations.
 */
import type { ShapedArray } from './aval';
import type { DType, StorageArray } from './dtype';
import type { Shape } from './shape';

/** A host-side array as the reference kernels see it: storage-format data plus its type. */
export interface HostArray {
  readonly data: StorageArray;
  readonly shape: Shape;
  readonly dtype: DType;
}

/** A reference kernel: plain TypeScript over host arrays; returns one storage array per output. */
export type Kernel<P> = (inputs: HostArray[], params: P, outAvals: ShapedArray[]) => StorageArray[];

/** A reference kernel of a single-output primitive that writes its result into `out` (host storage of the output's dtype and size, owned by the caller). */
export type KernelInto<P> = (inputs: HostArray[], params: P, outAval: ShapedArray, out: StorageArray) => void;

/** The part of a primitive a backend runs (every `Primitive` is one). */
export interface KernelPrimitive<P = any> {
  readonly name: string;
  /** The reference (oracle) kernel. */
  readonly impl: Kernel<P>;
  /** Optional: the reference kernel writing into caller storage (what host backends' `executeInto` runs). */
  readonly implInto?: KernelInto<P>;
}
