// vmap's axisName reaches batching rules, also those of primitives inside sub-jaxprs (jit, cond)
// that a higher-order primitive's rule batches, and an unnamed vmap passes null.
import { expect, test } from 'vitest';
import { type Array, jit, lax, np, vmap } from '../index';
import { type BatchRule, definePrimitive, moveBdim } from '../internal';

const seen: (string | null | undefined)[] = [];
const tagP = definePrimitive<Record<string, never>>({ name: 'test_axis_tag', abstractEval: ([a]) => [a], impl: ([a]) => [a.data.slice()] });
tagP.rules.batch = (([x], [d], _p, n, axisName) => {
  seen.push(axisName);
  return [[moveBdim(x, d, 0, n)], [0]];
}) satisfies BatchRule;

test('batching rules see the vmapped axis name', async () => {
  const { bind } = await import('../trace');
  const t = (x: Array) => bind(tagP, [x], {})[0];
  seen.length = 0;
  vmap(t, { axisName: 'i' })(np.ones([3, 2]));
  vmap(t)(np.ones([3, 2]));
  vmap((x: Array) => jit(t)(x), { axisName: 'j' })(np.ones([3, 2]));
  vmap((x: Array) => lax.cond(true, t, (y: Array) => y, x), { axisName: 'k' })(np.ones([3, 2]));
  vmap((x: Array) => vmap(t, { axisName: 'inner' })(x), { axisName: 'outer' })(np.ones([3, 4, 2]));
  expect(seen).toEqual(['i', null, 'j', 'k', 'inner']);
});
