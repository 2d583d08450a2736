/**
 * Primitives and `bind`. Every operation in tpukit ends as `bind(primitive, args, params)`. A
 * primitive is one record: its shape rule (`abstractEval`), its reference kernel (`impl`), its
 * jvp / transpose / batching rules (`rules`, given where the primitive is defined) and, for
 * elementwise primitives, the descriptor compilers read. The rule types live here, below every
 * primitive definition, so a definition and its rules sit in one place; the machinery that
 * applies them is in transforms/ (jvp.ts, transpose.ts, batching.ts). `bind`
 * hands the call to the innermost active trace (see `trace.ts`); with no trace active it runs
 * the kernel on the current backend.
 */
import type { Array } from './array';
import type { ShapedArray } from './aval';
import type { Kernel, KernelInto } from './kernel';
import { showValue } from './describe';

export { type ShapedArray, aval } from './aval';
export type { HostArray, Kernel, KernelInto } from './kernel';

export interface Primitive<P = any> {
  readonly name: string;
  /** Shape/dtype rule; throws an error naming the primitive on bad input. */
  abstractEval(avals: ShapedArray[], params: P): ShapedArray[];
  /** The reference (oracle) kernel. */
  impl: Kernel<P>;
  /** Optional: the reference kernel writing into caller storage (what host backends' `executeInto` runs). */
  implInto?: KernelInto<P>;
  /** The transformation rules, attached by the layers that define them (see `PrimitiveRules`). */
  readonly rules: PrimitiveRules;
  /** Set for elementwise primitives: what compilers read for fusion, cost and code generation. */
  readonly elementwise?: ElementwiseDescriptor;
  /** The HLO opcode it lowers to, as XLA prints it; absent: its own name. */
  readonly hlo?: string;
  /** The StableHLO op it exports as when that is one op over the same operands (`stablehlo.<name>`); absent: a case of its own or a custom call. */
  readonly stablehlo?: string;
}

/** A jvp rule: primal outputs and tangent outputs (null = zero) from primals and tangents. */
export type JvpRule = (primals: Array[], tangents: (Array | null)[], params: any) => [Array[], (Array | null)[]];

/** Marker jvp rule: every output has a zero tangent (comparisons, rounding, integer ops, random bits). */
export const NOT_DIFFERENTIABLE = Object.freeze({ notDifferentiable: true as const });

/** A linear input of an equation being transposed: only its type is known. */
export class UndefPrimal {
  constructor(readonly aval: ShapedArray) {}
}

export const isUndef = (x: unknown): x is UndefPrimal => x instanceof UndefPrimal;

/** A transpose rule: cotangents of the inputs (null = zero) from those of the outputs; linear inputs are `UndefPrimal`s. */
export type TransposeRule = (cts: (Array | null)[], args: (Array | UndefPrimal)[], params: any) => (Array | null)[];

/** Marker transpose rule: the primitive is never applied to a linear (tangent) value. */
export const NON_LINEAR = Object.freeze({ nonLinear: true as const });

/** Where a batched value's batch dimension is (null: the same for every batch member). */
export type BDim = number | null;

/**
 * A batching rule: batched outputs and their batch dims from operands and theirs. `axisName` is
 * the mapped axis' name (`vmap(f, { axisName })`, or a mesh axis under @tpukit/mesh's shardMap),
 * null for an unnamed vmap; collectives over a named axis use it to tell their own axis from an
 * unrelated vmap's.
 */
export type BatchRule = (vals: Array[], dims: BDim[], params: any, axisSize: number, axisName?: string | null) => [Array[], BDim[]];

/**
 * A partial-evaluation rule over trace type `T` and tracer type `Tr`: the outputs, some staged,
 * of a higher-order primitive applied to partly known tracers. transforms/partialEval.ts
 * instantiates it with its own classes as `PartialEvalRule`.
 */
export type PartialEvalRuleOf<T, Tr> = (trace: T, tracers: Tr[], params: any) => Array[];

/**
 * A primitive's rules, one typed field each (all optional; a test checks which each primitive
 * has, with the documented gaps). They are given to `definePrimitive` with the primitive.
 */
export interface PrimitiveRules {
  /** Forward mode; `NOT_DIFFERENTIABLE`: every output has a zero tangent. */
  jvp?: JvpRule | typeof NOT_DIFFERENTIABLE;
  /** Reverse mode for linear primitives; `NON_LINEAR`: only ever applied to primals. */
  transpose?: TransposeRule | typeof NON_LINEAR;
  /** vmap. */
  batch?: BatchRule;
  /**
   * Higher-order primitives mixing known and unknown parts under partial evaluation. Its trace
   * and tracers are transforms/partialEval.ts's (`PartialEvalRule` there); `never` here accepts
   * a rule over them without this layer importing upward, and only that module calls it.
   */
  partialEval?: PartialEvalRuleOf<never, never>;
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
  /** Comparisons: the direction of the `compare` they lower to. */
  readonly compare?: 'EQ' | 'NE' | 'LT' | 'LE' | 'GT' | 'GE';
}

const REGISTRY = new Map<string, Primitive>();

/** What `definePrimitive` takes: the record's fields, with the rules given directly or built from the new primitive. */
export interface PrimitiveDef<P> {
  name: string;
  abstractEval(avals: ShapedArray[], params: P): ShapedArray[];
  impl: Kernel<P>;
  implInto?: KernelInto<P>;
  elementwise?: ElementwiseDescriptor;
  hlo?: string;
  stablehlo?: string;
  /** The rules, or a function of the primitive itself (most rules bind the primitive they belong to). */
  rules?: PrimitiveRules | ((self: Primitive<P>) => PrimitiveRules);
}

export function definePrimitive<P>(def: PrimitiveDef<P>): Primitive<P> {
  if (REGISTRY.has(def.name)) throw new Error(`definePrimitive: ${def.name} is defined twice`);
  const { rules, ...fields } = def;
  const p: Primitive<P> = { ...fields, rules: {} };
  Object.assign(p.rules, typeof rules === 'function' ? rules(p) : rules);
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
