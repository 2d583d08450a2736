/**
 * The transformation API end to end: jaxpr printing, tracing errors, composition to depth,
 * pytree gradients, jit's cache semantics, vmap's axis options, jacobians, custom rules,
 * stopGradient and checkpoint policies.
 */
import { describe, expect, test } from 'vitest';
import { type Array, lax, nn, np } from '../index';
import { expectAllclose } from '../../test/matchers';
import {
  ConcretizationTypeError,
  checkpoint,
  customJvp,
  customVjp,
  fnId,
  grad,
  hessian,
  jacfwd,
  jacrev,
  jit,
  jvp,
  linearize,
  makeJaxpr,
  registerCompiler,
  stopGradient,
  valueAndGrad,
  vjp,
  vmap,
} from './index';
import { linearizeFlat } from './partialEval';

const f32 = (v: number[]) => np.array(new Float32Array(v));

describe('tracing', () => {
  test('makeJaxpr prints like JAX', () => {
    expect(makeJaxpr((x: Array) => lax.sin(x))(f32([1, 2, 3])).toString()).toBe('{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }');
    const j = makeJaxpr((x: Array, y: Array) => lax.reduceSum(lax.mul(x, y), [0]))(f32([1, 2]), { shape: [2], dtype: 'float32' });
    expect(j.toString()).toBe(['{ lambda ; a:f32[2] b:f32[2]. let', '    c:f32[2] = mul a b', '    d:f32[] = reduce_sum[axes=(0,)] c', '  in (d,) }'].join('\n'));
    // Closed-over arrays become constvars; scalars become literals.
    const w = f32([1, 2]);
    const k = makeJaxpr((x: Array) => lax.add(lax.mul(x, w), lax.broadcastInDim(np.array(2.5), [2], [])))(f32([0, 0]));
    expect(k.toString()).toMatch(/^\{ lambda a:f32\[2\]; b:f32\[2\]\. let/);
    expect(k.toString()).toContain('2.5:f32[]');
    expect(k.consts[0]).toBe(w);
  });

  test('abstract values keep weak types; shape errors name the primitive and shapes', () => {
    const j = makeJaxpr((x: Array) => np.add(x, 1))(np.array(2.5));
    expect(j.jaxpr.invars[0].aval.weakType).toBe(true);
    expect(() => makeJaxpr((x: Array, y: Array) => lax.add(x, y))(f32([1, 2]), f32([1, 2, 3]))).toThrow(/add: operand shapes must be equal; got \[2\] and \[3\]/);
    expect(() => makeJaxpr((x: Array, y: Array) => np.matmul(x, y))(np.zeros([2, 3]), np.zeros([4, 5]))).toThrow(/dot_general|matmul/);
  });

  test('reading a tracer is a ConcretizationTypeError; a leaked tracer is reported', () => {
    expect(() => jit((x: Array) => (x.item() ? x : x))(np.array(1.5))).toThrow(ConcretizationTypeError);
    expect(() => grad((x: Array) => ((x.item() as number) > 0 ? x : x))(np.array(1.5))).toThrow(/Abstract tracer value/);
    let leaked: Array | null = null;
    jvp((x: Array) => {
      leaked = np.sin(x);
      return leaked;
    }, [np.array(1.5)], [np.array(1.5)]);
    expect(() => np.add(leaked!, 1)).toThrow(/escaped/);
  });
});

describe('composition', () => {
  const f = (x: Array) => np.sum(np.multiply(np.sin(x), np.exp(x)));
  const x = f32([0.3, -0.4, 1.1]);
  const d1 = (v: number) => Math.exp(v) * (Math.sin(v) + Math.cos(v));
  const d2 = (v: number) => 2 * Math.exp(v) * Math.cos(v);
  const d3 = (v: number) => 2 * Math.exp(v) * (Math.cos(v) - Math.sin(v));
  const vals = [0.3, -0.4, 1.1];
  test('grad(grad(grad)), vmap(grad), jit(vmap(grad)), grad(jit), makeJaxpr(jit(grad))', () => {
    const g3 = (v: Array) => grad(grad(grad((s: Array) => np.multiply(np.sin(s), np.exp(s)))))(v);
    expectAllclose(vmap(g3)(x) as Array, vals.map(d3), { rtol: 1e-5 });
    expectAllclose(grad(f)(x) as Array, vals.map(d1), { rtol: 1e-5 });
    const j = jit(vmap(grad((s: Array) => np.multiply(np.sin(s), np.exp(s)))));
    expectAllclose(j(x) as Array, vals.map(d1), { rtol: 1e-5 });
    expectAllclose(grad(jit(f))(x) as Array, vals.map(d1), { rtol: 1e-5 });
    expectAllclose(vmap(grad(grad((s: Array) => np.multiply(np.sin(s), np.exp(s)))))(x) as Array, vals.map(d2), { rtol: 1e-5 });
    expect(makeJaxpr(jit(grad(f)))(x).jaxpr.eqns[0].prim.name).toBe('pjit');
    expectAllclose(jit(jit(grad(f)))(x) as Array, vals.map(d1), { rtol: 1e-5 });
  });

  test('pytree arguments: grads have the same structure; argnums; hasAux; valueAndGrad', () => {
    const params = { w: f32([1, 2]), b: [np.array(0.5), f32([3])] };
    const loss = (p: typeof params, s: Array) => np.sum(np.multiply(np.add(np.multiply(p.w, s), p.b[0]), p.b[1]));
    const g = grad(loss)(params, np.array(2.5)) as typeof params;
    expectAllclose(g.w, [7.5, 7.5]);
    expectAllclose(g.b[0], [6]);
    expectAllclose(g.b[1], [(1 * 2.5 + 0.5) + (2 * 2.5 + 0.5)]);
    const [gp, gs] = grad(loss, { argnums: [0, 1] })(params, np.array(2.5)) as [typeof params, Array];
    expectAllclose(gs, [9]);
    expect(Object.keys(gp).sort()).toEqual(['b', 'w']);
    const [[v, aux], gg] = valueAndGrad((p: Array) => [np.sum(np.square(p)), { n: np.sum(p) }], { hasAux: true })(f32([1, 2])) as [[Array, { n: Array }], Array];
    expectAllclose(v, [5]);
    expectAllclose(aux.n, [3]);
    expectAllclose(gg, [2, 4]);
    expect(() => grad((p: Array) => p)(f32([1, 2]))).toThrow(/must return a scalar; it returned shape \[2\]/);
    expect(() => grad((p: Array) => np.sum(p))(np.array([1, 2]))).toThrow(/requires floating-point inputs.*int32/);
  });

  test('jvp, linearize and vjp agree', () => {
    const h = (a: Array, b: Array) => ({ y: np.multiply(np.sin(a), b) });
    const a = f32([0.2, 0.7]);
    const b = f32([1.5, -2]);
    const ta = f32([1, 0.5]);
    const tb = f32([0.25, 1]);
    const [out, tout] = jvp(h, [a, b], [ta, tb]) as [{ y: Array }, { y: Array }];
    const [out2, fl] = linearize(h, a, b);
    expectAllclose((out2 as { y: Array }).y, out.y);
    expectAllclose((fl(ta, tb) as { y: Array }).y, tout.y, { rtol: 1e-6 });
    const [, fv] = vjp(h, a, b);
    const [ga, gb] = fv({ y: f32([1, 1]) }) as Array[];
    expectAllclose(ga, np.multiply(np.cos(a), b), { rtol: 1e-6 });
    expectAllclose(gb, np.sin(a), { rtol: 1e-6 });
  });
});

describe('vmap options', () => {
  test('inAxes per argument with null, outAxes, nested vmap, axisSize and size errors', () => {
    const m = np.array([[1, 2, 3], [4, 5, 6]]).astype('float32');
    const v = f32([10, 20]);
    const out = vmap((row: Array, s: Array) => np.multiply(row, s), { inAxes: [1, null] })(m, np.array(2.5)) as Array;
    expect(out.shape).toEqual([3, 2]);
    expectAllclose(out, [2.5, 10, 5, 12.5, 7.5, 15]);
    const o2 = vmap((row: Array, s: Array) => np.add(row, s), { inAxes: [0, 0], outAxes: 1 })(m, v) as Array;
    expect(o2.shape).toEqual([3, 2]);
    expectAllclose(o2, [11, 24, 12, 25, 13, 26]);
    const outer = vmap(vmap((a: Array, b: Array) => np.multiply(a, b), { inAxes: [0, null] }), { inAxes: [null, 0] })(v, m) as Array;
    expect(outer.shape).toEqual([2, 2, 3]);
    const mv = [[1, 2, 3], [4, 5, 6]];
    expectAllclose(outer, [0, 1].flatMap((i) => [10, 20].flatMap((vj) => mv[i].map((mk) => vj * mk))));
    const c = vmap(() => np.ones([2]), { axisSize: 3 })() as Array;
    expect(c.shape).toEqual([3, 2]);
    const pt = vmap((p: { a: Array; b: Array }) => np.add(p.a, p.b), { inAxes: [{ a: 0, b: null }] })({ a: m, b: f32([1, 1, 1]) }) as Array;
    expectAllclose(pt, [2, 3, 4, 5, 6, 7]);
    // Batched dynamic_slice starts (vectorised as a gather), clamped like the loop.
    const big = np.arange(0, 20).astype('float32').reshape([4, 5]);
    const starts = np.array([0, 3, 2]);
    const ds = vmap((i: Array) => lax.dynamicSlice(big, [i, np.array(1)], [2, 3]))(starts) as Array;
    const loop = [0, 3, 2].flatMap((i) => globalThis.Array.from((lax.dynamicSlice(big, [np.array(i), np.array(1)], [2, 3]) as Array).dataSync()));
    expectAllclose(ds, loop);
    const both = vmap((b: Array, i: Array) => lax.dynamicSlice(b, [i, i], [2, 2]))(np.stack([big, np.negative(big), big]), starts) as Array;
    const loop2 = [0, 3, 2].flatMap((i, k) => globalThis.Array.from((lax.dynamicSlice(k === 1 ? np.negative(big) : big, [np.array(i), np.array(i)], [2, 2]) as Array).dataSync()));
    expectAllclose(both, loop2);
    expect(makeJaxpr(vmap((i: Array) => lax.dynamicSlice(big, [i, np.array(1)], [2, 3])))(starts).jaxpr.eqns.some((e) => e.prim.name === 'gather')).toBe(true);
    // Batched starts for dynamic_update_slice and batched scatter indices (vectorised).
    const upd = np.ones([2, 2]);
    const dus = vmap((i: Array) => lax.dynamicUpdateSlice(big, upd, [i, i]))(starts) as Array;
    const loop3 = [0, 3, 2].flatMap((i) => globalThis.Array.from((lax.dynamicUpdateSlice(big, upd, [np.array(i), np.array(i)]) as Array).dataSync()));
    expectAllclose(dus, loop3);
    const sdn = { updateWindowDims: [1], insertedWindowDims: [0], scatterDimsToOperandDims: [0] };
    const idxs = np.array([[[1], [3]], [[0], [0]], [[2], [1]]]);
    const sa = vmap((ix: Array, u: Array) => lax.scatterAdd(big, ix, u, sdn))(idxs, np.stack([np.ones([2, 5]), np.full([2, 5], 2, 'float32'), np.full([2, 5], 3, 'float32')])) as Array;
    const loop4 = [0, 1, 2].flatMap((b) => globalThis.Array.from((lax.scatterAdd(big, [[[1], [3]], [[0], [0]], [[2], [1]]][b], np.full([2, 5], b + 1, 'float32'), sdn) as Array).dataSync()));
    expectAllclose(sa, loop4);
    expect(() => vmap((a: Array, b: Array) => np.add(a, b))(m, f32([1, 2, 3]))).toThrow(/inconsistent sizes.*size 2.*size 3/);
    expect(() => vmap((a: Array) => a, { outAxes: null })(m)).toThrow(/outAxes entry is null/);
  });
});

describe('jit', () => {
  test('fnId: a function keeps one id, every other function (same source too) gets another; static functions key jit by it', () => {
    const make = () => (x: Array) => np.multiply(x, 2);
    const [a, b] = [make(), make()];
    expect(fnId(a)).toBe(fnId(a));
    expect(fnId(b)).not.toBe(fnId(a));
    expect(new Set([fnId(a), fnId(b), fnId(make), fnId(Math.sin)]).size).toBe(4);
    const apply = jit((x: Array, act: (v: Array) => Array) => act(x), { staticArgnums: [1] });
    apply(f32([1]), a);
    apply(f32([1]), a);
    expect(apply.traceCount).toBe(1);
    expectAllclose(apply(f32([3]), b) as Array, [6]);
    expect(apply.traceCount).toBe(2);
  });

  test('traces once per abstract signature; static argnums/argnames; donation', () => {
    let calls = 0;
    const f = jit((x: Array, n: number, o: { scale: number }) => {
      calls++;
      return np.multiply(np.add(x, n), o.scale);
    }, { staticArgnums: [1], staticArgnames: ['scale'] });
    expectAllclose(f(f32([1, 2]), 1, { scale: 2 }) as Array, [4, 6]);
    f(f32([5, 6]), 1, { scale: 2 });
    expect(f.traceCount).toBe(1);
    f(f32([5, 6]), 2, { scale: 2 });
    f(f32([5, 6]), 2, { scale: 3 });
    f(f32([5, 6, 7]), 2, { scale: 3 });
    f(np.array([5, 6]), 2, { scale: 3 });
    expect(f.traceCount).toBe(5);
    expect(calls).toBe(5);
    const g = jit((x: Array) => np.multiply(x, 2), { donateArgnums: 0 });
    const a = f32([1, 2]);
    expectAllclose(g(a) as Array, [2, 4]);
    expect(a.isDisposed).toBe(true);
  });

  test('a registered compiler receives the jaxpr; null restores op-by-op', () => {
    const seen: string[] = [];
    const prev = registerCompiler({
      name: 'test',
      compile: (jaxpr) => {
        seen.push(jaxpr.toString());
        return (args) => args.map((x) => np.negative(x));
      },
    });
    try {
      const f = jit((x: Array) => np.sin(x));
      expectAllclose(f(f32([1])) as Array, [-1]);
      expect(seen[0]).toContain('sin');
    } finally {
      registerCompiler(prev);
    }
    expectAllclose(jit((x: Array) => np.sin(x))(f32([1])) as Array, [Math.sin(1)], { rtol: 1e-6 });
  });
});

describe('jacobians', () => {
  test('jacfwd and jacrev agree with each other and with the analytic Jacobian; hessian', () => {
    const f = (x: Array) => np.multiply(np.sin(x), np.sum(x));
    const x = f32([0.5, -1, 2]);
    const s = 1.5;
    const expected = [0.5, -1, 2].flatMap((xi, i) => [0, 1, 2].map((j) => (i === j ? Math.cos(xi) * s : 0) + Math.sin(xi)));
    expectAllclose(jacfwd(f)(x) as Array, expected, { rtol: 1e-5 });
    expectAllclose(jacrev(f)(x) as Array, expected, { rtol: 1e-5 });
    const q = (v: Array) => np.sum(np.multiply(np.multiply(v, v), v));
    const h = hessian(q)(x) as Array;
    expect(h.shape).toEqual([3, 3]);
    expectAllclose(h, [3, 0, 0, 0, -6, 0, 0, 0, 12], { rtol: 1e-5, atol: 1e-5 });
    const pj = jacrev((p: { a: Array; b: Array }) => np.multiply(p.a, p.b))({ a: f32([1, 2]), b: f32([3, 4]) }) as { a: Array; b: Array };
    expectAllclose(pj.a, [3, 0, 0, 4]);
    expectAllclose(pj.b, [1, 0, 0, 2]);
  });
});

describe('custom rules', () => {
  test('stopGradient blocks the gradient; softmax / logsumexp (which stop the max shift) differentiate right', () => {
    const g = grad((x: Array) => np.sum(np.multiply(x, stopGradient(x))))(f32([2, 3])) as Array;
    expectAllclose(g, [2, 3]);
    const x = f32([0.5, -1, 2, 2]);
    const e = [0.5, -1, 2, 2].map(Math.exp);
    const z = e.reduce((a, b) => a + b, 0);
    expectAllclose(grad((v: Array) => nn.logsumexp(v))(x) as Array, e.map((v) => v / z), { rtol: 1e-6 });
    const w = f32([1, 2, -1, 0.5]);
    const sm = e.map((v) => v / z);
    const dot = sm.reduce((a, p, i) => a + p * [1, 2, -1, 0.5][i], 0);
    expectAllclose(grad((v: Array) => np.sum(np.multiply(nn.softmax(v), w)))(x) as Array, sm.map((p, i) => p * ([1, 2, -1, 0.5][i] - dot)), { rtol: 1e-5, atol: 1e-7 });
    expectAllclose(grad((v: Array) => np.sum(np.multiply(nn.logSoftmax(v), w)))(x) as Array, [1, 2, -1, 0.5].map((wi, i) => wi - 2.5 * sm[i]), { rtol: 1e-5, atol: 1e-6 });
  });

  test('customJvp: the rule is used by jvp, grad, vmap and jit', () => {
    const safeLog1pExp = customJvp((x: Array) => np.log(np.add(1, np.exp(x))));
    safeLog1pExp.defjvp(([x], [t]) => [safeLog1pExp.call(null, x) as Array, np.multiply(t, nn.sigmoid(x as Array))]);
    // A deliberately different rule shows the rule is what differentiation uses.
    const twice = customJvp((x: Array) => np.sin(x)).defjvp(([x], [t]) => [np.sin(x as Array), np.multiply(t, 2)]);
    expectAllclose(grad((x: Array) => np.sum(twice(x)))(f32([0.3, 1])) as Array, [2, 2]);
    expectAllclose(twice(f32([0.3])) as Array, [Math.sin(0.3)], { rtol: 1e-6 });
    const big = f32([100]);
    expectAllclose(grad((x: Array) => np.sum(safeLog1pExp(x)))(big) as Array, [1]);
    expectAllclose(vmap(grad((x: Array) => safeLog1pExp(x)))(f32([0, 100])) as Array, [0.5, 1]);
    expectAllclose(jit(grad((x: Array) => np.sum(twice(x))))(f32([5])) as Array, [2]);
    expectAllclose(grad(grad((x: Array) => twice(x)))(np.array(0.5)) as Array, [0]);
  });

  test('customVjp: bwd is used by grad (also under vmap and jit); forward mode is an error', () => {
    const clipGrad = customVjp((x: Array) => np.multiply(x, 3)).defvjp(
      (x: Array) => [np.multiply(x, 3), x],
      (x: Array, ct: Array) => [np.clip(np.multiply(ct, 3), -1, 1)],
    );
    expectAllclose(grad((x: Array) => np.sum(clipGrad(x)))(f32([1, 2])) as Array, [1, 1]);
    expectAllclose(clipGrad(f32([1, 2])) as Array, [3, 6]);
    expectAllclose(vmap(grad((x: Array) => np.multiply(clipGrad(x), 0.1)))(f32([1, 2])) as Array, [0.3, 0.3], { rtol: 1e-6 });
    expectAllclose(jit(grad((x: Array) => np.sum(clipGrad(x))))(f32([1])) as Array, [1]);
    expectAllclose(grad((x: Array) => np.sum(vmap(clipGrad)(x)))(f32([1, 2])) as Array, [1, 1]);
    expect(() => jvp(clipGrad, [f32([1])], [f32([1])])).toThrow(/forward-mode differentiation.*customVjp/);
  });
});

describe('checkpoint', () => {
  const block = (w: Array, x: Array) => np.tanh(np.matmul(np.tanh(np.matmul(x, w)), w));
  const w = np.array([[0.5, -0.3], [0.2, 0.8]]).astype('float32');
  const x = np.array([[1, 2], [3, -1]]).astype('float32');
  test('policies give the same gradients and save fewer residuals', () => {
    const plain = grad((ww: Array) => np.sum(block(ww, x)))(w) as Array;
    const counts: Record<string, number> = {};
    for (const policy of ['nothing_saveable', 'dots_saveable', 'everything_saveable'] as const) {
      const f = checkpoint(block, { policy });
      expectAllclose(grad((ww: Array) => np.sum(f(ww, x)))(w) as Array, plain, { rtol: 1e-6 });
      const [, lin] = linearizeFlat((ww) => [np.sum(f(ww, x))], [w], [true]);
      // Residuals kept for the backward pass = constants of the linear jaxpr (values that are Arrays).
      counts[policy] = lin.jaxpr.consts.length;
    }
    const [, linPlain] = linearizeFlat((ww) => [np.sum(block(ww, x))], [w], [true]);
    expect(counts.nothing_saveable).toBeLessThan(counts.dots_saveable);
    expect(counts.dots_saveable).toBeLessThanOrEqual(linPlain.jaxpr.consts.length);
    expect(counts.nothing_saveable).toBeLessThan(linPlain.jaxpr.consts.length);
    expectAllclose(vmap(grad((ww: Array) => np.sum(checkpoint(block)(ww, x))))(np.stack([w, w])) as Array, [...plain.dataSync(), ...plain.dataSync()], { rtol: 1e-6 });
  });
  test('checkpoint: preventCse must be a boolean', () => {
    expect(() => checkpoint(block, { preventCse: 'yes' as never })).toThrow(/checkpoint: preventCse must be a boolean, got "?yes/);
  });

  test('the backward recomputation reads its inputs through an optimization barrier unless preventCse is false', () => {
    const count = (preventCse: boolean): number => {
      const j = makeJaxpr((ww: Array) => grad((v: Array) => np.sum(checkpoint(block, { preventCse })(v, x)))(ww))(w);
      return j.jaxpr.eqns.filter((e) => e.prim.name === 'optimization_barrier').length;
    };
    expect(count(true)).toBe(1);
    expect(count(false)).toBe(0);
    // everything_saveable recomputes nothing: no barrier.
    const all = makeJaxpr((ww: Array) => grad((v: Array) => np.sum(checkpoint(block, { policy: 'everything_saveable' })(v, x)))(ww))(w);
    expect(all.jaxpr.eqns.some((e) => e.prim.name === 'optimization_barrier')).toBe(false);
  });
});

describe('lax.optimizationBarrier', () => {
  const a = np.array([1, -2, 3]).astype('float32');
  const b = np.array([[4, 5]]).astype('int32');
  test('is the identity on a pytree, eagerly and under the transformations', () => {
    const out = lax.optimizationBarrier({ a, pair: [b, a] });
    expect(out.a.dataSync()).toEqual(a.dataSync());
    expect(out.pair[0].dtype).toBe('int32');
    expect(out.pair[0].dataSync()).toEqual(b.dataSync());
    expect(lax.optimizationBarrier({})).toEqual({});
    // d/dx sum(barrier(x)^2 * 3) = 6x: jvp and transpose pass tangents and cotangents through.
    expectAllclose(grad((v: Array) => np.sum(np.multiply(np.square(lax.optimizationBarrier(v)), 3)))(a) as Array, [6, -12, 18], { rtol: 1e-6 });
    const [, t] = jvp((v: Array) => lax.optimizationBarrier(np.sin(v)), [a], [np.onesLike(a)]);
    expectAllclose(t as Array, globalThis.Array.from(a.dataSync(), (v: number) => Math.cos(v)), { rtol: 1e-6 });
    // A barrier over an integer and a float operand: the integer carries no tangent.
    const g = grad((v: Array) => np.sum(np.multiply(lax.optimizationBarrier([v, b])[0], 2)))(a) as Array;
    expectAllclose(g, [2, 2, 2], { rtol: 0 });
    const batched = vmap((v: Array) => lax.optimizationBarrier(np.multiply(v, 2)))(np.stack([a, a])) as Array;
    expect(batched.shape).toEqual([2, 3]);
    expectAllclose(batched, [2, -4, 6, 2, -4, 6], { rtol: 0 });
  });

  test('JS number and boolean leaves become arrays (weakly typed numbers, as JAX makes Python scalars), eagerly and under jit', () => {
    const one = lax.optimizationBarrier(3) as unknown as Array;
    expect([one.dtype, one.weakType, one.shape, [...one.dataSync()]]).toEqual(['int32', true, [], [3]]);
    const [x, y, z] = lax.optimizationBarrier([2.5, true, a]) as unknown as Array[];
    expect([x.dtype, x.weakType, [...x.dataSync()]]).toEqual(['float32', true, [2.5]]);
    expect([y.dtype, y.shape, [...y.dataSync()]]).toEqual(['bool', [], [1]]);
    expect(z.dataSync()).toEqual(a.dataSync());
    // Weak: a barrier'd 3 times a float32 array stays float32 (an int32 array would promote it).
    const j = jit((v: Array) => np.multiply(v, lax.optimizationBarrier(3) as unknown as Array));
    const r = j(a) as Array;
    expect(r.dtype).toBe('float32');
    expectAllclose(r, [3, -6, 9], { rtol: 0 });
    expect(() => lax.optimizationBarrier(['x'] as never)).toThrow(/optimizationBarrier: leaf 0 of the pytree is .*; expected an Array/);
  });

  test('stages as one optimization_barrier equation over all leaves', () => {
    const j = makeJaxpr((u: Array, v: Array) => lax.optimizationBarrier([u, v]))(a, b);
    const eqns = j.jaxpr.eqns.filter((e) => e.prim.name === 'optimization_barrier');
    expect(eqns.length).toBe(1);
    expect(eqns[0].inputs.length).toBe(2);
    expect(eqns[0].outBinders.map((v) => v.aval.dtype)).toEqual(['float32', 'int32']);
  });
});
