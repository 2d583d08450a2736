/** The README's Transformations example, run as written (plain JS values in, checked out). */
import { expect, test } from 'vitest';
import { type Array, grad, jit, lax, makeJaxpr, np, valueAndGrad, vmap } from '../index';
import { expectAllclose } from '../../test/matchers';

test('README Transformations example', () => {
  expect(makeJaxpr((x: Array) => lax.sin(x))(np.array([1, 2, 3], 'float32')).toString()).toBe('{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }');
  const f = (x: Array) => np.sum(np.multiply(np.sin(x), x));
  expectAllclose(grad(f)(np.array([0.5, 1.5])) as Array, [0.5, 1.5].map((v) => Math.cos(v) * v + Math.sin(v)), { rtol: 1e-6 });
  const d2 = jit(vmap(grad(grad((x: Array) => np.multiply(np.sin(x), x)))))(np.array([0.5, 1.5])) as Array;
  expectAllclose(d2, [0.5, 1.5].map((v) => 2 * Math.cos(v) - v * Math.sin(v)), { rtol: 1e-5 });
  const loss = (p: { w: Array; b: Array }, x: Array) => np.mean(np.square(np.add(np.matmul(x, p.w), p.b)));
  const [value, grads] = valueAndGrad(loss)({ w: np.ones([3, 2]), b: np.zeros([2]) }, np.ones([4, 3])) as [Array, { w: Array; b: Array }];
  expectAllclose(value, [9]);
  expect(grads.w.shape).toEqual([3, 2]);
  expectAllclose(grads.b, [3, 3]);
  const m = vmap((row: Array, s: Array) => np.multiply(row, s), { inAxes: [1, null], outAxes: 0 })(np.ones([2, 3]), np.array(2.5)) as Array;
  expect(m.shape).toEqual([3, 2]);
  const layers = np.ones([4, 3, 3]);
  const run = (ws: Array, h: Array) => lax.scan((carry: Array, w: Array) => [np.tanh(np.matmul(carry, w)), null], h, ws)[0] as Array;
  const g = grad((ws: Array) => np.sum(run(ws, np.ones([3]))))(layers) as Array;
  expect(g.shape).toEqual([4, 3, 3]);
});
