/**
 * @tpukit/xla-lite: XLA and jax.jit for TypeScript, the user-facing API. Importing it registers
 * the xla-lite compiler behind core's `jit`. This file only re-exports (plus that
 * registration); what only the compiler and its tests need (HLO IR, passes, kernel
 * generators, lowering) is `@tpukit/xla-lite/internal`.
 */
import { useXla } from './compiler';

useXla(true);

export type { CostAnalysis, MemoryAnalysis } from './analysis';
export { Compiled, type CompileOptions, Lowered } from './compiled';
export { clearCompileLog, type CompileRecord, compileLog, setPipelineOptions, useXla, xlaCompiler } from './compiler';
export { diskCacheStats, getCacheDir, setCacheDir } from './diskCache';
export type { ExecutableStats } from './executable';
export { type CompileStats, disableJit, isJitDisabled } from '@tpukit/core';
export { jit, lower, type XlaJitOptions, type XlaJitted } from './jit';
export type { PassStats, PipelineOptions } from './pipeline';
export { getKernelThreads, kernelThreadsAvailable, poolStats, setKernelThreads } from './wasm/pool';
export { getColumnRowBlocks, setColumnRowBlocks } from './wasm/emitKernel';
export { getColumnParallelWork, getParallelWork, setColumnParallelWork, setParallelWork } from './wasm/fusionPlan';
export { arenaTraffic, epilogueBandsEnabled, epilogueColumnSumsEnabled, ROW_SUMS_ONE_THREAD_MAX, rowOperandSumsEnabled, rowSumsOneThreadEnabled, setEpilogueBands, setEpilogueColumnSums, setRowOperandSums, setRowSumsOneThread, setWasmKernels, setZeroCopyDots, wasmKernelsEnabled, zeroCopyDotsEnabled } from './wasm/program';
export { GSPMDSharding, HloSharding } from './spmd/hloSharding';
export { type ShardingOptions, SpmdCompiled, SpmdLowered, type SpmdSpec } from './spmd/spmdJit';
export { profile, type ProfileRecord } from './profile';
