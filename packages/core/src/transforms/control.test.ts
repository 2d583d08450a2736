/**
 * Control-flow primitives: results against plain JS loops, grad against the unrolled program
 * (same math without the primitive), jvp and vmap through each loop kind, and the errors.
 */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { type Array, grad, jit, jvp, lax, makeJaxpr, np, valueAndGrad, vmap } from '../index';
import { expectAllclose } from '../../test/matchers';
import { onBackend } from '../../test/backend';

const vec = (n: number) => fc.array(fc.integer({ min: -1000, max: 1000 }).map((i) => i / 500), { minLength: n, maxLength: n });
const f32 = (v: number[]) => np.array(new Float32Array(v));

const scanBody = (c: Array, x: Array): [Array, Array] => [np.add(np.multiply(np.sin(c), x), 0.5), np.multiply(c, x)];
function scanLoss(xs: Array, w: Array): Array {
  const [c, ys] = lax.scan((carry: Array, x: Array) => {
    const [c2, y] = scanBody(carry, np.multiply(x, w));
    return [c2, y];
  }, np.sum(w), xs);
  return np.add(c, np.sum(np.tanh(ys)));
}
function unrolledLoss(xs: Array, w: Array, n: number): Array {
  let c = np.sum(w);
  let acc: Array = np.zeros([]);
  for (let i = 0; i < n; i++) {
    const xi = np.sum(np.multiply(xs, np.array(new Float32Array(n).map((_, k) => (k === i ? 1 : 0)))));
    const [c2, y] = scanBody(c, np.multiply(xi, w));
    acc = np.add(acc, np.sum(np.tanh(y)));
    c = c2;
  }
  return np.add(c, acc);
}

describe('scan', () => {
  test('grad equals grad of the unrolled program (both arguments)', () => {
    fc.assert(
      fc.property(vec(4), vec(1), (xv, wv) => {
        const xs = f32(xv);
        const w = f32(wv).reshape([]);
        const g = grad(scanLoss, { argnums: [0, 1] })(xs, w) as Array[];
        const gu = grad((a: Array, b: Array) => unrolledLoss(a, b, 4), { argnums: [0, 1] })(xs, w) as Array[];
        expectAllclose(scanLoss(xs, w), unrolledLoss(xs, w, 4), { rtol: 1e-5, atol: 1e-5 });
        expectAllclose(g[0], gu[0], { rtol: 1e-4, atol: 1e-5 });
        expectAllclose(g[1], gu[1], { rtol: 1e-4, atol: 1e-5 });
      }),
      { numRuns: 5, seed: 3 },
    );
  });

  test('reverse scan, pytree carry, jvp and vmap', () => {
    const xs = f32([0.5, -1, 2]);
    const f = (v: Array) => {
      const [{ a, b }, ys] = lax.scan((c: { a: Array; b: Array }, x: Array) => [{ a: np.add(c.a, x), b: np.multiply(c.b, x) }, np.add(c.a, c.b)], { a: np.array(0.5), b: np.array(1.5) }, v, { reverse: true });
      return np.add(np.add(a, b), np.sum(np.multiply(ys, ys)));
    };
    // Loop oracle.
    let a = 0.5;
    let b = 1.5;
    let s = 0;
    for (const x of [2, -1, 0.5]) {
      s += (a + b) ** 2;
      a += x;
      b *= x;
    }
    expectAllclose(f(xs), [a + b + s], { rtol: 1e-6 });
    const [, t] = jvp(f, [xs], [f32([1, 0, 0])]) as [Array, Array];
    const g = grad(f)(xs) as Array;
    expectAllclose(t, [g.dataSync()[0]], { rtol: 1e-5 });
    const batch = np.array([[0.5, -1, 2], [1, 2, 3]]);
    const vb = vmap(f)(batch) as Array;
    expectAllclose(vb, [f(f32([0.5, -1, 2])).item() as number, f(f32([1, 2, 3])).item() as number], { rtol: 1e-6 });
    const vg = vmap(grad(f))(batch) as Array;
    expectAllclose(vg.reshape([6]), [...(grad(f)(f32([0.5, -1, 2])) as Array).dataSync(), ...(grad(f)(f32([1, 2, 3])) as Array).dataSync()], { rtol: 1e-5 });
  });

  test('stages as one scan equation and checks carry types', () => {
    const j = makeJaxpr((v: Array) => lax.scan((c: Array, x: Array) => [np.add(c, x), c], np.zeros([]), v))(f32([1, 2]));
    expect(j.jaxpr.eqns.filter((e) => e.prim.name === 'scan')).toHaveLength(1);
    expect(() => lax.scan((c: Array) => [np.zeros([2]), c], np.zeros([]), null, { length: 2 })).toThrow(/carry output 0 is f32\[2\] but the carry input is f32\[\]/);
  });
});

