/** The `wasm` namespace: the run-time WebAssembly assembler and feature detection. Re-exports only. */
export { ATOMIC, FunctionBuilder, type MemoryImport, ModuleBuilder, OP, SIMD, type ValType, sleb, uleb } from './assembler';
export { enableRelaxedSimd, wasmFeatures } from './features';
