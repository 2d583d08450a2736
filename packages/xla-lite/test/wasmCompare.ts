/**
 * Test helper shared by the WebAssembly kernel tests: compiles one program twice, once with
 * every fusion as its JavaScript kernel and once with WebAssembly kernels, so a test can run
 * both on the same inputs and compare them with each other and with eager execution.
 */
import type { Array } from '@tpukit/core';
import { type Compiled, type CompileOptions, lower, setWasmKernels } from '../src/index';

export type Fn = (...xs: Array[]) => Array;

/** The same program compiled with JavaScript kernels and with WebAssembly kernels. */
export function compileBoth(f: Fn, args: Array[], opts: CompileOptions = {}): { js: Compiled; wasm: Compiled } {
  setWasmKernels(false);
  const js = lower(f)(...args).compile(opts);
  setWasmKernels(true);
  const wasm = lower(f)(...args).compile(opts);
  return { js, wasm };
}
