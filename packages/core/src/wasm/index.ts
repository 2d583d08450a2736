/** The `wasm` namespace: the run-time WebAssembly assembler, feature detection and typed access to the WebAssembly API. Re-exports only. */
export { ATOMIC, FunctionBuilder, type MemoryImport, ModuleBuilder, OP, SIMD, type ValType, sleb, uleb } from './assembler';
export { enableRelaxedSimd, wasmFeatures } from './features';
export { crewStats, endPool, getWorkerIdleSpinMicros, readMessages, holdWorkers, joinSource, type PoolJobCounts, poolJobTimes, poolJobTrace, type PoolWorker, setWorkerIdleSpinMicros, traceStepLabel, traceStepStart, type WorkerKind, workerKind, WorkerPool } from './workerPool';
export { WA } from './webassemblyTypes';
// The WebAssembly API's types as aliases, not re-exports: the bundled .d.ts of the internal
// entry takes re-exported types from a shared chunk and then declares them as values inside
// this namespace (`wasm.WasmModule` would not be a type); an alias is declared in place.
import type * as T from './webassemblyTypes';
export type WasmApi = T.WasmApi;
export type WasmInstance = T.WasmInstance;
export type WasmMemory = T.WasmMemory;
export type WasmMemoryDescriptor = T.WasmMemoryDescriptor;
export type WasmModule = T.WasmModule;
