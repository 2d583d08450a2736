/**
 * @tpukit/xla-lite: XLA and jax.jit for TypeScript. Importing it registers the xla-lite
 * compiler behind core's `jit`. This file only re-exports (plus that registration).
 */
import { useXla } from './compiler';

useXla(true);

export { type CostAnalysis, computationCost, type MemoryAnalysis, memoryAnalysis } from './analysis';
export { Compiled, type CompileOptions, Lowered } from './compiled';
export { clearCompileLog, type CompileRecord, compileLog, setPipelineOptions, useXla, xlaCompiler } from './compiler';
export { disableJit, isJitDisabled } from './disable';
export { cacheKey, diskCacheStats, getCacheDir, setCacheDir } from './diskCache';
export { type ExecutableStats, buildExecutable } from './executable';
export { bytesOf, HloComputation, HloInstruction, HloModule, numel } from './hlo';
export { type CompileStats, jit, lower, type XlaJitOptions, type XlaJitted } from './jit';
export { compileFusionKernel } from './js/fusionKernels';
export { compileKernel, type FusedKernel, kernelSource } from './js/kernel';
export { lowerJaxpr, OPCODE } from './lower';
export { emptyPassStats, optimize, type PassStats, type PipelineOptions } from './pipeline';
export { algebraicSimplify } from './passes/algebraic';
export { assignBuffers, type BufferAssignment } from './passes/bufferAssignment';
export { constantFold } from './passes/constantFolding';
export { cse } from './passes/cse';
export { dce } from './passes/dce';
export { fuseElementwise, isFusible, outlineFusion } from './passes/fusion';
export { assignLayouts, foldDotTransposes, gemmReadable, insertLayoutCopies, physicalParams } from './passes/layoutAssignment';
export { fuseDotEpilogues, splitOutputFusion } from './passes/outputFusion';
export { fuseRows } from './passes/rowFusion';
export { compileRowKernel, rowKernelSource } from './js/rowKernel';
export { tensorType, toStableHlo } from './stablehlo';
export { getKernelThreads, kernelThreadsAvailable, poolStats, setKernelThreads } from './wasm/pool';
export { setWasmKernels, wasmKernelsEnabled } from './wasm/program';
export { profile, type ProfileRecord } from './profile';
export { hloType, moduleText } from './text';
