/**
 * Minimal type declarations for the WebAssembly JS API. The repository compiles with the ES2022
 * library and @types/node 20, neither of which declares the global `WebAssembly` namespace;
 * this declares the part the assembler, the kernels and the worker pool use.
 */
declare global {
  namespace WebAssembly {
    interface MemoryDescriptor {
      initial: number;
      maximum?: number;
      shared?: boolean;
    }
    interface Memory {
      readonly buffer: ArrayBuffer | SharedArrayBuffer;
      grow(delta: number): number;
    }
    interface Module {}
    interface Instance {
      readonly exports: Record<string, unknown>;
    }
    type Imports = Record<string, Record<string, unknown>>;
    var Memory: { prototype: Memory; new (descriptor: MemoryDescriptor): Memory };
    var Module: { prototype: Module; new (bytes: ArrayBufferView | ArrayBuffer): Module };
    var Instance: { prototype: Instance; new (module: Module, imports?: Imports): Instance };
    function validate(bytes: ArrayBufferView | ArrayBuffer): boolean;
  }
}

export {};
