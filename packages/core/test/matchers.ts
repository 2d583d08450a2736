/**
 * Shared test helpers: `expectAllclose(actual, expected, { rtol, atol })` and the tolerances
 * per dtype that the property tests use. Import from tests as '../test/matchers' (or relative).
 */
import { expect } from 'vitest';
import type { Array, DType } from '../src/index';

export const TOL: Record<DType, { rtol: number; atol: number }> = {
  float32: { rtol: 1e-5, atol: 1e-6 },
  bfloat16: { rtol: 1e-2, atol: 1e-2 },
  float16: { rtol: 2e-3, atol: 1e-3 },
  int32: { rtol: 0, atol: 0 },
  uint32: { rtol: 0, atol: 0 },
  int8: { rtol: 0, atol: 0 },
  uint8: { rtol: 0, atol: 0 },
  bool: { rtol: 0, atol: 0 },
};

function flat(x: Array | ArrayLike<number> | number): ArrayLike<number> {
  if (typeof x === 'number') return [x];
  if (typeof (x as Array).dataSync === 'function') return (x as Array).dataSync();
  return x as ArrayLike<number>;
}

/** Asserts |a - e| <= atol + rtol * |e| elementwise (NaN matches NaN, infinities must match). */
export function expectAllclose(
  actual: Array | ArrayLike<number> | number,
  expected: Array | ArrayLike<number> | number,
  opts: { rtol?: number; atol?: number } = {},
): void {
  const a = flat(actual);
  const e = flat(expected);
  const rtol = opts.rtol ?? 1e-5;
  const atol = opts.atol ?? 1e-6;
  expect(a.length, 'length').toBe(e.length);
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = e[i];
    if (Number.isNaN(y)) {
      if (!Number.isNaN(x)) expect.fail(`element ${i}: expected NaN, got ${x}`);
      continue;
    }
    if (!Number.isFinite(y)) {
      if (x !== y) expect.fail(`element ${i}: expected ${y}, got ${x}`);
      continue;
    }
    if (!(Math.abs(x - y) <= atol + rtol * Math.abs(y))) {
      expect.fail(`element ${i}: ${x} vs expected ${y} (|diff| ${Math.abs(x - y)} > atol ${atol} + rtol ${rtol} * ${Math.abs(y)})`);
    }
  }
}
