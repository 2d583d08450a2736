// jit traces JS numbers and booleans as weakly typed scalars (JAX traces Python scalars the
// same way): integers weak int32, other numbers weak float32, booleans bool. A new value of the
// same kind reuses the trace; the kind (int vs float vs bool) is part of the signature.
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { type Array, disableJit, grad, isJitDisabled, jit, np } from '../index';
import { expectAllclose } from '../../test/matchers';

const params = { w: np.array([1, -2, 3], 'float32'), b: np.array(0.5, 'float32') };
const step = (p: typeof params, lr: number) => ({ w: np.subtract(p.w, np.multiply(p.w, lr)), b: np.subtract(p.b, lr) });

describe('JS numbers as traced jit arguments', () => {
  test('step(params, 0.1) and step(params, 0.2) trace once, like JAX', () => {
    const f = jit(step);
    const a = f(params, 0.1);
    const b = f(params, 0.2);
    expect(f.traceCount).toBe(1);
    expect(f.compileStats()).toMatchObject({ hits: 1, misses: 1, recompiles: 0 });
    expectAllclose(a.w, step(params, 0.1).w);
    expectAllclose(b.w, step(params, 0.2).w);
    expectAllclose(b.b, 0.5 - 0.2);
  });

  test('a float is a weak float32 input, an integer a weak int32, a boolean a bool', () => {
    const f = jit((x: Array, k: number | boolean) => np.add(x, k as number));
    const x = np.array([1, 2], 'float32');
    expect(f.lower(x, 0.5).inAvals[1]).toEqual({ shape: [], dtype: 'float32', weakType: true });
    expect(f.lower(x, 3).inAvals[1]).toEqual({ shape: [], dtype: 'int32', weakType: true });
    expect(f.lower(x, true).inAvals[1]).toEqual({ shape: [], dtype: 'bool', weakType: false });
  });

  test('the kind of number is part of the signature, explained on recompile', () => {
    const f = jit((x: Array, k: number) => np.multiply(x, k));
    const x = np.array([1, 2], 'float32');
    f(x, 2);
    f(x, 5);
    f(x, 0.5);
    expect(f.traceCount).toBe(2);
    expect(f.compileStats().explanations).toEqual(['argument 1 (k): i32[]{weak} -> f32[]{weak}']);
  });

  test('weak scalars do not promote the other operand, as eagerly', () => {
    const bf = np.array([1.5, -2], 'bfloat16');
    const i8 = np.array([3, -4], 'int8');
    const f = jit((x: Array, k: number) => np.multiply(x, k));
    expect(f(bf, 0.25).dtype).toBe('bfloat16');
    expect(f(i8, 3).dtype).toBe('int8');
    expect([...f(i8, 3).dataSync()]).toEqual([9, -12]);
    expect(f(bf, 0.25).dtype).toBe(np.multiply(bf, 0.25).dtype);
  });

  test('booleans select', () => {
    const f = jit((x: Array, neg: boolean) => np.where(neg, np.negative(x), x));
    const x = np.array([1, 2], 'float32');
    expect([...f(x, true).dataSync()]).toEqual([-1, -2]);
    expect([...f(x, false).dataSync()]).toEqual([1, 2]);
    expect(f.traceCount).toBe(1);
  });

  test('in pytrees, and under grad', () => {
    const loss = jit((w: Array, cfg: { scale: number; shift: number }) => np.sum(np.square(np.add(np.multiply(w, cfg.scale), cfg.shift))));
    const w = np.array([1, 2], 'float32');
    const g = grad((v: Array) => loss(v, { scale: 0.5, shift: 1 }))(w) as Array;
    expectAllclose(g, [2 * 0.5 * (0.5 + 1), 2 * 0.5 * (1 + 1)]);
    loss(w, { scale: 3.5, shift: 2 });
    loss(w, { scale: 1.5, shift: -7 });
    expect(loss.traceCount).toBe(1); // under grad the inputs are tracers of the same types: one trace for all
    expectAllclose(loss(w, { scale: 1.5, shift: -7 }), (1.5 - 7) ** 2 + (3 - 7) ** 2);
  });

  test('an integer outside int32 is an error naming the function and the argument', () => {
    const f = jit(function scale(x: Array, k: number) {
      return np.multiply(x, k);
    });
    expect(() => f(np.ones([1]), 2 ** 33)).toThrow(/jit\(scale\): argument 1 \(k\) is the JS integer 8589934592, outside int32/);
  });

  test('property: any float learning rate gives the eager result with one trace', () => {
    const f = jit(step);
    fc.assert(
      fc.property(fc.double({ min: -4, max: 4, noNaN: true }).filter((v) => !Number.isInteger(v)), (lr) => {
        expectAllclose(f(params, lr).w, step(params, lr).w, { rtol: 1e-6 });
      }),
      { numRuns: 25 },
    );
    expect(f.traceCount).toBe(1);
  });
});

describe('disableJit lives in core', () => {
  test('runs eagerly and leaves the cache untouched', () => {
    let traced = 0;
    const f = jit((x: Array) => {
      traced++;
      return np.exp(x);
    });
    const x = np.array([0, 1], 'float32');
    disableJit(() => {
      expect(isJitDisabled()).toBe(true);
      f(x);
      f(x);
    });
    expect(isJitDisabled()).toBe(false);
    expect(traced).toBe(2);
    expect(f.traceCount).toBe(0);
    f(x);
    f(x);
    expect(f.traceCount).toBe(1);
    expect(() => disableJit('yes' as never)).toThrow(/disableJit: expected a boolean or a function; got string/);
  });
});
