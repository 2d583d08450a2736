/**
 * @tpukit/core/internal: what compilers and packages building on core need beyond the user
 * API: primitive records and `bind`, jaxpr internals and their interpreter, the rule types of
 * the transformations and batching helpers, the compiler seam of `jit`, backend internals, the
 * run-time WebAssembly assembler, and value formatting for error messages. Plus everything the
 * main entry exports, so one import can take both. Not covered by semver promises the way the
 * main entry is. Re-exports only.
 */
export * from './index';
export { asArray, type NestedInput, type TypedArrayInput } from './convert';
export { aval, type ShapedArray } from './aval';
export type { KernelPrimitive } from './kernel';
export {
  allPrimitives,
  type BatchRule,
  type BDim,
  definePrimitive,
  type ElementwiseDescriptor,
  getPrimitive,
  type HostArray,
  type JvpRule,
  type Kernel,
  NON_LINEAR,
  NOT_DIFFERENTIABLE,
  type Primitive,
  type PrimitiveRules,
  type TransposeRule,
  UndefPrimal,
} from './primitive';
export { bind, evalPrimitive, evalPrimitiveInto, evalPrimitiveIntoAll, intoMemo, type IntoMemo, setDynamicTrace, type Trace } from './trace';
export { type DotInto, evalDotsInto, StartedDots } from './dotGroup';
export { dotGeneralP } from './lax/dot';
export { envNumber, envSwitch, envVar } from './env';
export { frozenShape } from './shape';
export { Jaxpr, type JaxprEqn, Lit, Var } from './transforms/jaxpr';
export { evalJaxpr } from './transforms/eval';
export { moveBdim } from './transforms/batching';
export { type CompileRequest, type Compiler, type Executable, getCompiler, type PartitionedPath, registerCompiler } from './transforms/jit';
export { fnId } from './transforms/jitSignature';
export { referenceBackend } from './backends/reference';
export { type ArenaHost, arenaHost, type ResultBands } from './backend';
export { GemmEngine, type GemmKernelChoice, gemmKernelChoice } from './backends/systolic/gemmEngine';
export { GEMM_SHAPE_4X8, GEMM_SHAPE_5X8, type GemmShape } from './backends/systolic/gemmModule';
export { mxuDotGeneral } from './backends/systolic/mxuDot';
export { groupJobSettings } from './backends/systolic/threads';
export { operandPrecisions } from './lax/precision';
export { checkArrayBytes } from './sizeGuard';
export { doubleCounters } from './counters';
export { describeValue, showValue } from './describe';
export * as wasm from './wasm/index';