describe('cond / switch', () => {
  const branches = [(x: Array) => np.sin(x), (x: Array) => np.multiply(x, x), (x: Array) => np.exp(np.negative(x))];
  test('switch picks the branch; grad equals the chosen branch\'s grad; index clamps', () => {
    const x = f32([0.3, -0.7]);
    for (let i = -1; i < 4; i++) {
      const k = Math.min(Math.max(i, 0), 2);
      const f = (v: Array) => np.sum(lax.switch(np.array(i), branches, v));
      expectAllclose(f(x), np.sum(branches[k](x)));
      expectAllclose(grad(f)(x) as Array, grad((v: Array) => np.sum(branches[k](v)))(x) as Array, { rtol: 1e-6 });
    }
  });

  test('cond under grad with a closed-over parameter, under jit, and vmap with a batched predicate', () => {
    const f = (x: Array, w: Array) => lax.cond(np.greater(np.sum(x), 0), (v: Array) => np.multiply(np.sin(v), w), (v: Array) => np.multiply(np.cos(v), w), x);
    const loss = (x: Array, w: Array) => np.sum(f(x, w));
    const x = f32([0.4, 0.9]);
    const w = f32([2, -3]);
    const [gx, gw] = grad(loss, { argnums: [0, 1] })(x, w) as Array[];
    expectAllclose(gx, np.multiply(np.cos(x), w), { rtol: 1e-6 });
    expectAllclose(gw, np.sin(x), { rtol: 1e-6 });
    const [gx2] = jit(grad(loss, { argnums: [0, 1] }))(np.negative(x), w) as Array[];
    expectAllclose(gx2, np.multiply(np.negative(np.sin(np.negative(x))), w), { rtol: 1e-6 });
    const xb = np.array([[0.4, 0.9], [-0.4, -0.9]]);
    const out = vmap((xx: Array) => f(xx, w))(xb) as Array;
    expectAllclose(out, [...np.multiply(np.sin(x), w).dataSync(), ...np.multiply(np.cos(np.negative(x)), w).dataSync()], { rtol: 1e-6 });
    const gb = vmap((xx: Array) => grad(loss)(xx, w))(xb) as Array;
    const rows = [f32([0.4, 0.9]), f32([-0.4, -0.9])].map((r) => (grad(loss)(r, w) as Array).dataSync());
    expectAllclose(gb, [...rows[0], ...rows[1]], { rtol: 1e-6 });
  });

  test('branches must agree', () => {
    expect(() => lax.cond(true, (x: Array) => x, (x: Array) => np.sum(x), f32([1, 2]))).toThrow(/same types/);
    expect(() => lax.cond(np.array([true, false]), (x: Array) => x, (x: Array) => x, f32([1, 2]))).toThrow(/scalar/);
  });
});

