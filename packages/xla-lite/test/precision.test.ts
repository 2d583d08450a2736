// Precision in xla-lite: HLO text prints operand_precision, StableHLO prints precision_config,
// and a compiled program runs its dots at the process default when they carry none.
import { lax, np, setDefaultMatmulPrecision, withBackend } from '@tpukit/core';
import { afterEach, describe, expect, it } from 'vitest';
import { jit } from '../src/index';

afterEach(() => {
  setDefaultMatmulPrecision(null);
});

const a = np.array([[1 / 3, 2 / 7], [5 / 9, 0.1]], 'float32');
const b = np.array([[0.7, 1 / 11], [2 / 3, 0.123456]], 'float32');

describe('precision in compiled programs', () => {
  it('HLO text prints operand_precision={...} when a dot has one', () => {
    const f = jit((x: typeof a, y: typeof a) => lax.dot(x, y, { precision: 'float32' }));
    expect(f.lower(a, b).asText()).toMatch(/dot\(.*\), lhs_contracting_dims=\{1\}, rhs_contracting_dims=\{0\}, operand_precision=\{highest,highest\}/);
    const g = jit((x: typeof a, y: typeof a) => lax.dot(x, y, { precision: ['bfloat16', 'tensorfloat32'] }));
    expect(g.lower(a, b).asText()).toContain('operand_precision={default,high}');
    const h = jit((x: typeof a, y: typeof a) => lax.dot(x, y));
    expect(h.lower(a, b).asText()).not.toContain('operand_precision');
  });

  it('StableHLO prints precision_config = [#stablehlo<precision ...>, ...]', () => {
    const f = jit((x: typeof a, y: typeof a) => np.matmul(x, y, { precision: lax.Precision.HIGH }));
    expect(f.lower(a, b).asStableHlo()).toContain(
      'dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [], rhs_batching_dimensions = [], lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision HIGH>, #stablehlo<precision HIGH>]}',
    );
    const g = jit((x: typeof a, y: typeof a) => np.matmul(x, y));
    expect(g.lower(a, b).asStableHlo()).not.toContain('precision_config');
  });

  it('a compiled dot without a precision runs at the default current when it runs', () => {
    withBackend('systolic', () => {
      const want = (p: string) => np.matmul(a, b, { precision: p as never }).toArray();
      const f = jit((x: typeof a, y: typeof a) => np.matmul(x, y));
      expect(f(a, b).toArray()).toEqual(want('default'));
      setDefaultMatmulPrecision('float32');
      expect(f(a, b).toArray()).toEqual(want('highest'));
      expect(want('highest')).not.toEqual(want('default'));
    });
  });

  it('an unknown precision is an error when tracing', () => {
    const f = jit((x: typeof a) => np.matmul(x, b, { precision: 'HIGHER' as never }));
    expect(() => f(a)).toThrow(/^jit\(fn\): while tracing: dot_general: unknown precision "HIGHER"; valid:/);
  });
});
