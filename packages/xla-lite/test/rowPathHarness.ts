/** Test helper for the row kernel's path switches (src/wasm/rowsKernel.ts `setRowKernelPaths`): compile with paths set, compare two executables' bits over thread counts. */
import { type Array, setNumThreads, withBackend } from '@tpukit/core';
import { expect } from 'vitest';
import { jit, setKernelThreads } from '../src/index';
import { setRowKernelPaths } from '../src/wasm/rowsKernel';

export type RowFn = (...xs: Array[]) => Array[];
type Paths = Parameters<typeof setRowKernelPaths>[0];

/** `g` compiled for the systolic backend with `paths` set while its kernels are emitted (at compile), then `restore` set again. */
export function compileWithPaths(g: RowFn, args: Array[], paths: Paths, restore: Paths) {
  setRowKernelPaths(paths);
  try {
    return withBackend('systolic', () => jit(g).lower(...args).compile());
  } finally {
    setRowKernelPaths(restore);
  }
}

type Compiled = ReturnType<typeof compileWithPaths>;

/**
 * On 1, 2, 3 and again 1 thread(s), new arguments each pass (`argsAt(pass + 1)`): `on`'s outputs
 * have `off`'s bits as `bitsOf` reads them; `first` checks the first pass's outputs further.
 */
export function sameBitsOverThreads(on: Compiled, off: Compiled, argsAt: (pass: number) => Array[], bitsOf: (a: Array) => number[], first?: (got: Array[], args: Array[]) => void): void {
  [1, 2, 3, 1].forEach((t, pass) => {
    setNumThreads(t);
    setKernelThreads(t);
    const args = argsAt(pass + 1);
    const got = withBackend('systolic', () => on.call(args)) as Array[];
    const want = withBackend('systolic', () => off.call(args)) as Array[];
    expect(got.length).toBe(want.length);
    got.forEach((x, q) => expect(bitsOf(x), `output ${q} at ${t} thread(s)`).toEqual(bitsOf(want[q])));
    if (pass === 0) first?.(got, args);
  });
}
