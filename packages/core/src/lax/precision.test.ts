/** lax.Precision: JAX's names and aliases, the process default (scoped and global), MXU passes, and clear errors on every backend. */
import { afterEach, describe, expect, it } from 'vitest';
import { defaultMatmulPrecision, getDefaultMatmulPrecision, jit, lax, np, setDefaultMatmulPrecision, withBackend } from '../index';
import { passCount } from '../backends/systolic/index';
import { canonicalizePrecision } from './precision';

afterEach(() => {
  setDefaultMatmulPrecision(null);
});

// Values whose bf16 rounding loses bits, so 1, 3 and 6 passes give different float32 results.
const a = np.array([[1 / 3, 2 / 7, 0.1], [5 / 9, 1e-3, 3.14159]], 'float32');
const b = np.array([[0.7, 1 / 11], [2 / 3, 0.123456], [9 / 7, 1e-2]], 'float32');
const mm = (precision?: unknown) => np.matmul(a, b, { precision: precision as never }).toArray();

describe('lax.Precision names and aliases (as jax.lax.Precision)', () => {
  it('canonicalises every alias, case-insensitively, and pairs', () => {
    expect(lax.Precision).toEqual({ DEFAULT: 'default', HIGH: 'high', HIGHEST: 'highest' });
    const want: [string, string][] = [
      ['default', 'default'], ['fastest', 'default'], ['bfloat16', 'default'], ['DEFAULT', 'default'],
      ['high', 'high'], ['bfloat16_3x', 'high'], ['tensorfloat32', 'high'], ['HIGH', 'high'],
      ['highest', 'highest'], ['float32', 'highest'], ['HIGHEST', 'highest'],
    ];
    for (const [alias, name] of want) expect(canonicalizePrecision(alias, 'op')).toBe(name);
    expect(canonicalizePrecision(null, 'op')).toBe(null);
    expect(canonicalizePrecision(['float32', 'bfloat16'], 'op')).toEqual(['highest', 'default']);
    expect(canonicalizePrecision(['high', 'tensorfloat32'], 'op')).toBe('high');
  });

  it('the systolic backend makes 1, 3 and 6 bf16 passes (DEFAULT, HIGH, HIGHEST)', () => {
    expect([passCount('float32', 'default'), passCount('float32', 'high'), passCount('float32', 'highest')]).toEqual([1, 3, 6]);
    expect(passCount('bfloat16', 'highest')).toBe(1);
    expect(passCount('float32', ['default', 'highest'])).toBe(6);
    withBackend('systolic', () => {
      const [d, h, hh] = [mm('default'), mm('high'), mm('highest')];
      expect(d).not.toEqual(h);
      expect(h).not.toEqual(hh);
      expect(mm('bfloat16')).toEqual(d);
      expect(mm('fastest')).toEqual(d);
      expect(mm(undefined)).toEqual(d);
      expect(mm('tensorfloat32')).toEqual(h);
      expect(mm('bfloat16_3x')).toEqual(h);
      expect(mm('float32')).toEqual(hh);
      expect(mm('HIGHEST')).toEqual(hh);
      expect(mm(lax.Precision.HIGHEST)).toEqual(hh);
      expect(mm(['bfloat16', 'float32'])).toEqual(hh);
    });
  });

  it('an unknown name is a clear error on every backend (was a TypeError inside mxuDot, or silently accepted)', () => {
    const msg = /^dot_general: unknown precision "fp8"; valid: lax\.Precision\.DEFAULT \/ HIGH \/ HIGHEST or one of 'default', 'fastest', 'bfloat16', 'high', 'bfloat16_3x', 'tensorfloat32', 'highest', 'float32'/;
    for (const backend of ['systolic', 'reference']) {
      withBackend(backend, () => {
        expect(() => mm('fp8')).toThrow(msg);
        expect(() => lax.dot(a, b, { precision: 'fp8' as never })).toThrow(msg);
        expect(() => np.einsum('ij,jk->ik', a, b, { precision: 'fp8' as never })).toThrow(msg);
        expect(() => mm(['high'])).toThrow('dot_general: a precision pair must be [lhs, rhs]; got ["high"]');
        expect(() => mm(2)).toThrow(/dot_general: unknown precision 2;/);
      });
    }
    // Under jit the same message, prefixed with the function being traced (as every error raised while tracing is).
    expect(() => jit((x: typeof a) => np.matmul(x, b, { precision: 'fp8' as never }))(a)).toThrow(new RegExp(`^jit\\(fn\\): while tracing: ${msg.source.slice(1)}`));
  });
});

describe('defaultMatmulPrecision (as jax.default_matmul_precision)', () => {
  it('applies to dots without a precision, scoped or global, and never overrides an explicit one', () => {
    withBackend('systolic', () => {
      const [d, h, hh] = [mm('default'), mm('high'), mm('highest')];
      expect(defaultMatmulPrecision('float32', () => mm())).toEqual(hh);
      expect(defaultMatmulPrecision('tensorfloat32', () => mm())).toEqual(h);
      expect(defaultMatmulPrecision('float32', () => mm('bfloat16'))).toEqual(d);
      expect(mm()).toEqual(d); // restored
      expect(() => defaultMatmulPrecision('highest', () => {
        throw new Error('boom');
      })).toThrow('boom');
      expect(getDefaultMatmulPrecision()).toBe(null);
      expect(setDefaultMatmulPrecision('HIGHEST')).toBe(null);
      expect(mm()).toEqual(hh);
      // A jitted program reads the default when it runs, as a retrace under the new config would.
      const f = jit((x: typeof a) => np.matmul(x, b));
      expect(f(a).toArray()).toEqual(hh);
      expect(setDefaultMatmulPrecision(null)).toBe('highest');
      expect(f(a).toArray()).toEqual(d);
    });
  });

  it('restores after a promise settles, and validates its argument', async () => {
    const p = defaultMatmulPrecision('high', async () => {
      await Promise.resolve();
      return getDefaultMatmulPrecision();
    });
    expect(await p).toBe('high');
    expect(getDefaultMatmulPrecision()).toBe(null);
    expect(() => setDefaultMatmulPrecision('fp8')).toThrow(/^setDefaultMatmulPrecision: unknown precision "fp8"/);
    expect(() => setDefaultMatmulPrecision(['high', 'highest'])).toThrow('setDefaultMatmulPrecision: takes one precision, not a pair');
  });
});
