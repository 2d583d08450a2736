// Generated kernels follow core's process-wide setNumThreads; setKernelThreads overrides it
// for kernels only (benchmarks), null follows core again.
import { getNumThreads, setNumThreads } from '@tpukit/core';
import { afterEach, expect, test } from 'vitest';
import { getKernelThreads, setKernelThreads } from '../src/index';

afterEach(() => {
  setKernelThreads(null);
  setNumThreads(null);
});

test('kernel threads follow core setNumThreads unless overridden', () => {
  setNumThreads(3);
  expect(getKernelThreads()).toBe(3);
  setKernelThreads(1);
  expect(getKernelThreads()).toBe(1);
  expect(getNumThreads()).toBe(3);
  setKernelThreads(null);
  setNumThreads(2);
  expect(getKernelThreads()).toBe(2);
  expect(() => setKernelThreads(0)).toThrow(/setKernelThreads: n must be an integer in 1\.\.256 or null; got 0/);
});
