// StableHLO export: structure of the MLIR text (no real XLA here to compile it, see README).
import { lax, nn, np } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { jit, tensorType } from '../src/internal';

/** Checks SSA well-formedness of the top-level ops: each %value is defined once, before use. */
function checkSsa(text: string): void {
  const defined = new Set<string>();
  const body = text.split('\n').filter((l) => l.startsWith('    ') && !l.startsWith('     '));
  for (const m of text.matchAll(/%arg\d+/g)) defined.add(m[0]);
  for (const line of body) {
    const def = /^\s+(%\d+)(?::\d+)? = /.exec(line);
    const rhs = def ? line.slice(def[0].length) : line;
    for (const u of rhs.matchAll(/%(?:arg)?\d+/g)) expect(defined.has(u[0]), `${u[0]} used before definition in: ${line}`).toBe(true);
    if (def) {
      expect(defined.has(def[1]), `${def[1]} defined twice`).toBe(false);
      defined.add(def[1]);
    }
  }
}

describe('asStableHlo', () => {
  it('writes func.func @main with stablehlo ops and tensor types', () => {
    const f = (a: any, b: any) => nn.softmax(np.add(np.matmul(a, b), 1), { axis: -1 });
    const text = jit(f).lower(np.ones([2, 3]), np.ones([3, 4])).asStableHlo();
    expect(text).toMatch(/^module @jit_f \{\n {2}func\.func public @main\(%arg0: tensor<2x3xf32>, %arg1: tensor<3x4xf32>\) -> \(tensor<2x4xf32>\) \{/);
    expect(text).toContain('"stablehlo.dot_general"(%arg0, %arg1) {dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [], rhs_batching_dimensions = [], lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>');
    expect(text).toMatch(/"stablehlo\.reduce"\(%\d+, %\d+\) \(\{\n\^bb0\(%lhs: tensor<f32>, %rhs: tensor<f32>\):\n {2}%s = "stablehlo\.maximum"/);
    expect(text).toContain('"stablehlo.exponential"');
    expect(text).toMatch(/"func\.return"\(%\d+\) : \(tensor<2x4xf32>\) -> \(\)\n {2}\}\n\}\n$/);
    expect(text).not.toContain('custom_call');
    checkSsa(text);
  });

  it('reduce_max / reduce_min start from each dtype\'s own extreme: float16 -inf is 0xFC00 (not bf16 bits), int8 from -128 / 127, uint8 from 0 / 255', () => {
    const init = (dtype: 'float16' | 'bfloat16' | 'int8' | 'uint8' | 'int32', f: (a: any) => any): string => {
      const text = jit((a: any) => f(lax.convertElementType(a, dtype))).lower(np.ones([4])).asStableHlo();
      const m = /"stablehlo\.constant"\(\) \{value = dense<([^>]+)> : tensor<(?:f16|bf16|i8|ui8|i32)>\}[^\n]*\n[^\n]*"stablehlo\.reduce"/.exec(text);
      expect(m, text).not.toBeNull();
      return m![1];
    };
    expect(init('float16', (a) => np.max(a))).toBe('0xFC00');
    expect(init('float16', (a) => np.min(a))).toBe('0x7C00');
    expect(init('bfloat16', (a) => np.max(a))).toBe('0xFF80');
    expect(init('int8', (a) => np.max(a))).toBe('-128');
    expect(init('int8', (a) => np.min(a))).toBe('127');
    expect(init('uint8', (a) => np.max(a))).toBe('0');
    expect(init('uint8', (a) => np.min(a))).toBe('255');
    expect(init('int32', (a) => np.min(a))).toBe('2147483647');
  });

  it('writes bf16, i1 compares and selects, and top_k as a stable descending sort of (x, iota) and two slices', () => {
    const f = (a: any) => {
      const c = lax.convertElementType(a, 'bfloat16');
      const m = np.where(np.greater(a, 0), a, np.multiply(a, 0.1));
      const [, idx] = lax.topK(m, 2);
      return [c, idx];
    };
    const text = jit(f).lower(np.ones([4, 3])).asStableHlo();
    expect(text).toContain('-> tensor<4x3xbf16>');
    expect(text).toMatch(/"stablehlo\.compare"\(%arg0, %\d+\) \{comparison_direction = #stablehlo<comparison_direction GT>, compare_type = #stablehlo<comparison_type FLOAT>\} : \(tensor<4x3xf32>, tensor<4x3xf32>\) -> tensor<4x3xi1>/);
    expect(text).toMatch(/"stablehlo\.select"\(%\d+, %\w+, %\d+\) : \(tensor<4x3xi1>, tensor<4x3xf32>, tensor<4x3xf32>\)/);
    expect(text).not.toContain('custom_call');
    expect(text).toMatch(/%(\d+):2 = "stablehlo\.sort"\(%\d+, %\d+\) \(\{\n\^bb0\(%a0: tensor<f32>, %b0: tensor<f32>, %a1: tensor<i32>, %b1: tensor<i32>\):[^]*\}\) \{dimension = 1 : i64, is_stable = true\}/);
    expect(text).toMatch(/"stablehlo\.slice"\(%\d+#1\) \{start_indices = array<i64: 0, 0>, limit_indices = array<i64: 4, 2>, strides = array<i64: 1, 1>\} : \(tensor<4x3xi32>\) -> tensor<4x2xi32>/);
    checkSsa(text);
  });

  it('prints tensor types for every dtype', () => {
    expect(tensorType({ shape: [], dtype: 'float32', weakType: false })).toBe('tensor<f32>');
    expect(tensorType({ shape: [2, 3], dtype: 'bfloat16', weakType: false })).toBe('tensor<2x3xbf16>');
    expect(tensorType({ shape: [5], dtype: 'bool', weakType: false })).toBe('tensor<5xi1>');
    expect(tensorType({ shape: [1], dtype: 'uint32', weakType: false })).toBe('tensor<1xui32>');
  });
});

describe('asStableHlo of an optimised module', () => {
  it('exports kRow / kOutput / kLoop fusion bodies inline and layout copies as nothing', () => {
    const f = (a: any, b: any, c: any) => nn.softmax(np.tanh(np.add(np.matmul(a, b), 1)), { axis: -1 });
    const args = [np.ones([2, 3]), np.ones([3, 4]), np.ones([2, 3, 4])];
    const g = (a: any, b: any, c: any) => np.add(f(a, b, c), lax.dotGeneral(c, c, [[[0, 2], [0, 2]], [[], []]]).sum());
    const compiled = jit(g).lower(args[0], args[1], args[2]).compile();
    const hlo = compiled.asText();
    expect(hlo).toContain('kind=kRow');
    expect(hlo).toContain(' copy(');
    const text = compiled.asStableHlo();
    checkSsa(text);
    expect(text).not.toContain('fusion');
    expect(text).not.toContain('copy');
    expect(text).toContain('"stablehlo.dot_general"');
    expect(text.match(/"stablehlo\.reduce"/g)!.length).toBeGreaterThanOrEqual(3);
  });
});
