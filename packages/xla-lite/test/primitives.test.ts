// Every primitive core registers has what xla-lite needs: it lowers (one HLO instruction
// carrying the primitive), it runs (its reference kernel, or its eval rule for higher-order
// primitives), the fused ops carry core's elementwise descriptor, and it exports to StableHLO
// as real ops or as one of the documented custom calls below.
import { makeJaxpr, np } from '@tpukit/core';
import { allPrimitives, getPrimitive } from '@tpukit/core/internal';
import { describe, expect, test } from 'vitest';
import { FUSED_OPS, hasStableHlo, lowerJaxpr, opcodeOf } from '../src/internal';

/** Primitives StableHLO export writes as `stablehlo.custom_call @tpukit.<name>`, and why. */
const LIN = 'only transposed, never evaluated: the linear map of a forward-mode derivative that reverse mode transposes away before a program runs (custom_lin: customVjp; forward-mode differentiation of either is an error), so it never reaches an exported program that runs; the primal calls export inline and the fused attention as standard ops (passes/exportExpansion.ts)';
const STABLEHLO_CUSTOM_CALLS: Record<string, string> = {
  custom_lin: LIN,
  dot_product_attention_lin: LIN,
};

describe('every primitive', () => {
  test('lowers to an HLO instruction and runs (kernel or eval rule)', () => {
    const bad: string[] = [];
    for (const p of allPrimitives()) {
      const opcode = opcodeOf(p);
      if (typeof opcode !== 'string' || opcode === '') bad.push(`${p.name}: opcode`);
      if (typeof p.impl !== 'function' && typeof p.rules.eval !== 'function') bad.push(`${p.name}: no kernel or eval rule`);
    }
    expect(bad).toEqual([]);
  });

  test('fused ops are core elementwise primitives (broadcast_in_dim and iota aside)', () => {
    for (const name of FUSED_OPS) {
      if (name === 'broadcast_in_dim' || name === 'iota') continue;
      expect(getPrimitive(name).elementwise, name).toBeDefined();
    }
    expect(getPrimitive('broadcast_in_dim').elementwise).toBeUndefined();
    expect(getPrimitive('iota').elementwise).toBeUndefined();
  });

  test('cost analysis reads transcendentals from the descriptor', () => {
    expect(getPrimitive('tanh').elementwise).toEqual({ arity: 1, transcendental: true });
    expect(getPrimitive('add').elementwise).toEqual({ arity: 2, transcendental: false });
    expect(getPrimitive('atan2').elementwise).toEqual({ arity: 2, transcendental: true });
  });

  test('exports to StableHLO ops, or is a documented custom call', () => {
    const custom = allPrimitives()
      .map((p) => p.name)
      .filter((n) => !hasStableHlo(n))
      .sort();
    expect(custom).toEqual(Object.keys(STABLEHLO_CUSTOM_CALLS).sort());
  });

  test('a lowered program keeps the primitive on its instruction', () => {
    const m = lowerJaxpr(makeJaxpr((x: any) => np.tanh(x))(np.ones([2])));
    expect(m.entry.instructions.some((i) => i.prim === getPrimitive('tanh'))).toBe(true);
  });
});
