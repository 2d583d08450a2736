/**
 * Every registered primitive has a jvp rule (or the NOT_DIFFERENTIABLE marker), a transpose rule
 * (or NON_LINEAR: it is only ever applied to primals), and a batching rule. The few documented
 * gaps are listed here by name, and each must fail with an error naming the primitive.
 */
import { expect, test } from 'vitest';
import { grad, lax, np } from '../index';
import { allPrimitives } from '../internal';

/** Primitives without a jvp rule: differentiating them raises `jvp: primitive X has no jvp rule`. */
export const MISSING_JVP = ['digamma', 'scatter-mul', 'scatter-min', 'scatter-max'];

test('every primitive has jvp, transpose and batching rules or a documented marker', () => {
  const missing: string[] = [];
  for (const p of allPrimitives()) {
    if (p.rules.jvp === undefined && !MISSING_JVP.includes(p.name)) missing.push(`${p.name}: jvp`);
    if (p.rules.transpose === undefined) missing.push(`${p.name}: transpose`);
    if (p.rules.batch === undefined) missing.push(`${p.name}: batch`);
  }
  expect(missing).toEqual([]);
  for (const name of MISSING_JVP) {
    const p = allPrimitives().find((q) => q.name === name);
    expect(p, name).toBeDefined();
    expect(p!.rules.jvp, name).toBeUndefined();
  }
});

test('a missing rule is an error naming the primitive and the rule', () => {
  expect(() => grad((x: any) => lax.digamma(x))(np.array(1.5))).toThrow(/jvp: primitive digamma has no jvp rule/);
  expect(() => grad((x: any) => np.sum(lax.scatterMul(x, np.array([[0]]), np.array([2.5]), { updateWindowDims: [], insertedWindowDims: [0], scatterDimsToOperandDims: [0] })))(np.array([1.5, 2.5]))).toThrow(
    /primitive scatter-mul has no jvp rule/,
  );
});
