/**
 * Types for the part of the WebAssembly JS API that the assembler, the kernels and the worker
 * pool use, and a typed handle `WA` to the runtime's global `WebAssembly`. The repository
 * compiles with the ES2022 library and @types/node 20, neither of which declares that global;
 * declaring it globally here would leak into users' type checks (and clash with the DOM
 * library), so tpukit reaches it through this module instead.
 */

export interface WasmMemoryDescriptor {
  initial: number;
  maximum?: number;
  shared?: boolean;
}

export interface WasmMemory {
  readonly buffer: ArrayBuffer | SharedArrayBuffer;
  grow(delta: number): number;
}

/** A compiled module (opaque). */
export interface WasmModule {
  readonly __wasmModule?: never;
}

export interface WasmInstance {
  readonly exports: Record<string, unknown>;
}

export interface WasmApi {
  Memory: new (descriptor: WasmMemoryDescriptor) => WasmMemory;
  Module: new (bytes: ArrayBufferView | ArrayBuffer) => WasmModule;
  Instance: new (module: WasmModule, imports?: Record<string, Record<string, unknown>>) => WasmInstance;
  validate(bytes: ArrayBufferView | ArrayBuffer): boolean;
}

/** The runtime's WebAssembly object. */
export const WA: WasmApi = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;
