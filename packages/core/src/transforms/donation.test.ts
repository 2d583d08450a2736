/**
 * Donation in core's `jit` (op by op, no compiler registered): donated inputs are deleted after
 * the call (`isDeleted()`), using one again is an "Array has been deleted" error naming the
 * function and the argument, and donating one Array twice (or donating an Array also passed
 * elsewhere) is an error before anything runs.
 */
import { describe, expect, it, vi } from 'vitest';
import { type Array, jit, np } from '../index';

const f32 = (x: number[]) => np.array(x, 'float32');

describe('jit donation (op by op)', () => {
  it('deletes donated inputs; reusing one names the function and the argument', () => {
    const step = jit(function step(p: Array, g: Array) {
      return np.subtract(p, g);
    }, { donateArgnums: 0 });
    const p = f32([1, 2]);
    const g = f32([0.5, 0.5]);
    const out = step(p, g) as Array;
    expect([...out.dataSync()]).toEqual([0.5, 1.5]);
    expect(p.isDeleted()).toBe(true);
    expect(g.isDeleted()).toBe(false);
    expect(p.shape).toEqual([2]);
    expect(() => p.dataSync()).toThrow(/Array has been deleted: cannot read a float32\[2\] array; it was donated to jit\(step\) as argument 0/);
    expect(() => np.add(p, 1)).toThrow(/Array has been deleted/);
    expect(() => step(p, g)).toThrow(/jit\(step\): argument 0 \(p\) is deleted. Array has been deleted/);
  });

  it('names the leaf of a donated pytree argument', () => {
    const f = jit((s: { a: Array; b: Array }) => ({ a: np.add(s.a, 1), b: np.add(s.b, 1) }), { donateArgnums: 0 });
    const s = { a: f32([1]), b: f32([2]) };
    f(s);
    expect(() => s.b.dataSync()).toThrow(/as argument 0 leaf 1/);
  });

  it('donating the same Array twice, or donating one also passed elsewhere, is an error', () => {
    const f = jit((a: Array, b: Array) => np.add(a, b), { donateArgnums: [0, 1] });
    const x = f32([1]);
    expect(() => f(x, x)).toThrow(/jit\(fn\): the same f32\[1\] Array is donated twice \(argument 0 and argument 1\)/);
    expect(x.isDeleted()).toBe(false);
    const g = jit((a: Array, b: Array) => np.add(a, b), { donateArgnums: 0 });
    expect(() => g(x, x)).toThrow(/argument 0 is donated but the same Array is also passed as flat input 1/);
    const c = f32([5]);
    const h = jit((a: Array) => np.add(a, np.multiply(c, 2)), { donateArgnums: 0 });
    expect(() => h(c)).toThrow(/argument 0 is donated but the function also closes over the same Array/);
    expect(c.isDeleted()).toBe(false);
  });

  it('an input returned as is stays alive', () => {
    const f = jit((a: Array) => a, { donateArgnums: 0 });
    const x = f32([3]);
    expect(f(x)).toBe(x);
    expect(x.isDeleted()).toBe(false);
  });

  it('a donation no output can reuse warns once and keeps the input alive', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const f = jit(function norm(p: Array, g: Array) {
        return np.add(p, np.sum(g));
      }, { donateArgnums: [0, 1] });
      const p = f32([1, 2]);
      const g = f32([1, 1, 1]);
      f(p, g);
      f(f32([1, 2]), g);
      expect(p.isDeleted()).toBe(true);
      expect(g.isDeleted()).toBe(false);
      expect(warn.mock.calls).toEqual([['jit(norm): Some donated buffers were not usable: argument 1 f32[3] (no output of the same shape and dtype; they are not deleted)']]);
    } finally {
      warn.mockRestore();
    }
  });

  it('delete() and isDeleted() as on jax.Array', () => {
    const x = f32([1]);
    x.delete();
    expect(x.isDeleted()).toBe(true);
    expect(() => x.dataSync()).toThrow(/after dispose\(\)/);
  });
});
