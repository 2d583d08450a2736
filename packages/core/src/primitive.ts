/**
 * Primitives and `bind`. Every operation in tpukit ends as `bind(primitive, args, params)`. A
 * primitive is one record: its shape rule (`abstractEval`), its reference kernel (`impl`), and,
 * as the transformations arrive, its jvp / transpose / batching rules and its lowering. `bind`
 * hands the call to the innermost active trace (see `trace.ts`); with no trace active it runs
 * the kernel on the current backend.
 */
import type { DType, StorageArray } from './dtype';
import type { Shape } from './shape';
import { showValue } from './describe';

/** The abstract value of an array: what tracing and shape rules see. */
export interface ShapedArray {
  readonly shape: Shape;
  readonly dtype: DType;
  readonly weakType: boolean;
}

export function aval(shape: Shape, dtype: DType, weakType = false): ShapedArray {
  return { shape, dtype, weakType };
}

/** A host-side array as the reference kernels see it: storage-format data plus its type. */
export interface HostArray {
  readonly data: StorageArray;
  readonly shape: Shape;
  readonly dtype: DType;
}

/** A reference kernel: plain TypeScript over host arrays; returns one storage array per output. */
export type Kernel<P> = (inputs: HostArray[], params: P, outAvals: ShapedArray[]) => StorageArray[];

export interface Primitive<P = any> {
  readonly name: string;
  /** Shape/dtype rule; throws an error naming the primitive on bad input. */
  abstractEval(avals: ShapedArray[], params: P): ShapedArray[];
  /** The reference (oracle) kernel. */
  impl: Kernel<P>;
  /** Extra rules attached by later layers (jvp, transpose, batch, lowering), keyed by rule name. */
  readonly rules: Record<string, unknown>;
}

const REGISTRY = new Map<string, Primitive>();

export function definePrimitive<P>(def: {
  name: string;
  abstractEval(avals: ShapedArray[], params: P): ShapedArray[];
  impl: Kernel<P>;
}): Primitive<P> {
  if (REGISTRY.has(def.name)) throw new Error(`definePrimitive: ${def.name} is defined twice`);
  const p: Primitive<P> = { ...def, rules: {} };
  REGISTRY.set(def.name, p);
  return p;
}

export function getPrimitive(name: string): Primitive {
  const p = REGISTRY.get(name);
  if (!p) throw new Error(`unknown primitive ${showValue(name)}`);
  return p;
}

export function allPrimitives(): Primitive[] {
  return [...REGISTRY.values()];
}
