/**
 * Every registered primitive has a jvp rule (or the NOT_DIFFERENTIABLE marker), a transpose rule
 * (or NON_LINEAR: it is only ever applied to primals), and a batching rule, all given where the
 * primitive is defined. The few documented gaps are listed here by name, and each must fail with
 * an error naming the primitive.
 */
import { expect, test } from 'vitest';
import { grad, lax, nn, np } from '../index';
import { allPrimitives, getPrimitive, type PrimitiveRules } from '../internal';

/** Primitives without a jvp rule: differentiating them raises `jvp: primitive X has no jvp rule`. */
export const MISSING_JVP = ['digamma', 'scatter-mul', 'scatter-min', 'scatter-max', 'dot_product_attention_fwd', 'dot_product_attention_lin', 'dot_product_attention_bwd'];

/** The linear first-order primitives: their transpose is a rule, every other one's is NON_LINEAR (or, higher-order, a rule of its own). */
const LINEAR = [
  'neg', 'add', 'sub', 'mul', 'div', 'convert_element_type', 'select_n', 'broadcast_in_dim', 'reshape', 'transpose', 'rev', 'squeeze', 'reduce_sum',
  'cumsum', 'dot_general', 'slice', 'dynamic_slice', 'dynamic_update_slice', 'concatenate', 'pad', 'gather', 'scatter', 'scatter-add',
];

/** What the enumeration finds missing, less the documented gaps. */
function ruleGaps(): string[] {
  const missing: string[] = [];
  for (const p of allPrimitives()) {
    if (p.rules.jvp === undefined && !MISSING_JVP.includes(p.name)) missing.push(`${p.name}: jvp`);
    if (p.rules.transpose === undefined) missing.push(`${p.name}: transpose`);
    else if (LINEAR.includes(p.name) && typeof p.rules.transpose !== 'function') missing.push(`${p.name}: transpose (linear)`);
    if (p.rules.batch === undefined) missing.push(`${p.name}: batch`);
  }
  return missing;
}

test('every primitive has jvp, transpose and batching rules or a documented marker', () => {
  expect(ruleGaps()).toEqual([]);
  for (const name of MISSING_JVP) {
    const p = allPrimitives().find((q) => q.name === name);
    expect(p, name).toBeDefined();
    expect(p!.rules.jvp, name).toBeUndefined();
  }
  for (const name of LINEAR) expect(getPrimitive(name).rules.transpose, name).toBeTypeOf('function');
});

test('the enumeration catches a deleted rule', () => {
  const cases: [string, keyof PrimitiveRules, string][] = [
    ['sin', 'jvp', 'sin: jvp'],
    ['gather', 'batch', 'gather: batch'],
    ['reduce_sum', 'transpose', 'reduce_sum: transpose'],
    ['threefry2x32', 'transpose', 'threefry2x32: transpose'],
  ];
  for (const [name, field, gap] of cases) {
    const rules = getPrimitive(name).rules as Record<string, unknown>;
    const saved = rules[field];
    delete rules[field];
    try {
      expect(ruleGaps()).toEqual([gap]);
    } finally {
      rules[field] = saved;
    }
  }
  expect(ruleGaps()).toEqual([]);
});

test('a missing rule is an error naming the primitive and the rule', () => {
  expect(() => grad((x: any) => lax.digamma(x))(np.array(1.5))).toThrow(/jvp: primitive digamma has no jvp rule/);
  expect(() => grad((x: any) => np.sum(lax.scatterMul(x, np.array([[0]]), np.array([2.5]), { updateWindowDims: [], insertedWindowDims: [0], scatterDimsToOperandDims: [0] })))(np.array([1.5, 2.5]))).toThrow(
    /primitive scatter-mul has no jvp rule/,
  );
  // The fused attention is differentiated through customVjp once; its primitives have no jvp (no grad of grad).
  const kv = np.ones([1, 2, 1, 2]);
  const att = (x: any) => np.sum(nn.dotProductAttention(x, kv, kv, { implementation: 'fused' }));
  expect(() => grad((x: any) => np.sum(grad(att)(x)))(np.ones([1, 2, 1, 2]))).toThrow(/jvp: primitive dot_product_attention_\w+ has no jvp rule/);
});
