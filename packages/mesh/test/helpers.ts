// Test helpers for the mesh tests: an elementwise closeness check and a mesh of 8 CPU devices.
import { type Array, np } from '@tpukit/core';
import { afterAll, beforeAll, expect } from 'vitest';
import { devices, setCpuDeviceCount } from '../src/index';

export function expectClose(actual: Array, expected: Array, tol = { rtol: 1e-5, atol: 1e-5 }): void {
  expect(actual.shape).toEqual(expected.shape);
  const a = actual.dataSync();
  const e = expected.dataSync();
  for (let i = 0; i < e.length; i++) {
    const ok = Math.abs(Number(a[i]) - Number(e[i])) <= tol.atol + tol.rtol * Math.abs(Number(e[i]));
    if (!ok) expect.fail(`element ${i}: got ${a[i]}, expected ${e[i]} (rtol ${tol.rtol}, atol ${tol.atol})`);
  }
}

/** Values 0..n-1 (scaled) in `shape`, float32. */
export const ramp = (shape: number[], scale = 1): Array => np.arange(0, shape.reduce((a, b) => a * b, 1), 1, 'float32').reshape(shape).mul(scale);

/**
 * For a test file: `n` CPU devices before its tests (then `ready`, e.g. to build the file's
 * mesh), every device's worker closed after them.
 */
export function useCpuDevices(n: number, ready: () => void = () => {}): void {
  beforeAll(() => {
    setCpuDeviceCount(n);
    ready();
  });
  afterAll(async () => {
    for (const d of devices()) await d.close();
  });
}