describe('whileLoop / foriLoop', () => {
  onBackend('reference'); // the scan-over-layers gradient is checked in exact arithmetic
  test('whileLoop: values, jvp and vmap with a batched predicate', () => {
    const f = (x: Array) => lax.whileLoop((c: [Array, Array]) => lax.lt(c[1], 10), (c: [Array, Array]) => [lax.add(c[0], 1), np.multiply(c[1], 1.5)], [np.array(0), x]);
    const [n, v] = f(np.array(1.5)) as Array[];
    expect(n.item()).toBe(5);
    expectAllclose(v, [1.5 * 1.5 ** 5]);
    const [, t] = jvp((x: Array) => (f(x) as Array[])[1], [np.array(1.5)], [np.array(0.5)]) as Array[];
    expectAllclose(t, [0.5 * 1.5 ** 5], { rtol: 1e-6 });
    const [nb, vb] = vmap(f)(f32([1.5, 4, 20])) as Array[];
    expect(nb.toArray()).toEqual([5, 3, 0]);
    expectAllclose(vb, [1.5 ** 6, 4 * 1.5 ** 3, 20], { rtol: 1e-6 });
    expect(() => grad((x: Array) => (f(x) as Array[])[1])(np.array(1.5))).toThrow(/whileLoop: reverse-mode differentiation/);
  });

  test('foriLoop with static bounds differentiates like the unrolled loop; traced bounds run as a while', () => {
    fc.assert(
      fc.property(vec(3), (v) => {
        const w = f32(v);
        const body = (i: Array, c: Array) => np.add(np.multiply(np.sin(c), w), i.astype('float32'));
        const loop = (ww: Array) => np.sum(lax.foriLoop(0, 4, (i: Array, c: Array) => np.add(np.multiply(np.sin(c), ww), i.astype('float32')), np.ones([3])));
        const unrolled = (ww: Array) => {
          let c = np.ones([3]);
          for (let i = 0; i < 4; i++) c = np.add(np.multiply(np.sin(c), ww), i);
          return np.sum(c);
        };
        void body;
        expectAllclose(loop(w), unrolled(w), { rtol: 1e-5, atol: 1e-5 });
        expectAllclose(grad(loop)(w) as Array, grad(unrolled)(w) as Array, { rtol: 1e-4, atol: 1e-5 });
      }),
      { numRuns: 4, seed: 5 },
    );
    const traced = jit((n: Array) => lax.foriLoop(np.array(0), n, (_i: Array, c: Array) => np.multiply(c, 2), np.array(1.5)));
    expectAllclose(traced(np.array(3)) as Array, [12]);
    expect(makeJaxpr((n: Array) => lax.foriLoop(np.array(0), n, (_i: Array, c: Array) => c, np.array(1.5)))(np.array(3)).jaxpr.eqns.some((e) => e.prim.name === 'while')).toBe(true);
  });

  test('valueAndGrad through a scan over layers (a transformer-style stack)', () => {
    const ws = np.array([[[0.5, -0.2], [0.1, 0.3]], [[0.2, 0.1], [-0.4, 0.6]], [[0.3, 0.3], [0.2, -0.1]]]);
    const x = f32([1, -2]);
    const viaScan = (p: Array) => np.sum(lax.scan((h: Array, w: Array) => [np.tanh(np.matmul(h, w)), null], x, p)[0]);
    const unrolled = (p: Array) => {
      let h = x;
      for (let i = 0; i < 3; i++) h = np.tanh(np.matmul(h, np.array((p.toArray() as number[][][])[i]) ));
      return np.sum(h);
    };
    const [v, g] = valueAndGrad(viaScan)(ws) as [Array, Array];
    expectAllclose(v, unrolled(ws), { rtol: 1e-6 });
    // Finite differences on one weight.
    const h = 1e-2;
    const bump = (d: number) => np.add(ws, np.array(new Float32Array(12).map((_, i) => (i === 5 ? d : 0))).reshape([3, 2, 2]));
    const fd = ((viaScan(bump(h)).item() as number) - (viaScan(bump(-h)).item() as number)) / (2 * h);
    expectAllclose([g.dataSync()[5]], [fd], { rtol: 2e-3, atol: 2e-4 });
  });
});
