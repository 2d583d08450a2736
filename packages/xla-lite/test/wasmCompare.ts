/**
 * Test helper shared by the WebAssembly kernel tests: compiles one program twice, once with
 * every fusion as its JavaScript kernel and once with WebAssembly kernels, so a test can run
 * both on the same inputs and compare them with each other and with eager execution.
 */
import type { Array } from '@tpukit/core';
import { expect } from 'vitest';
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

/** A value in [0, 1) from an element index and a seed (a sine hash: reproducible test data without a generator). */
export function unitHash(i: number, seed: number): number {
  const h = Math.sin(i * 12.9898 + seed * 78.233) * 43758.5453;
  return h - Math.floor(h);
}

/** Expects `a` to equal `b` element by element with Object.is (NaN equals NaN, -0 differs from +0), naming the first element that differs. */
export function expectSameValues(a: ArrayLike<number>, b: ArrayLike<number>, what: string): void {
  const text = (v: number): string => (Object.is(v, -0) ? '-0' : String(v));
  for (let i = 0; i < b.length; i++) if (!Object.is(a[i], b[i])) expect(text(a[i]), `${what}: element ${i}`).toBe(text(b[i]));
}
