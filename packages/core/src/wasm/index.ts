/** The `wasm` namespace: the run-time WebAssembly assembler, feature detection and typed access to the WebAssembly API. Re-exports only. */
export { ATOMIC, FunctionBuilder, type MemoryImport, ModuleBuilder, OP, SIMD, type ValType, sleb, uleb } from './assembler';
export { enableRelaxedSimd, wasmFeatures } from './features';
export { type PoolWorker, WorkerPool } from './workerPool';
export { WA, type WasmApi, type WasmInstance, type WasmMemory, type WasmMemoryDescriptor, type WasmModule } from './webassemblyTypes';
