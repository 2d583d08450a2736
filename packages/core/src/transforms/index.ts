/**
 * The transformations' public surface (re-exported from the package index): tracing to jaxprs,
 * differentiation, batching, jit, custom rules and remat.
 */
export { ConcretizationTypeError, UnexpectedTracerError } from './core';
export { ClosedJaxpr, Jaxpr, type JaxprEqn, Lit, Var } from './jaxpr';
export { evalJaxpr } from './eval';
export { makeJaxpr, type ShapeDtypeStruct } from './tracing';
export { NOT_DIFFERENTIABLE, type JvpRule } from './jvp';
export { NON_LINEAR, type TransposeRule, UndefPrimal } from './transpose';
export { grad, jvp, linearize, valueAndGrad, vjp, type GradOptions } from './grad';
export { type BatchRule, type BDim, moveBdim, vmap, type VmapOptions } from './batching';
export { type CompileRequest, type Compiler, type CompileStats, type Executable, getCompiler, jit, type JitOptions, type Jitted, type PartitionedPath, type ProgramShardings, registerCompiler, type Traced } from './jit';
export { fnId } from './jitSignature';
export { disableJit, isJitDisabled } from './disableJit';
export { hessian, jacfwd, jacrev } from './grad';
export { customJvp, type CustomJvpFunction, customVjp, type CustomVjpFunction, stopGradient } from './custom';
export { checkpoint, type CheckpointOptions, checkpointPolicies, remat, type SaveablePolicy } from './checkpoint';
