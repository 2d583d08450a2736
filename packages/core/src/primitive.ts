/**
 * Primitives and `bind`. Every operation in tpukit ends as `bind(primitive, args, params)`. A
 * primitive is one record: its shape rule (`abstractEval`), its reference kernel (`impl`), and,
 * as the transformations arrive, its jvp / transpose / batching rules and its lowering. `bind`
 * hands the call to the innermost active trace (see `trace.ts`); with no trace active it runs
 * the kernel on the current backend.
 */
import type { Array } from './array';
import type { ShapedArray } from './aval';
import type { DType, StorageArray } from './dtype';
import type { Shape } from './shape';
import type { BatchRule } from './transforms/batching';
import type { JvpRule, NOT_DIFFERENTIABLE } from './transforms/jvp';
import type { PartialEvalRule } from './transforms/partialEval';
import type { NON_LINEAR, TransposeRule } from './transforms/transpose';
import { showValue } from './describe';

export { type ShapedArray, aval } from './aval';

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
  /** The transformation rules, attached by the layers that define them (see `PrimitiveRules`). */
  readonly rules: PrimitiveRules;
  /** Set for elementwise primitives: what compilers read for fusion, cost and code generation. */
  readonly elementwise?: ElementwiseDescriptor;
}

/**
 * A primitive's rules, one typed field each (all optional; a test checks which each primitive
 * has, with the documented gaps). Only the type lives here: the rules are set by transforms/.
 */
export interface PrimitiveRules {
  /** Forward mode; `NOT_DIFFERENTIABLE`: every output has a zero tangent. */
  jvp?: JvpRule | typeof NOT_DIFFERENTIABLE;
  /** Reverse mode for linear primitives; `NON_LINEAR`: only ever applied to primals. */
  transpose?: TransposeRule | typeof NON_LINEAR;
  /** vmap. */
  batch?: BatchRule;
  /** Higher-order primitives mixing known and unknown parts under partial evaluation. */
  partialEval?: PartialEvalRule;
  /** Higher-order primitives: evaluates the sub-programs (instead of a backend kernel). */
  eval?: (args: Array[], params: any) => Array[];
  /** Has a side effect (debug callbacks): kept by dead-code elimination and partial evaluation. */
  effect?: boolean;
}

/** What an elementwise primitive is, for compilers (fusion, cost analysis, code generation). */
export interface ElementwiseDescriptor {
  /** Number of operands, all of the output's shape (select_n: 3, its two-case form). */
  readonly arity: number;
  /** Counted as a transcendental by cost analysis (XLA's HloCostAnalysis definition). */
  readonly transcendental: boolean;
}

const REGISTRY = new Map<string, Primitive>();

export function definePrimitive<P>(def: {
  name: string;
  abstractEval(avals: ShapedArray[], params: P): ShapedArray[];
  impl: Kernel<P>;
  elementwise?: ElementwiseDescriptor;
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
